/**
 * SSE fan-out of a projected live query: the members of one group (identical subscriptions) share
 * the work of a re-run — the result is encoded once and the delta frame is built once, every member
 * sending the same bytes — while each member's guards still run per push (an effectful guard too);
 * and every open stream gets its keep-alive from the one shared timer while pushes keep flowing.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Runtime from "../../src/app/Runtime.js"
import * as LiveQuery from "../../src/http/LiveQuery.js"
import * as Sse from "../../src/http/Sse.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import type { StoreShape } from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Ticks = defineTable("fanout_ticks", { fields: { n: Schema.Number } })

/** The handler of every query here: the highest tick. */
const latestTick = (store: StoreShape) =>
  Effect.map(store.find(Ticks, { orderBy: "n", direction: "desc", limit: 1 }), (rows) => rows[0]?.n ?? 0)

/** Encodings of the output, counted: what sharing saves. */
let encodes = 0
const CountedNumber = Schema.transform(Schema.Number, Schema.Number, {
  strict: true,
  decode: (n) => n,
  encode: (n) => {
    encodes += 1
    return n
  }
})

const latest = query("fanout.latest", {
  input: Schema.Struct({}),
  output: CountedNumber,
  handler: (_, { store }) => latestTick(store)
})

const Bans = defineTable("fanout_bans", { fields: { seat: Schema.String } })

/** The same query behind a guard that reads the store: it takes the members' full check path. */
const banned = query("fanout.banned", {
  input: Schema.Struct({}),
  output: Schema.Number,
  guards: [(ctx) =>
    Effect.map(Effect.orDie(ctx.store.find(Bans, {})), (rows) =>
      rows.some((row) => row.seat === ctx.headers["x-seat"]) ? { status: 403, message: "banned" } : undefined)],
  handler: (_, { store }) => latestTick(store)
})

/** Whether the seats are closed, read by a synchronous guard; and how often that guard ran. */
let closed = false
let seatChecks = 0
const seated = query("fanout.seated", {
  input: Schema.Struct({}),
  output: Schema.Number,
  guards: [() => {
    seatChecks += 1
    return closed ? { status: 403, message: "closed" } : undefined
  }],
  handler: (_, { store }) => latestTick(store)
})

/** A synchronous guard before an effectful one, both counted. */
const twoGuardCalls = { sync: 0, effectful: 0 }
const twoGuards = query("fanout.twoGuards", {
  input: Schema.Struct({}),
  output: Schema.Number,
  guards: [
    () => {
      twoGuardCalls.sync += 1
      return undefined
    },
    () => Effect.sync(() => void (twoGuardCalls.effectful += 1))
  ],
  handler: (_, { store }) => latestTick(store)
})

const app = defineApp({ name: "live-fanout", tables: [Ticks, Bans], procedures: [latest, banned, seated, twoGuards] })

const stack = Runtime.layer(app).pipe(
  Layer.provideMerge(Store.layerMemory),
  Layer.provideMerge(ChangeTap.layerLocal),
  Layer.provide(FetchHttpClient.layer)
)

const decoder = new TextDecoder()

/**
 * Opens `count` SSE answers of `procedure`, one per seat (`x-seat: 0`, `1`, ...), each a stream
 * body, and reads each body with `read`.
 */
const openAnswers = <A, E, R>(
  count: number,
  procedure: typeof latest | typeof banned | typeof seated | typeof twoGuards,
  read: (body: Stream.Stream<Uint8Array, unknown>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const runtime = yield* Runtime.Runtime
    return yield* Effect.forEach(Array.from({ length: count }, (_, i) => i), (seat) =>
      Effect.gen(function*() {
        const headers = Headers.fromInput({ "x-seat": String(seat) })
        const response = yield* LiveQuery.answer(runtime, procedure, { input: {}, headers }, Effect.void)
        assert.strictEqual(response.body._tag, "Stream")
        return yield* read(response.body._tag === "Stream" ? response.body.stream : Stream.empty)
      }))
  })

