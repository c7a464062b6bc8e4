/**
 * The framework-agnostic stores behind the React hooks, against a real served app: the live
 * `flags.variants` set (variants, typed values, a toggle pushes, client reads never count as
 * usage) and the `search.query` store (results, facets, latest run wins, typed search errors).
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, JSONSchema, Layer } from "effect"
import type { Readable } from "../../src/client/index.js"
import { Flags, Search } from "../../src/client/index.js"
import { FlagUsage } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import type * as Table from "../../src/kernel/schema/Table.js"
import { searchErrors, SearchFieldRejected, SearchIndexNotFound } from "../../src/search/Errors.js"
import * as Query from "../../src/search/Query.js"
import * as Serve from "../support/Serve.js"
import { Theme } from "./contracts.js"
import { hooksApp, memory, mountAs, seedNotes, toggleFlag, tokens } from "./fixtures.js"

const inspectToken = "client-hooks-token"
process.env.FW_INSPECT_TOKEN = inspectToken

/** Mounts `url` as alice (tenant acme) or `token`, disposed with the scope. */
const mountApi = (url: string, token = "tok-alice") => Effect.map(mountAs(url, { token, errors: searchErrors }), (fw) => fw.apis.main)

/** Subscribes to `store` for the scope, and waits (polling its snapshot) until `predicate` holds. */
const watch = <A>(store: Readable<A>) =>
  Effect.gen(function*() {
    const stop = store.subscribe(() => undefined)
    yield* Effect.addFinalizer(() => Effect.sync(stop))
    return (predicate: (state: A) => boolean) =>
      Effect.promise(() =>
        new Promise<A>((resolve) => {
          const check = () => predicate(store.getSnapshot()) ? resolve(store.getSnapshot()) : setTimeout(check, 10)
          check()
        })
      )
  })

const toggle = (url: string, flag: string) => toggleFlag(url, flag, inspectToken)

/** A SQLite store with `tables`, shared by the server and the test. */
const sqlite = (tables: ReadonlyArray<Table.Any>) => Effect.map(
  Layer.build(
    Store.layerSql.pipe(
      Layer.provideMerge(ChangeTap.layerLocal),
      Layer.provideMerge(Layer.effectDiscard(SchemaDiffer.apply(tables))),
      Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })),
      Layer.orDie
    )
  ),
  (context) => Layer.succeedContext(context)
)

describe("flags.variants: the caller's variants and typed values in the client", () => {
  it.scopedLive("arrive live, decode through the typed flag, follow a toggle, and never count as usage", () =>
    Effect.gen(function*() {
      const { app, flags } = hooksApp({ store: "sql" })
      const store = yield* sqlite(app.tables)
      const served = yield* Serve.serve(app, store)
      const api = yield* mountApi(served.rpcUrl)
      const variants = Flags.liveVariants(api)
      const until = yield* watch(variants)
      assert.deepStrictEqual(Flags.value(variants.getSnapshot(), Theme), Theme.default, "the default before the first result")
      assert.isUndefined(Flags.variant(variants.getSnapshot(), "stable"))
      const first = yield* until((state) => state.status === "live")
      assert.deepStrictEqual(Flags.variant(first, "stable"), { name: "on", value: true, enabled: true })
      assert.deepStrictEqual(Flags.variant(first, "beta"), { name: "off", value: false, enabled: false })
      assert.deepStrictEqual(Flags.variant(first, "theme"), { name: "blue", value: { accent: "blue" }, enabled: true })
      assert.isUndefined(Flags.variant(first, "unknown"))
      assert.deepStrictEqual(Flags.value(first, Theme), { accent: "blue" })
      assert.strictEqual(Flags.value(first, Theme), Flags.value(first, Theme), "a decoded value keeps its identity until the set changes")
      // Another tenant is outside the targeting: the flag is off and serves its offVariant.
      const bob = Flags.liveVariants(yield* mountApi(served.rpcUrl, "tok-bob"))
      const bobState = yield* (yield* watch(bob))((state) => state.status === "live")
      assert.deepStrictEqual(Flags.variant(bobState, "theme"), { name: "plain", value: { accent: "grey" }, enabled: false })

      assert.strictEqual(yield* toggle(served.url, "theme"), 200)
      const toggled = yield* until((state) => Flags.variant(state, "theme")?.name === "plain")
      assert.deepStrictEqual(Flags.value(toggled, Theme), { accent: "grey" })
      assert.strictEqual(yield* toggle(served.url, "beta"), 200)
      yield* until((state) => Flags.variant(state, "beta")?.enabled === true)

      // Every client read so far: none counted. A server-side read is (so the check can fail).
      yield* flags.registry.flushUsage
      const usage = Effect.flatMap(Store.Store, (s) => s.find(FlagUsage)).pipe(Effect.provide(store))
      assert.deepStrictEqual(yield* usage, [])
      yield* flags.registry.isEnabled(tokens["tok-alice"]!, "beta", "gatedBy")
      yield* flags.registry.flushUsage
      assert.deepStrictEqual((yield* usage).map((row) => [row.flag, row.source, row.count]), [["beta", "gatedBy", 1]])
    }))
})

