import SwaggerParser from "@apidevtools/swagger-parser"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Stream } from "effect"
import { request as httpRequest } from "node:http"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { bytes } from "../../src/http/Bytes.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/ChangeTap.js"
import * as Store from "../../src/kernel/Store.js"
import { bearer, Notes, tokenStrategy } from "../app/fixtures.js"
import * as Serve from "../support/Serve.js"

const NoteOut = Schema.Struct({ id: Schema.String, text: Schema.String, rank: Schema.Number })

const getNote = defineRestRoute({
  method: "GET",
  path: "/notes/:id",
  summary: "Read a note",
  input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }) }),
  output: NoteOut,
  etag: true,
  handler: ({ params }, { store }) =>
    Effect.flatMap(store.get(Notes, params.id), Option.match({
      onNone: () => Effect.fail({ status: 404, message: "no such note" }),
      onSome: (note) => Effect.succeed({ id: note.id, text: note.text, rank: note.rank })
    }))
})
const putNote = defineRestRoute({
  method: "PUT",
  path: "/notes/:id",
  input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }), body: Schema.Struct({ text: Schema.String }) }),
  output: NoteOut,
  maxBodyBytes: 1024,
  guards: [requireScope("notes:write")],
  handler: ({ body, params }, { store }) =>
    Effect.map(store.update(Notes, params.id, { text: body.text }), (note) => ({ id: note.id, text: note.text, rank: note.rank }))
})
const postNote = defineRestRoute({
  method: "POST",
  path: "/notes",
  input: Schema.Struct({ body: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)), rank: Schema.Number }) }),
  output: NoteOut,
  maxBodyBytes: 256,
  guards: [requireScope("notes:write")],
  handler: ({ body }, { store, subject }) =>
    Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", ...body }), (n) => ({ id: n.id, text: n.text, rank: n.rank }))
})
const listNotes = defineRestRoute({
  method: "GET",
  path: "/notes",
  input: Schema.Struct({ query: Schema.Struct({ minRank: Schema.optional(Schema.NumberFromString) }) }),
  output: Schema.Array(NoteOut),
  handler: ({ query }, { store }) =>
    Effect.map(
      store.find(Notes, { orderBy: "rank", ...(query.minRank === undefined ? {} : { where: { rank: { gte: query.minRank } } }) }),
      (notes) => notes.map((n) => ({ id: n.id, text: n.text, rank: n.rank }))
    )
})
const teapot = defineRestRoute({
  method: "GET",
  path: "/teapot",
  input: Schema.Struct({ query: Schema.Struct({ how: Schema.Literal("status", "defect") }) }),
  output: Schema.Void,
  handler: ({ query }) => query.how === "status" ? Effect.fail({ status: 418, message: "short and stout" }) : Effect.die(new Error("secret internals"))
})
const oldThings = defineRestRoute({
  method: "GET",
  path: "/things",
  version: "v1",
  deprecated: "/v2/things",
  sunset: "2999-01-01T00:00:00Z",
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  handler: () => Effect.succeed(["a"])
})
const goneThings = defineRestRoute({
  method: "GET",
  path: "/gone",
  version: "v1",
  deprecated: "GET /v2/gone",
  sunset: "2001-01-01T00:00:00Z",
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  handler: () => Effect.succeed(["never"])
})
const newThings = defineRestRoute({
  method: "GET",
  path: "/things",
  version: "v2",
  input: Schema.Struct({}),
  output: Schema.Array(Schema.String),
  handler: () => Effect.succeed(["a", "b"])
})

const app = defineApp({
  name: "rest",
  tables: [Notes],
  restRoutes: [getNote, putNote, postNote, listNotes, teapot, oldThings, goneThings, newThings],
  auth: [tokenStrategy]
})
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}
const call = (url: string, init: RequestInit = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, body: await response.text() }
  })
const json = (method: string, body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method,
  headers: { "content-type": "application/json", ...headers },
  body: typeof body === "string" ? body : JSON.stringify(body)
})