/** Opens `count` SSE answers of the live query; each collects its body's frames (as bytes) in order. */
const openStreams = (count: number, procedure: typeof latest | typeof banned = latest) =>
  openAnswers(count, procedure, (body) =>
    Effect.gen(function*() {
      const frames: Array<Uint8Array> = []
      yield* body.pipe(Stream.runForEach((bytes) => Effect.sync(() => void frames.push(bytes))), Effect.forkScoped)
      return frames
    }))

/**
 * Opens `count` SSE answers of `procedure` read as fw's Node writer reads them (`Sse.pullOf`): each
 * keeps the frames its `next` answered (`pulled`) apart from those handed synchronously to its sink
 * (`synced`); the sink takes frames while `ready()`.
 */
const openPulled = (count: number, procedure: typeof latest | typeof banned | typeof seated | typeof twoGuards, ready: () => boolean) =>
  openAnswers(count, procedure, (body) =>
    Effect.gen(function*() {
      const open = Sse.pullOf(body)
      assert.isDefined(open, "a live query's body can be read frame by frame")
      const { listen, next } = yield* open!
      const pulled: Array<string> = []
      const synced: Array<string> = []
      listen({ ready, take: (frame) => void synced.push(decoder.decode(frame)) })
      const loop: Effect.Effect<void> = Effect.flatMap(next, (frame) => {
        if (frame === undefined) return Effect.void
        pulled.push(decoder.decode(frame))
        return loop
      })
      const reader = yield* Effect.forkScoped(loop)
      return { pulled, synced, reader }
    }))

/** Waits (yielding to the other fibers) until `count(stream)` reaches `n` for every stream. */
const reach = <S>(streams: ReadonlyArray<S>, count: (stream: S) => number, n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000 && streams.some((stream) => count(stream) < n); i++) yield* Effect.yieldNow()
    for (const stream of streams) assert.strictEqual(count(stream), n)
  })

/** Waits (yielding to the other fibers) until every stream holds `n` frames. */
const framesReach = (streams: ReadonlyArray<Array<Uint8Array>>, n: number) => reach(streams, (frames) => frames.length, n)

describe("SSE fan-out: synchronous writes", () => {
  it.scopedLive("a change that passes a member's synchronous checks is written in the pass that announced it, its reader still waiting", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const streams = yield* openPulled(20, latest, () => true)
      yield* reach(streams, (s) => s.pulled.length, 2)
      yield* store.insert(Ticks, { n: 7 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.synced.length, 1)
      yield* store.insert(Ticks, { n: 8 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.synced.length, 2)
      for (const { pulled, reader, synced } of streams) {
        assert.deepStrictEqual(synced, [`id: 2\nevent: delta\ndata: {"data":7}\n\n`, `id: 3\nevent: delta\ndata: {"data":8}\n\n`])
        assert.strictEqual(pulled.length, 2, "nothing went through the reader")
        assert.isTrue(Option.isNone(yield* Fiber.poll(reader)))
      }
    }).pipe(Effect.provide(stack)))

  it.scopedLive("a synchronous guard runs once per member per change; its refusal ends the member through the reader with the error event", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      closed = false
      const streams = yield* openPulled(5, seated, () => true)
      yield* reach(streams, (s) => s.pulled.length, 2)
      seatChecks = 0
      yield* store.insert(Ticks, { n: 4 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.synced.length, 1)
      assert.strictEqual(seatChecks, 5, "one guard run per member")
      closed = true
      yield* store.insert(Ticks, { n: 5 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.pulled.length, 3)
      for (const { pulled, reader, synced } of streams) {
        assert.strictEqual(pulled[2], `id: 3\nevent: error\ndata: {"_tag":"GuardRefused","message":"closed"}\n\n`)
        assert.strictEqual(synced.length, 1)
        yield* Fiber.join(reader)
      }
      assert.strictEqual(seatChecks, 10, "the refusal was not checked twice")
      closed = false
    }).pipe(Effect.provide(stack)))

  it.scopedLive("a member whose writer is not ready, or whose guard reads the store, gets its frames through the reader", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const busy = yield* openPulled(3, latest, () => false)
      const effectful = yield* openPulled(3, banned, () => true)
      const streams = [...busy, ...effectful]
      yield* reach(streams, (s) => s.pulled.length, 2)
      yield* store.insert(Ticks, { n: 9 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.pulled.length, 3)
      for (const { pulled, synced } of streams) {
        assert.strictEqual(pulled[2], `id: 2\nevent: delta\ndata: {"data":9}\n\n`)
        assert.strictEqual(synced.length, 0)
      }
    }).pipe(Effect.provide(stack)))

  it.scopedLive("a synchronous guard before an effectful one runs once per member per change, as the effectful one does", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const streams = yield* openPulled(3, twoGuards, () => true)
      yield* reach(streams, (s) => s.pulled.length, 2)
      twoGuardCalls.sync = 0
      twoGuardCalls.effectful = 0
      yield* store.insert(Ticks, { n: 6 }).pipe(Subject.asSystem)
      yield* reach(streams, (s) => s.pulled.length, 3)
      assert.deepStrictEqual(twoGuardCalls, { sync: 3, effectful: 3 })
    }).pipe(Effect.provide(stack)))
})