describe("Search: the search.query store in the client", () => {
  it("the client's contract is the server's search.query schemas", () => {
    assert.deepStrictEqual(JSONSchema.make(Search.query.input), JSONSchema.make(Query.Input))
    assert.deepStrictEqual(JSONSchema.make(Search.query.output), JSONSchema.make(Query.Output))
  })

  it.scopedLive("run lands results and facets of the caller's tenant; only the latest run lands; errors are typed", () =>
    Effect.gen(function*() {
      const store = yield* Effect.map(Layer.build(memory), (context) => Layer.succeedContext(context))
      const { app } = hooksApp()
      const served = yield* Serve.serve(app, store)
      yield* seedNotes.pipe(Effect.provide(store))
      const api = yield* mountApi(served.rpcUrl)
      const search = Search.make(yield* mountApi(served.rpcUrl), "notes", { facets: ["n"] })
      const states: Array<Search.SearchState<unknown>> = []
      const stop = search.subscribe(() => states.push(search.getSnapshot()))
      yield* Effect.addFinalizer(() => Effect.sync(stop))
      assert.deepStrictEqual(search.getSnapshot().results, [])
      assert.isFalse(search.getSnapshot().pending)

      const running = search.run("milk")
      assert.isTrue(search.getSnapshot().pending)
      yield* Effect.promise(() => running)
      const milk = search.getSnapshot()
      assert.isFalse(milk.pending)
      assert.strictEqual(milk.q, "milk")
      assert.deepStrictEqual(milk.results.map((doc) => doc.title).sort(), ["milk", "milk run"], "only the caller's tenant")
      assert.strictEqual(milk.found, 2)
      assert.deepStrictEqual(milk.facets, { n: { "1": 1, "2": 1 } })

      // Two runs in flight: only the later one lands, whatever order the answers come in.
      const older = search.run("bread")
      const newer = search.run("milk", { limit: 1 })
      yield* Effect.promise(() => Promise.all([older, newer]))
      assert.strictEqual(search.getSnapshot().q, "milk")
      assert.strictEqual(search.getSnapshot().results.length, 1)
      assert.isFalse(states.some((state) => state.q === "bread"), "the superseded run never landed")

      // Typed search errors land in the state; the last results are kept.
      const missing = Search.make(api, "nope")
      yield* Effect.promise(() => missing.run("x"))
      assert.instanceOf(missing.getSnapshot().error, SearchIndexNotFound)
      const rejected = Search.make(api, "notes", { facets: ["body"] })
      yield* Effect.promise(() => rejected.run("milk"))
      assert.instanceOf(rejected.getSnapshot().error, SearchFieldRejected)
      yield* Effect.promise(() => search.run("x", { limit: 5000 }))
      assert.strictEqual(search.getSnapshot().error?._tag, "InputInvalid")
      assert.strictEqual(search.getSnapshot().results.length, 1)
    }))
})
