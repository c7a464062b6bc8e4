/**
 * A two-tenant app for REST tests: hand-written routes covering every step of the pipeline, and
 * projected procedures. Callers authenticate with `Authorization: Bearer <token>`; `subjects` is
 * mutable so a test can revoke a scope mid-stream.
 */
import { Effect, FiberRef, Option, Schema, Stream } from "effect"
import { defineApp } from "../../src/app/App.js"
import type { IdempotencyOption } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { bytes } from "../../src/http/Bytes.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import { sse, sseFrame } from "../../src/http/Sse.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as TokenStrategy from "../support/TokenStrategy.js"

export const Notes = defineTable("rest_notes", {
  fields: { tenantId: Schema.String, text: Schema.String, rank: Schema.Number },
  tenantField: "tenantId"
})

/** Token → subject. Tests may replace entries (a revoked scope). */
export const subjects: Record<string, Subject.Subject> = {}

/** Resets `subjects` to the default callers. */
export const resetSubjects = () => {
  for (const key of Object.keys(subjects)) delete subjects[key]
  Object.assign(subjects, {
    "tok-alice": Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:read", "notes:write"] }),
    "tok-bob": Subject.make({ type: "user", id: "bob", tenantId: "globex", scopes: ["notes:read", "notes:write"] }),
    "tok-carol": Subject.make({ type: "user", id: "carol", tenantId: "acme", scopes: [] }),
    "tok-root": Subject.make({ type: "user", id: "root", tenantId: "acme", scopes: ["*"] }),
    "tok-key": Subject.make({ type: "apiKey", id: "key-1", tenantId: "acme", scopes: ["notes:read"] })
  })
}
resetSubjects()

/** `Authorization: Bearer tok-*`: known tokens authenticate, others fail, no header is anonymous. */
export const tokenStrategy = TokenStrategy.make("rest-test-token", subjects)

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

const NoteOut = Schema.Struct({ id: Schema.String, text: Schema.String, rank: Schema.Number })

/** Counts of handler runs and opened downloads, for "ran exactly once" and "never opened" checks. */
export const counters = { echo: 0, downloads: 0, undeclared: 0, ticksOpen: 0, failAfterWrite: 0, headed: 0 }

export const getNote = defineRestRoute({
  method: "GET",
  path: "/notes/:id",
  version: "v2",
  summary: "Read a note",
  input: Schema.Struct({
    params: Schema.Struct({ id: Schema.String }),
    query: Schema.optional(Schema.Struct({ upper: Schema.optional(Schema.BooleanFromString) }))
  }),
  output: NoteOut,
  guards: [requireScope("notes:read")],
  etag: true,
  handler: ({ params, query }, { store }) =>
    Effect.flatMap(store.get(Notes, params.id), Option.match({
      onNone: () => Effect.fail({ status: 404, message: "no such note" }),
      onSome: (note) => Effect.succeed({ id: note.id, text: query?.upper ? note.text.toUpperCase() : note.text, rank: note.rank })
    }))
})

export const listNotes = defineRestRoute({
  method: "GET",
  path: "/notes",
  version: "v2",
  input: Schema.Struct({
    query: Schema.Struct({ minRank: Schema.optional(Schema.NumberFromString), tag: Schema.optional(Schema.Array(Schema.String)) })
  }),
  output: Schema.Struct({ notes: Schema.Array(NoteOut), tags: Schema.Array(Schema.String) }),
  guards: [requireScope("notes:read")],
  handler: ({ query }, { store }) =>
    Effect.map(
      store.find(Notes, { orderBy: "rank", ...(query.minRank === undefined ? {} : { where: { rank: { gte: query.minRank } } }) }),
      (notes) => ({ notes: notes.map((n) => ({ id: n.id, text: n.text, rank: n.rank })), tags: query.tag ?? [] })
    )
})

export const addNote = defineRestRoute({
  method: "POST",
  path: "/notes",
  version: "v2",
  input: Schema.Struct({ body: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)), rank: Schema.Number }) }),
  output: NoteOut,
  guards: [requireScope("notes:write")],
  maxBodyBytes: 256,
  handler: ({ body }, { store, subject }) =>
    Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", ...body }), (n) => ({ id: n.id, text: n.text, rank: n.rank }))
})

/** Shares `/v2/notes` with a wider cap than POST's 256 bytes: the group reads up to 4 KiB. */
export const replaceNotes = defineRestRoute({
  method: "PUT",
  path: "/notes",
  version: "v2",
  input: Schema.Struct({ body: Schema.Array(Schema.String) }),
  output: Schema.Struct({ count: Schema.Number }),
  maxBodyBytes: 4096,
  handler: ({ body }) => Effect.succeed({ count: body.length })
})

