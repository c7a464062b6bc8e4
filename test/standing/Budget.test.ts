import { FetchHttpClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Queue, Ref, Schedule, Schema, Stream, TestClock, TestServices } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation, query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as Store from "../../src/kernel/store/Store.js"
import {
  type Attribution,
  type BudgetCrossing,
  CostEvents,
  CostRegistry,
  defineCostBudget,
  recordCost,
  StandingDefinitionError,
  standingPlugin,
  useCostBudget,
  windowOf
} from "../../src/standing/index.js"
import { addNote, bearer, listNotes, Notes, tokenStrategy } from "../app/fixtures.js"
import * as SseClient from "../http/SseClient.js"
import * as Serve from "../support/Serve.js"
import { sqliteFile, stack, tiers } from "./support.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const tokens = defineCostBudget({ name: "tokens", limit: 100, unit: "tokens", window: "1 hour" })
const total = defineCostBudget({ name: "total", limit: 1_000, warnAt: 1 })
const plugin = standingPlugin({ budgets: [tokens, total] })
const daily = defineCostBudget({ name: "daily", limit: 1_000, window: "day" })
const windowed = standingPlugin({ budgets: [tokens, daily] })

const spend = (tenantId: string, amount: number, unit = "tokens", trace = "t") =>
  Effect.flatMap(CostRegistry, (registry) => registry.record({ tenantId, unit, amount })).pipe(
    Provenance.withProvenance({ traceId: trace, subjectId: null, procedure: null })
  )

const crossings = Effect.gen(function*() {
  const seen = yield* Ref.make<ReadonlyArray<BudgetCrossing>>([])
  yield* (yield* CostRegistry).subscribe((crossing) => Ref.update(seen, (all) => [...all, crossing]))
  return Effect.map(Ref.getAndSet(seen, []), (all) => all.map((c) => `${c.budget}/${c.tenantId}:${c.from}->${c.to}@${c.spent}`))
})

describe("cost budget definitions and windows", () => {
  it("refuses a bad limit, warnAt or window", () => {
    assert.throws(() => defineCostBudget({ name: "x", limit: 0 }), StandingDefinitionError)
    assert.throws(() => defineCostBudget({ name: "x", limit: 1, warnAt: 0 }), /warnAt/)
    assert.throws(() => defineCostBudget({ name: "x", limit: 1, window: "soon" as never }), /window/)
  })

  it("windows are anchored in UTC: epoch-aligned durations, calendar day, week (Monday) and month", () => {
    const at = Date.UTC(2026, 10, 25, 13, 45) // Wednesday 25 November 2026, 13:45 UTC
    assert.deepStrictEqual(windowOf({ window: "1 hour" }, at), { start: Date.UTC(2026, 10, 25, 13), end: Date.UTC(2026, 10, 25, 14) })
    assert.deepStrictEqual(windowOf({ window: "day" }, at), { start: Date.UTC(2026, 10, 25), end: Date.UTC(2026, 10, 26) })
    assert.deepStrictEqual(windowOf({ window: "1 day" }, at), windowOf({ window: "day" }, at))
    assert.deepStrictEqual(windowOf({ window: "week" }, at), { start: Date.UTC(2026, 10, 23), end: Date.UTC(2026, 10, 30) })
    assert.deepStrictEqual(windowOf({ window: "month" }, at), { start: Date.UTC(2026, 10, 1), end: Date.UTC(2026, 11, 1) })
    assert.deepStrictEqual(windowOf({ window: "month" }, Date.UTC(2026, 11, 31, 23, 59)), { start: Date.UTC(2026, 11, 1), end: Date.UTC(2027, 0, 1) })
    assert.deepStrictEqual(windowOf({ window: undefined }, at), { start: 0, end: Number.POSITIVE_INFINITY })
  })
})