describe("SSE fan-out of a live query", () => {
  it.scopedLive("the members of a group share one encoding of the result and the same delta bytes", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const streams = yield* openStreams(20)
      yield* framesReach(streams, 2)
      for (const frames of streams) {
        assert.strictEqual(decoder.decode(frames[0]), `retry: ${Sse.retryMillis}\n\n`)
        assert.strictEqual(decoder.decode(frames[1]), `id: 1\nevent: snapshot\ndata: {"data":0}\n\n`)
      }
      // From here on a change is one re-run, one encoding and one delta frame for all 20.
      encodes = 0
      yield* store.insert(Ticks, { n: 7 }).pipe(Subject.asSystem)
      yield* framesReach(streams, 3)
      assert.strictEqual(encodes, 1, "the shared result is encoded once, not once per subscriber")
      for (const frames of streams) {
        assert.strictEqual(decoder.decode(frames[2]), `id: 2\nevent: delta\ndata: {"data":7}\n\n`)
      }
    }).pipe(Effect.provide(stack)))

  it.scoped("every stream gets a keep-alive every 15 seconds from the shared timer, and pushes still follow", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const streams = yield* openStreams(3)
      yield* framesReach(streams, 2)
      yield* TestClock.adjust("14 seconds")
      yield* framesReach(streams, 2)
      yield* TestClock.adjust("1 second")
      yield* framesReach(streams, 3)
      for (const frames of streams) assert.strictEqual(decoder.decode(frames[2]), Sse.keepAliveFrame)
      yield* store.insert(Ticks, { n: 3 }).pipe(Subject.asSystem)
      yield* framesReach(streams, 4)
      for (const frames of streams) assert.strictEqual(decoder.decode(frames[3]), `id: 2\nevent: delta\ndata: {"data":3}\n\n`)
      yield* TestClock.adjust("15 seconds")
      yield* framesReach(streams, 5)
      for (const frames of streams) assert.strictEqual(decoder.decode(frames[4]), Sse.keepAliveFrame)
    }).pipe(Effect.provide(stack)))

  it.scopedLive("an effectful guard is still run per member around the shared result: a write it reads ends that member only", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const streams = yield* openStreams(3, banned)
      yield* framesReach(streams, 2)
      yield* store.insert(Bans, { seat: "1" }).pipe(Subject.asSystem)
      yield* framesReach([streams[1]!], 3)
      assert.strictEqual(decoder.decode(streams[1]![2]), `id: 2\nevent: error\ndata: {"_tag":"GuardRefused","message":"banned"}\n\n`)
      yield* store.insert(Ticks, { n: 5 }).pipe(Subject.asSystem)
      yield* framesReach([streams[0]!, streams[2]!], 3)
      for (const frames of [streams[0]!, streams[2]!]) {
        assert.strictEqual(decoder.decode(frames[2]), `id: 2\nevent: delta\ndata: {"data":5}\n\n`)
      }
      assert.strictEqual(streams[1]!.length, 3, "the refused member's stream ended with its error event")
    }).pipe(Effect.provide(stack)))
})
