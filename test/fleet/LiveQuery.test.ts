/**
 * Live queries across real replicas: `docs.list` is followed over WebSocket on three replicas while
 * one of them writes and is killed -9 in the middle of its writes (some in flight). Afterwards every surviving subscriber's last pushed result is the committed
 * table, read straight from PostgreSQL: a change committed on another replica re-runs the query
 * there (through the fleet outbox), none is missed, and no stale result is pushed last.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import * as Client from "../../src/client/Client.js"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import { create, Docs, list, retitle } from "./app.js"
import * as Fleet from "./support.js"

type Rows = ReadonlyArray<{ readonly id: string; readonly title: string }>

/** Follows `docs.list` on `replica` over WebSocket; `last()` is the newest pushed result. */
const follow = (replica: Fleet.Replica) =>
  Effect.gen(function*() {
    const ws = yield* Client.connect([list], Client.layerWebSocket(`${replica.url.replace("http:", "ws:")}/rpc`))
    let last: Rows | undefined
    let pushes = 0
    const fiber = yield* ws.live(list, {}).pipe(
      Stream.runForEach((rows) => Effect.sync(() => (last = rows, pushes++))),
      Effect.either,
      Effect.forkScoped
    )
    yield* Fleet.eventually(Effect.sync(() => last), (rows) => rows !== undefined)
    return { name: replica.name, fiber, last: () => last, pushes: () => pushes }
  })

const committedRows = (url: string) =>
  Fleet.withPg(url, (c) => c.query<{ id: string; title: string }>(`SELECT id, title FROM docs`).then((r) => r.rows))

describe.skipIf(Pg.serverUrl === null)("live queries across replicas (real processes)", () => {
  it.scopedLive("subscribers on the surviving replicas end on the committed rows; one subscribed replica killed -9 mid-writes", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      const [a, b, w] = yield* Effect.all([Fleet.start("a", url), Fleet.start("b", url), Fleet.start("w", url)], { concurrency: "unbounded" })
      const subscribers = yield* Effect.all([follow(a), follow(b), follow(w)])

      for (let i = 0; i < 8; i++) yield* w.client.call(create, { id: `doc-${i}`, title: "t" })
      // 80 writes on w, 12 in flight, w killed -9 after 30 answers; one in four creates a doc, the
      // others retitle one of eight.
      let done = 0
      const writes = Effect.forEach(Array.from({ length: 80 }, (_, i) => i), (i) => {
        const write = i % 4 === 0
          ? w.client.call(create, { id: `new-${i}`, title: `t${i}` })
          : w.client.call(retitle, { id: `doc-${i % 8}`, title: `t${i}` })
        return Effect.ensuring(Effect.either(write), Effect.sync(() => void done++))
      }, { concurrency: 12, discard: true })
      const burst = yield* Effect.fork(writes)
      yield* Fleet.eventually(Effect.sync(() => done), (n) => n >= 30)
      yield* Fleet.kill(w)
      yield* Fiber.join(burst)
      // No write after the kill: a and b (which never write) see w's changes only through the fleet
      // outbox (a write of theirs would re-run their query on the whole table). What w committed but
      // could not announce before it died arrives by the periodic read (1 s here).

      const sorted = (rows: Rows | undefined) => [...(rows ?? [])].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0))
      const committed = sorted(yield* committedRows(url))
      const problems: Array<string> = []
      for (const subscriber of subscribers.slice(0, 2)) {
        const last = yield* Fleet.eventually(Effect.sync(() => sorted(subscriber.last())), (rows) => JSON.stringify(rows) === JSON.stringify(committed))
        if (JSON.stringify(last) !== JSON.stringify(committed)) {
          problems.push(`${subscriber.name}: last pushed ${last.length} rows ≠ committed ${committed.length} rows`)
        }
      }
      // The killed replica's subscription ends with it (it is not a survivor).
      const wEnded = yield* Fiber.poll(subscribers[2]!.fiber)
      console.log(
        `fleet live queries: 88 writes (${committed.length} rows committed), kill -9 of w (writer and subscriber) after 30 answers; ` +
          `pushes a=${subscribers[0]!.pushes()} b=${subscribers[1]!.pushes()} w=${subscribers[2]!.pushes()} (w's stream ended: ${wEnded._tag === "Some"}); problems: ${problems.length}`
      )
      assert.deepStrictEqual(problems, [])
    }), { timeout: 120_000 })
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
