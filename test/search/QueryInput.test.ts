/**
 * Text a backend cannot search for gets the same answer on every tier: a NUL or a lone surrogate
 * in `q`, in a filter value (a list element too) or in a highlight tag is refused
 * `SearchQueryInvalid` (400) before any backend is asked (PostgreSQL used to fail 503 with the
 * driver's message, SQLite and memory to answer 0 hits). And a backend failure reaches the caller
 * as a `SearchBackendError` with its kind and our message: the driver's or engine's text stays in
 * the server log, over the wire too.
 */
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Exit, Layer, Logger, Redacted, Ref } from "effect"
import { defineApp } from "../../src/app/App.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import type { BackendOption } from "../../src/search/Backend.js"
import { SearchBackendError } from "../../src/search/Errors.js"
import * as Memory from "../../src/search/Memory.js"
import type { Query, SearchBackendShape } from "../../src/search/SearchBackend.js"
import * as Sql from "../../src/search/Sql.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import * as TokenStrategy from "../support/TokenStrategy.js"
import type { Client } from "./support.js"
import { Notes, plugin, search, settled, stack } from "./support.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })

/** Callers authenticate with `authorization: Bearer <id>@<tenant>`. */
const headerAuth = TokenStrategy.idAtTenant("query-input-test")

/** A backend that records the queries it is sent. */
const recording = (inner: SearchBackendShape) => {
  const sent: Array<Query> = []
  const backend: SearchBackendShape = { ...inner, query: (index, query) => Effect.suspend(() => { sent.push(query); return inner.query(index, query) }) }
  return { backend, sent }
}

const failure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.exit(effect), (exit) => {
    if (Exit.isSuccess(exit)) return assert.fail(`expected a failure, got ${JSON.stringify(exit.value)}`)
    return (exit.cause._tag === "Fail" ? exit.cause.error : undefined) as
      | { readonly _tag: string; readonly status?: number; readonly message?: string; readonly kind?: string }
      | undefined
  })

const bad = ["\u0000", "ti\u0000tle", "\ud800", "x\udc00y"]

const inputs = (text: string) => [
  { q: text },
  { q: "title", filters: [{ field: "title", op: "eq" as const, value: text }] },
  { q: "", filters: [{ field: "title", op: "neq" as const, value: text }] },
  { q: "title", filters: [{ field: "title", op: "in" as const, value: ["title", text] }] },
  { q: "title", filters: [{ field: "title", op: "nin" as const, value: [text] }] },
  { q: "title", highlight: { fields: ["title"], preTag: text, postTag: "</b>" } },
  { q: "title", highlight: { fields: ["title"], preTag: "<b>", postTag: text } }
]

type Tier = readonly [string, () => Effect.Effect<{ readonly store: Client | null; readonly backend: BackendOption }, never, Scope.Scope>]

const tiers: ReadonlyArray<Tier> = [
  ["memory", () => Effect.succeed({ store: null, backend: "memory" })],
  ["sqlite", () => Effect.succeed({ store: SqliteClient.layer({ filename: ":memory:" }).pipe(Layer.orDie), backend: Sql.backend(SqliteClient.layer({ filename: ":memory:" })) })],
  ...(Pg.serverUrl === null ? [] : [["postgresql", () =>
    Effect.map(Pg.freshDatabase, (url) => {
      const client = PgClient.layer({ url: Redacted.make(url) }).pipe(Layer.orDie)
      return { store: client, backend: Sql.backend(client) }
    })] as const])
]

for (const [name, tier] of tiers) {
  describe(`search.query input text (${name}, sql backend on the sql tiers)`, () => {
    it.scoped("a NUL or a lone surrogate in q, a filter value or a highlight tag is refused SearchQueryInvalid 400", () =>
      Effect.gen(function*() {
        const { backend, store } = yield* tier()
        const p = plugin(backend)
        yield* Effect.gen(function*() {
          const notes = yield* Store.Store
          yield* Subject.asSystem(notes.insert(Notes, { id: "n1", tenantId: "t1", title: "title", body: "text", n: 1 }))
          yield* settled
          for (const text of bad) {
            for (const input of inputs(text)) {
              const error = yield* failure(search(p, alice, { index: "notes", ...input }))
              const label = JSON.stringify(input)
              assert.strictEqual(error?._tag, "SearchQueryInvalid", label)
              assert.strictEqual(error?.status, 400, label)
              assert.notInclude(error?.message ?? "", text, label)
            }
          }
          // Well-formed text around them still answers, a pair of surrogates (an emoji) included.
          const found = yield* search(p, alice, { index: "notes", q: "title \u{1f600}", filters: [{ field: "title", op: "neq", value: "\u{1f600}" }] })
          assert.deepStrictEqual(found.hits.map((hit) => hit.doc["id"]), ["n1"])
        }).pipe(Effect.provide(stack(store, p)))
      }), 60_000)
  })
}