export const teapot = defineRestRoute({
  method: "GET",
  path: "/teapot",
  input: Schema.Struct({ query: Schema.Struct({ how: Schema.Literal("status", "defect", "error") }) }),
  output: Schema.Void,
  handler: ({ query }) =>
    query.how === "status"
      ? Effect.fail({ status: 418, message: "short and stout" })
      : query.how === "defect"
      ? Effect.die(new Error("password=hunter2"))
      : Effect.fail(new Error("db at 10.0.0.7 refused user admin"))
})

export const oldThings = defineRestRoute({
  method: "GET",
  path: "/things",
  version: "v1",
  deprecated: "GET /v2/things",
  sunset: "2999-01-01T00:00:00Z",
  output: Schema.Array(Schema.String),
  etag: true,
  handler: () => Effect.succeed(["a", "b"])
})

export const goneThings = defineRestRoute({
  method: "GET",
  path: "/v1/gone",
  deprecated: "/v2/things",
  sunset: "2020-01-01",
  output: Schema.Array(Schema.String),
  handler: () => Effect.succeed(["never"])
})

export const apiKeyOnly = defineRestRoute({
  method: "GET",
  path: "/keys/check",
  output: Schema.Struct({ id: Schema.String }),
  guards: [(ctx) => (ctx.subject.type === "apiKey" ? undefined : { status: 401, message: "an API key is required" })],
  handler: (_, { subject }) => Effect.succeed({ id: subject.id })
})

export const whoAmI = defineRestRoute({
  method: "GET",
  path: "/whoami",
  output: Schema.Struct({ id: Schema.String, tenantId: Schema.NullOr(Schema.String), type: Schema.String }),
  handler: (_, { subject }) => Effect.succeed({ id: subject.id, tenantId: subject.tenantId, type: subject.type })
})

/** What the handler runs as: the provenance its writes carry and the subject the store scopes to. */
export const provenance = defineRestRoute({
  method: "POST",
  path: "/provenance",
  output: Schema.Struct({ provenance: Provenance.Provenance, actingFor: Schema.NullOr(Schema.String) }),
  handler: () =>
    Effect.gen(function*() {
      const current = yield* FiberRef.get(Provenance.current)
      const acting = yield* FiberRef.get(Subject.currentSubject)
      return { provenance: current, actingFor: Option.match(acting, { onNone: () => null, onSome: (s) => s.id }) }
    })
})

/** Slow enough that concurrent duplicates overlap; counts its runs. */
export const echo = defineRestRoute({
  method: "POST",
  path: "/echo",
  input: Schema.Struct({ body: Schema.Struct({ n: Schema.Number }) }),
  output: Schema.Struct({ n: Schema.Number, run: Schema.Number, tenant: Schema.NullOr(Schema.String) }),
  handler: ({ body }, { subject }) =>
    Effect.gen(function*() {
      const run = ++counters.echo
      yield* Effect.sleep("50 millis")
      return { n: body.n, run, tenant: subject.tenantId }
    })
})

export const failingEcho = defineRestRoute({
  method: "POST",
  path: "/echo/fail",
  input: Schema.Struct({ body: Schema.Struct({ status: Schema.Number }) }),
  output: Schema.Void,
  handler: ({ body }) => {
    counters.echo++
    return Effect.fail({ status: body.status, message: `failed with ${body.status}` })
  }
})

/** Commits a note and then answers 500: a retry with the same key must not write it twice. */
export const failAfterWrite = defineRestRoute({
  method: "POST",
  path: "/notes/fail-after-write",
  input: Schema.Struct({ body: Schema.Struct({ text: Schema.String, how: Schema.Literal("status", "defect") }) }),
  output: Schema.Void,
  handler: ({ body }, { store, subject }) =>
    Effect.gen(function*() {
      counters.failAfterWrite++
      yield* store.insert(Notes, { tenantId: subject.tenantId ?? "", text: body.text, rank: counters.failAfterWrite })
      return yield* body.how === "status"
        ? Effect.fail({ status: 500, message: "failed after the write" })
        : Effect.die(new Error("broke after the write"))
    })
})

/** Sets headers of its own (and a cookie): a replay repeats them all but the cookie. */
export const headed = defineRestRoute({
  method: "POST",
  path: "/headed",
  input: Schema.Struct({ body: Schema.Struct({ n: Schema.Number }) }),
  output: Schema.Struct({ run: Schema.Number }),
  handler: (_, { response }) =>
    Effect.gen(function*() {
      const run = ++counters.headed
      yield* Effect.orDie(response.setHeader("x-order-state", "accepted"))
      yield* Effect.orDie(response.setHeader("retry-after", "30"))
      yield* Effect.orDie(response.setHeader("x-rate-note", `run ${run}`))
      yield* Effect.orDie(response.setCookie("fw_seen", "1"))
      return { run }
    })
})

