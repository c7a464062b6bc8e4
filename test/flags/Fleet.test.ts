/**
 * Two app instances on one PostgreSQL database (fleet change scope): a toggle on one is seen by
 * `isFlagEnabled` on the other (polled, no fixed sleep), pushed to the other's live subscribers,
 * and the audit trail has one row per flip with its actor.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Queue, Redacted, Schedule, Stream } from "effect"
import * as Client from "../../src/client/Client.js"
import * as FlagRegistry from "../../src/flags/FlagRegistry.js"
import { flagsEvaluate } from "../../src/flags/index.js"
import * as flagTables from "../../src/flags/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { bearer, check, makeApp } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

/** One "process": its own pool, fleet tap and store on the shared database. */
const replica = (url: string) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 2_000 })),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) })),
    Layer.orDie
  )

const inspect = (served: Serve.Served, method: "GET" | "POST", path: string, body?: unknown) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const url = `${served.url}/_fw/inspect/plugins/flags${path}`
    let request = method === "GET" ? HttpClientRequest.get(url) : HttpClientRequest.post(url)
    if (body !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, body)
    const response = yield* client.execute(HttpClientRequest.bearerToken(request, "inspect-secret"))
    assert.strictEqual(response.status, 200)
    return (yield* response.json) as Record<string, unknown>
  }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))

/** Polls `effect` until it yields `expected` (fails after 10 s rather than hanging). */
const eventually = <A, E>(effect: Effect.Effect<A, E>, expected: A) =>
  effect.pipe(
    Effect.repeat({ until: (value) => value === expected, schedule: Schedule.spaced("20 millis") }),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`never saw ${String(expected)}`) })
  )

describe.skipIf(Pg.serverUrl === null)("flags across replicas (PostgreSQL, fleet scope)", () => {
  it.scopedLive("a toggle on one instance reaches isFlagEnabled and live subscribers on the other; one audit row per flip", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const a = makeApp({ store: "sql", usage: { track: false } })
      const b = makeApp({ store: "sql", usage: { track: false } })
      const servedA = yield* Serve.serve(a.app, replica(url), { applySchema: true })
      const servedB = yield* Serve.serve(b.app, replica(url), { applySchema: true })
      const clientA = yield* Serve.httpClient(servedA, a.app)
      const clientB = yield* Serve.httpClient(servedB, b.app)
      const alice = { headers: bearer("tok-alice") }
      assert.isTrue(yield* clientB.call(check, { key: "beta" }, alice))

      const ws = yield* Client.connect([flagsEvaluate], Client.layerWebSocket(servedB.wsUrl))
      const pushed = yield* Queue.unbounded<Record<string, boolean>>()
      yield* ws.live(flagsEvaluate, {}, alice).pipe(Stream.runForEach((set) => Queue.offer(pushed, set)), Effect.forkScoped)
      assert.isTrue((yield* Queue.take(pushed)).beta)

      yield* inspect(servedA, "POST", "/toggle", { flag: "beta", actor: "ops-a" })
      yield* eventually(clientB.call(check, { key: "beta" }, alice), false)
      assert.isFalse((yield* Queue.take(pushed).pipe(Effect.timeout("10 seconds"))).beta)

      yield* inspect(servedB, "POST", "/toggle", { flag: "beta", actor: "ops-b" })
      yield* eventually(clientA.call(check, { key: "beta" }, alice), true)
      yield* inspect(servedB, "POST", "/toggle", { flag: "admin-tools", actor: null })
      yield* eventually(clientA.call(check, { key: "admin-tools" }, alice), true)

      const audit = yield* inspect(servedA, "GET", "/audit")
      type Row = { flag: string; operatorType: string; operatorId: string; note: string | null; actor: string | null; before: { enabled: boolean }; after: { enabled: boolean } }
      const entries = audit.entries as ReadonlyArray<Row>
      // Who acted is the authenticated operator (the inspect token: the system); the typed text is a note.
      assert.deepStrictEqual(entries.map((e) => [e.flag, e.operatorType, e.operatorId, e.note, e.actor, e.before.enabled, e.after.enabled]), [
        ["admin-tools", "system", "inspect-token", null, null, false, true],
        ["beta", "system", "inspect-token", "ops-b", null, false, true],
        ["beta", "system", "inspect-token", "ops-a", null, true, false]
      ])
      const list = yield* inspect(servedA, "GET", "/list")
      const beta = (list.flags as ReadonlyArray<{ key: string; version: number; enabled: boolean }>).find((f) => f.key === "beta")!
      assert.deepStrictEqual([beta.enabled, beta.version], [true, 2])
    }))

  it.scopedLive("persisted state survives a restart; a stored override that no longer fits the code is refused and listed", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const first = makeApp({ store: "sql", usage: { track: false } })
      yield* Effect.scoped(Effect.gen(function*() {
        const served = yield* Serve.serve(first.app, replica(url), { applySchema: true })
        yield* inspect(served, "POST", "/toggle", { flag: "beta", actor: "ops" })
      }))
      // The override row is edited behind the framework's back: its variant no longer fits the schema.
      yield* Effect.gen(function*() {
        const sql = yield* PgClient.PgClient
        yield* sql`INSERT INTO _fw_feature_flag_state (id, override, version, "updatedAt", "updatedBy")
          VALUES ('checkout', ${JSON.stringify({ variants: [{ name: "low", value: { fee: "free" } }] })}, 1, 0, NULL)`
      }).pipe(Effect.provide(Pg.layerClient(url)), Effect.catchAll((error) => Effect.die(error)))
      const second = makeApp({ store: "sql", usage: { track: false } })
      const served = yield* Serve.serve(second.app, replica(url), { applySchema: true })
      const client = yield* Serve.httpClient(served, second.app)
      assert.isFalse(yield* client.call(check, { key: "beta" }, { headers: bearer("tok-alice") }))
      const list = yield* inspect(served, "GET", "/list")
      const refusals = list.refusals as ReadonlyArray<{ flag: string; source: string }>
      assert.deepStrictEqual(refusals.map((r) => [r.flag, r.source]), [["checkout", "stored"]])
      assert.isTrue(yield* client.call(check, { key: "checkout" }, { headers: bearer("tok-alice") }))
      // Toggling it builds on the code definition and replaces the unfit override.
      const toggled = yield* inspect(served, "POST", "/toggle", { flag: "checkout", actor: "ops" })
      assert.deepStrictEqual(toggled.after, { enabled: false, rollout: 100 })
      assert.isFalse(yield* client.call(check, { key: "checkout" }, { headers: bearer("tok-alice") }))
    }))
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)