describe("REST routes", () => {
  it("refuses a version on a path that already has one", () => {
    assert.throws(() =>
      defineRestRoute({ method: "GET", path: "/v3/x", version: "v2", input: Schema.Struct({}), output: Schema.Void, handler: () => Effect.void })
    )
  })

  it.scopedLive("the pipeline: 200, 400, 401, 403, 404 from the handler, 405 with Allow, 418 and 500 without internals", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const created = yield* call(`${served.url}/notes`, json("POST", { text: "hello", rank: 2 }, bearer("tok-alice")))
      assert.strictEqual(created.status, 200, created.body)
      const note = JSON.parse(created.body) as { id: string }
      const read = yield* call(`${served.url}/notes/${note.id}`, { headers: bearer("tok-alice") })
      assert.deepStrictEqual([read.status, JSON.parse(read.body).text], [200, "hello"])
      // Another tenant does not see it.
      assert.strictEqual((yield* call(`${served.url}/notes/${note.id}`, { headers: bearer("tok-bob") })).status, 404)
      assert.strictEqual((yield* call(`${served.url}/notes`, json("POST", "{oops", bearer("tok-alice")))).status, 400)
      const invalid = yield* call(`${served.url}/notes`, json("POST", { text: "", rank: "x" }, bearer("tok-alice")))
      assert.deepStrictEqual([invalid.status, JSON.parse(invalid.body)._tag], [400, "InputInvalid"])
      assert.strictEqual((yield* call(`${served.url}/notes`, json("POST", { text: "a", rank: 1 }, bearer("tok-bad")))).status, 401)
      assert.strictEqual((yield* call(`${served.url}/notes`, json("POST", { text: "a", rank: 1 }, bearer("tok-carol")))).status, 403)
      const notAllowed = yield* call(`${served.url}/notes/${note.id}`, { method: "DELETE" })
      assert.strictEqual(notAllowed.status, 405)
      assert.strictEqual(notAllowed.headers.get("allow"), "GET, PUT, HEAD")
      assert.strictEqual((yield* call(`${served.url}/notes`, { method: "PATCH" })).headers.get("allow"), "POST, GET, HEAD")
      const teapotStatus = yield* call(`${served.url}/teapot?how=status`)
      assert.deepStrictEqual([teapotStatus.status, JSON.parse(teapotStatus.body).message], [418, "short and stout"])
      const defect = yield* call(`${served.url}/teapot?how=defect`)
      assert.strictEqual(defect.status, 500)
      assert.notInclude(defect.body, "secret internals")
      const filtered = yield* call(`${served.url}/notes?minRank=3`, { headers: bearer("tok-alice") })
      assert.deepStrictEqual(JSON.parse(filtered.body), [])
      assert.strictEqual((yield* call(`${served.url}/notes?minRank=abc`, { headers: bearer("tok-alice") })).status, 400)
    }))

  it.scopedLive("ETag and 304; HEAD runs the GET pipeline without a body", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const created = JSON.parse((yield* call(`${served.url}/notes`, json("POST", { text: "cached", rank: 1 }, bearer("tok-alice")))).body) as { id: string }
      const first = yield* call(`${served.url}/notes/${created.id}`, { headers: bearer("tok-alice") })
      const etag = first.headers.get("etag")!
      assert.match(etag, /^W\/"[0-9a-f]{40}"$/)
      const notModified = yield* call(`${served.url}/notes/${created.id}`, { headers: { ...bearer("tok-alice"), "if-none-match": etag } })
      assert.deepStrictEqual([notModified.status, notModified.body, notModified.headers.get("etag")], [304, "", etag])
      const head = yield* call(`${served.url}/notes/${created.id}`, { method: "HEAD", headers: bearer("tok-alice") })
      assert.deepStrictEqual([head.status, head.body, head.headers.get("etag")], [200, "", etag])
      yield* call(`${served.url}/notes/${created.id}`, json("PUT", { text: "changed" }, bearer("tok-alice")))
      const changed = yield* call(`${served.url}/notes/${created.id}`, { headers: { ...bearer("tok-alice"), "if-none-match": etag } })
      assert.strictEqual(changed.status, 200)
      assert.notStrictEqual(changed.headers.get("etag"), etag)
    }))

  it.scopedLive("versions, deprecation headers and 410 after the sunset", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const old = yield* call(`${served.url}/v1/things`)
      assert.strictEqual(old.status, 200)
      assert.strictEqual(old.headers.get("deprecation"), "true")
      assert.strictEqual(old.headers.get("sunset"), new Date("2999-01-01T00:00:00Z").toUTCString())
      assert.strictEqual(old.headers.get("link"), `</v2/things>; rel="successor-version"`)
      const current = yield* call(`${served.url}/v2/things`)
      assert.deepStrictEqual([current.status, current.headers.get("deprecation")], [200, null])
      const gone = yield* call(`${served.url}/v1/gone`)
      assert.deepStrictEqual([gone.status, JSON.parse(gone.body)], [410, { version: "v1", replacement: "GET /v2/gone" }])
    }))

  it.scopedLive("body caps: per route, shared per path (the widest), declared and chunked bodies", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const big = { text: "x".repeat(300), rank: 1 }
      const declared = yield* call(`${served.url}/notes`, json("POST", big, bearer("tok-alice")))
      assert.strictEqual(declared.status, 413)
      const chunked = yield* Effect.promise(() =>
        new Promise<number>((resolve, reject) => {
          const url = new URL(`${served.url}/notes`)
          const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "transfer-encoding": "chunked", ...bearer("tok-alice") } }, (res) => {
            res.resume()
            resolve(res.statusCode ?? 0)
          })
          req.on("error", reject)
          for (let i = 0; i < 10; i++) req.write("x".repeat(100))
          req.end()
        })
      )
      assert.strictEqual(chunked, 413)
      // GET and PUT share /notes/:id: the PUT cap (1 KiB) applies to the path.
      const note = JSON.parse((yield* call(`${served.url}/notes`, json("POST", { text: "n", rank: 1 }, bearer("tok-alice")))).body) as { id: string }
      const withinPathCap = yield* call(`${served.url}/notes/${note.id}`, json("PUT", { text: "y".repeat(600) }, bearer("tok-alice")))
      assert.strictEqual(withinPathCap.status, 200)
      assert.strictEqual((yield* call(`${served.url}/notes/${note.id}`, json("PUT", { text: "y".repeat(2000) }, bearer("tok-alice")))).status, 413)
    }))

  it.scopedLive("the OpenAPI document covers the routes, per version, and validates", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const document = JSON.parse((yield* call(`${served.url}/openapi.json`)).body)
      assert.strictEqual(document.openapi, "3.1.0")
      assert.includeMembers(Object.keys(document.paths), ["/notes/{id}", "/notes", "/v1/things", "/v2/things"])
      assert.strictEqual(document.paths["/v1/things"].get["x-fw-api-version"], "v1")
      assert.strictEqual(document.paths["/v1/things"].get.deprecated, true)
      assert.includeMembers(document.paths["/v2/things"].get.tags, ["v2"])
      yield* Effect.promise(() => SwaggerParser.validate(structuredClone(document)))
      const docs = yield* call(`${served.url}/docs`)
      assert.strictEqual(docs.status, 200)
      assert.include(docs.headers.get("content-type") ?? "", "text/html")
      assert.include(docs.body, "/v2/things")
    }))
})