/** A mutating route that returns a stream without declaring `streaming: true`. */
export const undeclaredStream = defineRestRoute({
  method: "POST",
  path: "/stream/undeclared",
  handler: () => {
    counters.undeclared++
    return Effect.succeed(sse(Stream.make(sseFrame("x", 1))))
  }
})

export const download = defineRestRoute({
  method: "GET",
  path: "/download/:size",
  input: Schema.Struct({ params: Schema.Struct({ size: Schema.NumberFromString }) }),
  guards: [requireScope("notes:read")],
  handler: ({ params }) =>
    Effect.succeed(bytes(() => {
      counters.downloads++
      const chunk = new Uint8Array(64 * 1024).fill(7)
      const chunks = Math.ceil(params.size / chunk.length)
      return Stream.range(1, chunks).pipe(Stream.map(() => chunk))
    }, {
      contentType: "application/x-test",
      contentLength: Math.ceil(params.size / (64 * 1024)) * 64 * 1024,
      contentDisposition: `attachment; filename="blob.bin"`
    }))
})

/** A hand-written SSE route: a tick per emit, guarded (so a revoked scope ends it). */
export const ticks = defineRestRoute({
  method: "GET",
  path: "/ticks",
  guards: [requireScope("notes:read")],
  handler: () =>
    Effect.succeed(sse((emit) => {
      counters.ticksOpen++
      let n = 0
      emit(sseFrame("tick", { n, text: "first line\nsecond line" }))
      const timer = setInterval(() => emit(sseFrame("tick", { n: ++n })), 20)
      return () => {
        clearInterval(timer)
        counters.ticksOpen--
      }
    }))
})

export const formUpload = defineRestRoute({
  method: "POST",
  path: "/form/upload",
  handler: () => Effect.succeed({ ok: true })
})

// Projected procedures.

export const listProjected = query("notes.list", {
  input: Schema.Struct({ minRank: Schema.optional(Schema.Number), ids: Schema.optional(Schema.Array(Schema.String)) }),
  output: Schema.Array(NoteOut),
  guards: [requireScope("notes:read")],
  publicApi: {},
  handler: ({ minRank }, { store }) =>
    Effect.map(
      store.find(Notes, { orderBy: "rank", ...(minRank === undefined ? {} : { where: { rank: { gte: minRank } } }) }),
      (notes) => notes.map((n) => ({ id: n.id, text: n.text, rank: n.rank }))
    )
})

export const addProjected = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)), rank: Schema.Number }),
  output: NoteOut,
  guards: [requireScope("notes:write")],
  publicApi: {},
  handler: ({ rank, text }, { store, subject }) =>
    Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", text, rank }), (n) => ({ id: n.id, text: n.text, rank: n.rank }))
})

export const renameProjected = mutation("notes.rename", {
  input: Schema.Struct({ id: Schema.String, text: Schema.String }),
  output: NoteOut,
  guards: [requireScope("notes:write")],
  publicApi: { method: "PATCH", path: "/notes/:id/name", version: "v3", scopes: ["notes:rename"] },
  handler: ({ id, text }, { store }) =>
    Effect.map(store.update(Notes, id, { text }), (n) => ({ id: n.id, text: n.text, rank: n.rank }))
})

export const liveProjected = query("notes.feed", {
  input: Schema.Struct({ minRank: Schema.optional(Schema.Number) }),
  output: Schema.Array(NoteOut),
  guards: [requireScope("notes:read")],
  publicApi: { stream: "sse" },
  handler: ({ minRank }, { store }) =>
    Effect.map(
      store.find(Notes, { orderBy: "rank", ...(minRank === undefined ? {} : { where: { rank: { gte: minRank } } }) }),
      (notes) => notes.map((n) => ({ id: n.id, text: n.text, rank: n.rank }))
    )
})

/** The app; `idempotency` defaults to on. */
export const makeApp = (options: { readonly idempotency?: IdempotencyOption; readonly maxBodyBytes?: number } = {}) =>
  defineApp({
    name: "rest-test",
    tables: [Notes],
    procedures: [listProjected, addProjected, renameProjected, liveProjected],
    restRoutes: [
      getNote,
      listNotes,
      addNote,
      replaceNotes,
      teapot,
      oldThings,
      goneThings,
      apiKeyOnly,
      whoAmI,
      provenance,
      echo,
      failingEcho,
      undeclaredStream,
      failAfterWrite,
      headed,
      download,
      ticks,
      formUpload
    ],
    auth: [tokenStrategy],
    idempotency: options.idempotency ?? true,
    ...(options.maxBodyBytes === undefined ? {} : { http: { maxBodyBytes: options.maxBodyBytes } })
  })