/** One registry on its own pool and store over the shared database (a replica without a server). */
const registryOn = (url: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provide(Pg.layerClient(url))))
    const registry = FlagRegistry.make({ flags: { beta: true, gamma: false }, store: "sql", usage: { track: false } })
    yield* registry.attach(Context.get(context, Store.Store))
    return registry
  })

describe.skipIf(Pg.serverUrl === null)("concurrent toggles (PostgreSQL, read committed)", () => {
  it.scopedLive("two replicas toggling at once lose no flip: versions count every flip and the state ends where the flips say", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([...flagTables.all]).pipe(Effect.provide(Pg.layerClient(url)), Effect.orDie)
      const a = yield* registryOn(url)
      const b = yield* registryOn(url)
      const flips = 12
      // beta starts without a state row (concurrent first writers), gamma with one.
      yield* a.toggle("gamma", { type: "system", id: "setup" })
      const run = (registry: FlagRegistry.FlagRegistryShape, flag: string, actor: string) =>
        Effect.forEach(Array.from({ length: flips }), () => registry.toggle(flag, { type: "user", id: actor }), { discard: true })
      yield* Effect.all([run(a, "beta", "a"), run(b, "beta", "b"), run(a, "gamma", "a"), run(b, "gamma", "b")], { concurrency: "unbounded" })
      const audit = yield* a.audit()
      for (const [flag, start, setup] of [["beta", true, 0], ["gamma", true, 1]] as const) {
        const rows = audit.filter((row) => row.flag === flag && row.operatorId !== "setup")
        assert.strictEqual(rows.length, 2 * flips)
        // Every flip starts from the state the previous one left: as many on→off as off→on.
        assert.isTrue(rows.every((row) => row.after.enabled === !row.before.enabled))
        assert.strictEqual(rows.filter((row) => row.before.enabled === true).length, flips, `${flag}: flips alternate`)
        const c = yield* registryOn(url)
        const entry = (yield* c.list).find((e) => e.key === flag)!
        assert.deepStrictEqual([entry.version, entry.enabled], [2 * flips + setup, start])
      }
    }))
})

describe.skipIf(Pg.serverUrl === null)("a cleared override (PostgreSQL)", () => {
  it.scopedLive("a toggle after a clear is honoured by the replica that made it and by the others; the version keeps counting", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([...flagTables.all]).pipe(Effect.provide(Pg.layerClient(url)), Effect.orDie)
      const a = yield* registryOn(url)
      const enabled = (registry: FlagRegistry.FlagRegistryShape) => Effect.map(registry.list, (list) => list.find((e) => e.key === "beta")!)
      yield* a.toggle("beta", { type: "user", id: "ops" })
      yield* a.clearOverride("beta", { type: "user", id: "ops" })
      assert.deepStrictEqual(Object.values(yield* Effect.map(enabled(a), (e) => [e.enabled, e.version])), [true, 2])
      const flipped = yield* a.toggle("beta", { type: "user", id: "ops" })
      assert.deepStrictEqual([flipped.after.enabled, flipped.version], [false, 3])
      assert.isFalse((yield* enabled(a)).enabled, "the replica that toggled")
      // Another replica reading the stored state (at start, as after a restart) sees the toggle.
      const b = yield* registryOn(url)
      assert.deepStrictEqual(Object.values(yield* Effect.map(enabled(b), (e) => [e.enabled, e.version])), [false, 3])
    }))
})