for (const tier of tiers) {
  describe(`cost budgets: ${tier.name}`, () => {
    it.scoped("warn and exceeded notify once per window; rollover resets every tenant to ok", () =>
      Effect.gen(function*() {
        const registry = yield* CostRegistry
        const seen = yield* crossings
        yield* spend("acme", 50)
        yield* spend("acme", 30, "tokens", "crossing-trace") // 80: warn
        yield* spend("acme", 5)
        yield* spend("acme", 20) // 105: exceeded
        yield* spend("acme", 10)
        yield* spend("globex", 10)
        assert.deepStrictEqual(yield* seen, ["tokens/acme:ok->warn@80", "tokens/acme:warn->exceeded@105"])
        const acme = yield* registry.budget("tokens", "acme")
        assert.deepStrictEqual(
          [acme?.status, acme?.spent, acme?.limit, acme?.warnThreshold, acme?.window],
          ["exceeded", 115, 100, 80, { start: 0, end: 3_600_000 }]
        )
        assert.deepStrictEqual((yield* registry.breaches()).map((b) => `${b.budget}/${b.tenantId}:${b.status}`), ["tokens/acme:exceeded"])
        assert.isNull(yield* registry.budget("nope", "acme"))
        // Rollover: one reset notification, then a fresh window that can warn again.
        yield* TestClock.adjust("1 hour")
        assert.deepStrictEqual(yield* seen, ["tokens/acme:exceeded->ok@0"])
        assert.deepStrictEqual([(yield* registry.budget("tokens", "acme"))?.status, (yield* registry.budget("tokens", "acme"))?.spent], ["ok", 0])
        assert.deepStrictEqual(yield* registry.breaches(), [])
        yield* spend("acme", 120) // ok → exceeded in one cost crosses both thresholds
        assert.deepStrictEqual(yield* seen, ["tokens/acme:ok->warn@120", "tokens/acme:warn->exceeded@120"])
        // The cumulative budget without a unit counts every unit and never rolls over; warnAt 1 disables warn.
        yield* spend("acme", 800, "emails")
        const all = yield* registry.budget("total", "acme")
        assert.deepStrictEqual([all?.status, all?.spent, all?.window, all?.warnThreshold], ["exceeded", 1_035, null, null])
      }).pipe(Effect.provide(stack(tier.client(), plugin))))

    it.scoped("the ledger keeps only what the longest window needs: older costs are pruned on the clock and leave the attribution", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        const registry = yield* CostRegistry
        const ledger = () => store.count(CostEvents)
        /**
         * Polls (on the real clock) until the ledger holds `n` rows and acme's attribution totals
         * `total`: the pruning runs in the background, and its deletes reach the attribution as change
         * events delivered after their commit, so the count can be reached a moment before the total.
         */
        const ledgerHolds = (n: number, total: number | null) =>
          TestServices.provideLive(Effect.zip(ledger(), registry.tenant("acme")).pipe(
            Effect.repeat({
              until: ([count, tenant]) => count === n && (tenant?.total ?? null) === total,
              schedule: Schedule.spaced("5 millis")
            }),
            Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`the ledger never held ${n} rows totalling ${total}`) })
          ))
        yield* spend("acme", 10) // hour 0 of day 0
        yield* spend("acme", 2, "emails")
        yield* TestClock.adjust("1 hour")
        yield* spend("acme", 5) // hour 1 of day 0
        yield* TestClock.adjust("23 hours") // day 1: the day window no longer holds day 0
        yield* spend("acme", 7)
        yield* ledgerHolds(1, 7)
        const acme = yield* registry.tenant("acme")
        assert.deepStrictEqual([acme?.total, acme?.byUnit], [7, { tokens: 7 }])
        assert.deepStrictEqual((yield* registry.budget("daily", "acme"))?.spent, 7)
        yield* TestClock.adjust("1 day")
        yield* ledgerHolds(0, null)
        assert.isNull(yield* registry.tenant("acme"))
      }).pipe(Effect.provide(stack(tier.client(), windowed))))

    it.scoped("a cumulative budget keeps the whole ledger", () =>
      Effect.gen(function*() {
        const store = yield* Store.Store
        yield* spend("acme", 10)
        yield* TestClock.adjust("3 days")
        yield* spend("acme", 1)
        yield* (yield* ChangeTap.ChangeTap).settled
        assert.strictEqual(yield* store.count(CostEvents), 2)
        assert.strictEqual((yield* (yield* CostRegistry).tenant("acme"))?.total, 11)
      }).pipe(Effect.provide(stack(tier.client(), plugin))))

    it.scoped("attribution holds total, per-unit and per-subscription amounts; bad costs are refused", () =>
      Effect.gen(function*() {
        const registry = yield* CostRegistry
        yield* spend("acme", 3)
        yield* spend("acme", 2, "emails")
        yield* registry.record({ tenantId: "acme", unit: "recompute", amount: 1, subscription: "notes.list:s1" })
        yield* registry.record({ tenantId: "acme", unit: "recompute", amount: 1, subscription: "notes.list:s1" })
        const acme = yield* registry.tenant("acme")
        assert.deepStrictEqual([acme?.total, acme?.byUnit, acme?.bySubscription], [
          7,
          { tokens: 3, emails: 2, recompute: 2 },
          { "notes.list:s1": 2 }
        ])
        assert.deepStrictEqual(acme?.budgets.map((b) => [b.budget, b.spent]), [["tokens", 3], ["total", 7]])
        assert.isNull(yield* registry.tenant("nobody"))
        for (const bad of [{ tenantId: "", unit: "x", amount: 1 }, { tenantId: "a", unit: "", amount: 1 }, { tenantId: "a", unit: "x", amount: -1 }, { tenantId: "a", unit: "x", amount: Number.NaN }]) {
          const refused = yield* Effect.flip(registry.record(bad))
          assert.strictEqual(refused._tag, "CostInvalid")
        }
        assert.strictEqual((yield* registry.attribution()).length, 1)
      }).pipe(Effect.provide(stack(tier.client(), plugin))))
  })
}