describe("binary downloads and uploads", () => {
  it.scopedLive("bytes() streams after the guards; an undeclared stream on an idempotent request fails and frees its key; multipart on /form/* is 415", () =>
    Effect.gen(function*() {
      let opened = 0
      const chunk = new Uint8Array(64 * 1024).fill(7)
      const download = defineRestRoute({
        method: "GET",
        path: "/files/:name",
        input: Schema.Struct({ params: Schema.Struct({ name: Schema.String }) }),
        output: Schema.Void,
        guards: [requireScope("notes:write")],
        streaming: true,
        handler: ({ params }) =>
          Effect.succeed(bytes(() => {
            opened++
            return Stream.range(1, 160).pipe(Stream.as(chunk))
          }, { contentType: "application/octet-stream", contentLength: 160 * chunk.length, contentDisposition: `attachment; filename="${params.name}"` }))
      })
      let attempts = 0
      const undeclared = defineRestRoute({
        method: "POST",
        path: "/export",
        input: Schema.Struct({}),
        output: Schema.Void,
        handler: () => Effect.sync(() => (attempts++, bytes(Stream.make(chunk), { contentType: "application/octet-stream" })))
      })
      const filesApp = defineApp({ name: "files", restRoutes: [download, undeclared], auth: [tokenStrategy], idempotency: true })
      const served = yield* Serve.serve(filesApp, memory)
      const refused = yield* call(`${served.url}/files/a.bin`, { headers: bearer("tok-carol") })
      assert.deepStrictEqual([refused.status, opened], [403, 0])
      const response = yield* Effect.promise(() => fetch(`${served.url}/files/a.bin`, { headers: bearer("tok-alice") }))
      assert.strictEqual(response.headers.get("content-disposition"), `attachment; filename="a.bin"`)
      assert.strictEqual(response.headers.get("content-length"), String(160 * chunk.length))
      assert.strictEqual(response.headers.get("content-encoding"), null)
      const received = (yield* Effect.promise(() => response.arrayBuffer())).byteLength
      assert.deepStrictEqual([received, opened], [160 * chunk.length, 1])
      const keyed = { "idempotency-key": "exp-1", "content-type": "application/json" }
      assert.strictEqual((yield* call(`${served.url}/export`, { method: "POST", headers: keyed, body: "{}" })).status, 500)
      assert.strictEqual((yield* call(`${served.url}/export`, { method: "POST", headers: keyed, body: "{}" })).status, 500)
      assert.strictEqual(attempts, 2)
      const multipart = yield* call(`${served.url}/form/upload`, {
        method: "POST",
        headers: { "content-type": "multipart/form-data; boundary=x" },
        body: "--x\r\n\r\n--x--"
      })
      assert.strictEqual(multipart.status, 415)
    }))
})