describe("search.query input text: refused before any backend is asked", () => {
  it.scoped("the backend (memory here; an engine alike) never sees the refused queries", () => {
    const { backend, sent } = recording(Memory.make())
    const p = plugin(backend)
    return Effect.gen(function*() {
      for (const text of bad) for (const input of inputs(text)) yield* failure(search(p, alice, { index: "notes", ...input }))
      assert.deepStrictEqual(sent, [])
    }).pipe(Effect.provide(stack(null, p)))
  })
})

/** A backend whose queries fail with a driver's text (and, for `raw`, with no SearchBackendError at all). */
const failing = (mode: "typed" | "raw" | "permanent"): SearchBackendShape => ({
  ...Memory.make(),
  name: "leaky",
  query: () =>
    mode === "raw"
      ? Effect.fail({ status: 500, message: "raw driver secret: relation _fw_search_docs at 10.0.0.7" } as never)
      : Effect.fail(new SearchBackendError({
        kind: mode === "typed" ? "transient" : "permanent",
        backend: "leaky",
        operation: "query",
        message: "driver secret: unsupported Unicode escape sequence at 10.0.0.7",
        httpStatus: 400,
        retryAfterMs: 1500
      }))
})

describe("search.query: a backend failure reaches the caller without the backend's message", () => {
  it.scoped("the kind, backend, status and Retry-After pass; the message is ours and the cause is logged with the trace id", () =>
    Effect.gen(function*() {
      for (const mode of ["typed", "raw", "permanent"] as const) {
        const p = plugin(failing(mode))
        const logs = yield* Ref.make<Array<string>>([])
        const logger = Logger.make(({ annotations, cause, message }) =>
          Effect.runSync(Ref.update(logs, (all) => [...all, `${String(message)} ${JSON.stringify([...annotations])} ${String(cause)}`])))
        const error = yield* failure(search(p, alice, { index: "notes", q: "x" })).pipe(
          Effect.provide(stack(null, p)),
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
        assert.strictEqual(error?._tag, "SearchBackendError", mode)
        assert.strictEqual(error?.status, mode === "permanent" ? 502 : 503, mode)
        assert.notInclude(error?.message ?? "", "secret", mode)
        assert.include(error?.message ?? "", "trace id test", mode)
        if (mode !== "raw") {
          const typed = error as unknown as SearchBackendError
          assert.deepStrictEqual([typed.backend, typed.httpStatus, typed.retryAfterMs], ["leaky", 400, 1500])
        }
        const logged = (yield* Ref.get(logs)).join("\n")
        assert.include(logged, "secret", mode)
        assert.include(logged, "test", mode)
      }
    }))

  it.scopedLive("over POST /rpc the answer carries no trace of the backend's message", () =>
    Effect.gen(function*() {
      const app = defineApp({ tables: [Notes], plugins: [plugin(failing("typed"))], auth: headerAuth })
      const served = yield* Serve.serve(app, Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const text = yield* Effect.promise(() =>
        fetch(served.rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer alice@t1" },
          body: JSON.stringify({ _tag: "Request", id: "1", tag: "search.query", payload: { index: "notes", q: "x" }, headers: [] })
        }).then((r) => r.text())
      )
      assert.include(text, "SearchBackendError")
      assert.notInclude(text, "secret")
      assert.notInclude(text, "10.0.0.7")
    }))
})

if (Pg.serverUrl !== null) {
  describe("search.query on PostgreSQL: a real driver failure", () => {
    it.scoped("a tenant PostgreSQL cannot encode fails 503 with our message, not the driver's", () =>
      Effect.gen(function*() {
        const url = yield* Pg.freshDatabase
        const client = PgClient.layer({ url: Redacted.make(url) }).pipe(Layer.orDie)
        const p = plugin(Sql.backend(client))
        const error = yield* failure(search(p, Subject.make({ type: "user", id: "eve", tenantId: "t\u0000" }), { index: "notes", q: "" })).pipe(
          Effect.provide(stack(client, p))
        )
        assert.strictEqual(error?._tag, "SearchBackendError")
        assert.strictEqual(error?.status, 503)
        assert.notMatch(error?.message ?? "", /byte sequence|0x00|encoding|sql/i)
      }), 60_000)
  })
}