describe("cost survives a restart", () => {
  it.scoped("on SQLite: spent and status come back, without notifying again", () => {
    const file = sqliteFile()
    return Effect.gen(function*() {
      yield* TestClock.setTime(10_000)
      yield* spend("acme", 90).pipe(Effect.provide(stack(file, plugin)), Effect.scoped)
      yield* TestClock.setTime(20_000)
      yield* Effect.gen(function*() {
        const seen = yield* crossings
        const acme = yield* (yield* CostRegistry).budget("tokens", "acme")
        assert.deepStrictEqual([acme?.status, acme?.spent], ["warn", 90])
        yield* spend("acme", 5)
        assert.deepStrictEqual(yield* seen, [])
        yield* spend("acme", 5)
        assert.deepStrictEqual(yield* seen, ["tokens/acme:warn->exceeded@100"])
      }).pipe(Effect.provide(stack(file, plugin)), Effect.scoped)
      // A restart in the next window starts at ok; attribution keeps everything.
      yield* TestClock.setTime(3_700_000)
      yield* Effect.gen(function*() {
        const registry = yield* CostRegistry
        assert.strictEqual((yield* registry.budget("tokens", "acme"))?.status, "ok")
        assert.strictEqual((yield* registry.tenant("acme"))?.total, 100)
      }).pipe(Effect.provide(stack(file, plugin)), Effect.scoped)
    })
  })
})

// ---- recompute cost from real live-query subscriptions over the socket -------------------------

const recomputeBudget = defineCostBudget({ name: "recompute", unit: "recompute", limit: 1_000 })

const myRecomputeCost = query("cost.mine", {
  input: Schema.Struct({}),
  output: Schema.NullOr(Schema.Number),
  handler: (_, { subject }) => Effect.map(useCostBudget(recomputeBudget, subject.tenantId ?? ""), (observed) => observed?.spent ?? null)
})

const spendTokens = mutation("cost.spend", {
  input: Schema.Struct({ amount: Schema.Number }),
  output: Schema.Void,
  handler: ({ amount }, { subject }) => recordCost({ tenantId: subject.tenantId ?? "", unit: "tokens", amount })
})

/** The same list, projected as an SSE live query at `GET /v1/notes/feed`. */
const feed = query("notes.feed", {
  input: Schema.Struct({}),
  output: Schema.Array(Notes.schema),
  publicApi: { stream: "sse" },
  handler: (_, { store }) => store.find(Notes, { orderBy: "rank" })
})

const appWith = (budgets: ReadonlyArray<ReturnType<typeof defineCostBudget>>) =>
  defineApp({
    name: "metered",
    tables: [Notes],
    procedures: [listNotes, addNote, myRecomputeCost, spendTokens, feed],
    auth: [tokenStrategy],
    plugins: [standingPlugin({ budgets })]
  })

const memory = () => Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const inspect = (served: Serve.Served, path: string) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    client.execute(HttpClientRequest.get(`${served.url}/_fw/inspect/plugins/standing${path}`).pipe(HttpClientRequest.bearerToken("inspect-secret")))).pipe(
      Effect.flatMap((response) => response.json),
      Effect.provide(FetchHttpClient.layer)
    )