describe("body cap under a large upload", () => {
  it.scopedLive("a 1 GiB chunked upload against the 8 MiB default cap gets 413 without the server buffering it", () =>
    Effect.gen(function*() {
      const sink = defineRestRoute({
        method: "POST",
        path: "/sink",
        input: Schema.Struct({}),
        output: Schema.Void,
        handler: () => Effect.void
      })
      const served = yield* Serve.serve(defineApp({ name: "sink", restRoutes: [sink] }), memory)
      const before = process.memoryUsage().rss
      const result = yield* Effect.promise(() =>
        new Promise<{ status: number; sentMiB: number }>((resolve) => {
          const url = new URL(`${served.url}/sink`)
          const chunk = Buffer.alloc(1024 * 1024, 120)
          let sent = 0
          let status = 0
          const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { "transfer-encoding": "chunked" } }, (res) => {
            status = res.statusCode ?? 0
            res.resume()
            res.on("end", () => resolve({ status, sentMiB: sent }))
          })
          req.on("error", () => resolve({ status, sentMiB: sent }))
          const pump = () => {
            while (sent < 1024 && status === 0) {
              sent++
              if (!req.write(chunk)) return void req.once("drain", pump)
            }
            if (sent >= 1024) req.end()
          }
          pump()
        })
      )
      assert.strictEqual(result.status, 413)
      assert.isBelow(result.sentMiB, 1024, "the server answered before the whole upload was sent")
      const grewMiB = (process.memoryUsage().rss - before) / (1024 * 1024)
      assert.isBelow(grewMiB, 64, `server memory grew by ${grewMiB.toFixed(1)} MiB`)
    }))
})