/** Subscribes live as alice, adds two notes (two pushes), and returns the pushes seen. */
const twoPushes = (served: Serve.Served, app: ReturnType<typeof appWith>) =>
  Effect.gen(function*() {
    const ws = yield* Serve.wsClient(served, app)
    const results = yield* Queue.unbounded<ReadonlyArray<unknown>>()
    yield* ws.live(listNotes, {}, { headers: bearer("tok-alice") }).pipe(Stream.runForEach((r) => Queue.offer(results, r)), Effect.forkScoped)
    assert.deepStrictEqual(yield* Queue.take(results), [])
    yield* ws.call(addNote, { text: "one", rank: 1 }, { headers: bearer("tok-alice") })
    assert.strictEqual((yield* Queue.take(results)).length, 1)
    yield* ws.call(addNote, { text: "two", rank: 2 }, { headers: bearer("tok-alice") })
    assert.strictEqual((yield* Queue.take(results)).length, 2)
    // Bob's write is another tenant's: no push to alice, no cost.
    yield* ws.call(addNote, { text: "bob", rank: 3 }, { headers: bearer("tok-bob") })
    return ws
  })

describe("recompute cost", () => {
  it.scopedLive("each live push over the socket costs its tenant one recompute, per subscription and trace", () =>
    Effect.gen(function*() {
      const app = appWith([recomputeBudget])
      const served = yield* Serve.serve(app, memory())
      const ws = yield* twoPushes(served, app)
      assert.strictEqual(yield* ws.call(myRecomputeCost, {}, { headers: bearer("tok-alice") }), 2)
      assert.strictEqual(yield* ws.call(myRecomputeCost, {}, { headers: bearer("tok-bob") }), 0)
      const attribution = (yield* inspect(served, "/attribution")) as ReadonlyArray<Attribution>
      assert.strictEqual(attribution.length, 1)
      const acme = attribution[0]!
      assert.deepStrictEqual([acme.tenantId, acme.total, acme.byUnit], ["acme", 2, { recompute: 2 }])
      const subscriptions = Object.entries(acme.bySubscription)
      assert.strictEqual(subscriptions.length, 1)
      assert.match(subscriptions[0]![0], /^notes\.list:[0-9a-f-]{36}$/)
      assert.strictEqual(subscriptions[0]![1], 2)
      // A handler records its own cost through recordCost.
      yield* ws.call(spendTokens, { amount: 7 }, { headers: bearer("tok-bob") })
      const budgets = (yield* inspect(served, "/budgets")) as ReadonlyArray<{ readonly name: string; readonly tenants: ReadonlyArray<{ readonly tenantId: string; readonly spent: number }> }>
      assert.deepStrictEqual(budgets.map((b) => [b.name, b.tenants.map((t) => [t.tenantId, t.spent])]), [["recompute", [["acme", 2]]]])
      const again = (yield* inspect(served, "/attribution")) as ReadonlyArray<Attribution>
      assert.deepStrictEqual(again.find((a) => a.tenantId === "globex")?.byUnit, { tokens: 7 })
    }))

  it.scopedLive("each SSE delta costs its tenant one recompute too", () =>
    Effect.gen(function*() {
      const app = appWith([recomputeBudget])
      const served = yield* Serve.serve(app, memory())
      const ws = yield* Serve.wsClient(served, app)
      const stream = yield* SseClient.open(`${served.url}/v1/notes/feed`, bearer("tok-alice"))
      assert.strictEqual((yield* stream.next).event, "snapshot")
      yield* ws.call(addNote, { text: "one", rank: 1 }, { headers: bearer("tok-alice") })
      assert.strictEqual((yield* stream.next).event, "delta")
      yield* ws.call(addNote, { text: "two", rank: 2 }, { headers: bearer("tok-alice") })
      assert.strictEqual((yield* stream.next).event, "delta")
      assert.strictEqual(yield* ws.call(myRecomputeCost, {}, { headers: bearer("tok-alice") }), 2)
      const attribution = (yield* inspect(served, "/attribution")) as ReadonlyArray<Attribution>
      assert.match(Object.keys(attribution[0]!.bySubscription)[0]!, /^notes\.feed:/)
    }))

  it.scopedLive("without a declared budget a live push records nothing", () =>
    Effect.gen(function*() {
      const app = appWith([])
      const served = yield* Serve.serve(app, memory())
      yield* twoPushes(served, app)
      assert.deepStrictEqual(yield* inspect(served, "/attribution"), [])
    }))
})
