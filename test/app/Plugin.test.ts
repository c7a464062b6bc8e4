import { FetchHttpClient, HttpClient, HttpClientRequest, HttpServerResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Option, Queue, Schema } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { defineApp } from "../../src/app/App.js"
import * as Plugin from "../../src/app/Plugin.js"
import * as PluginServices from "../../src/app/PluginServices.js"
import { mutation } from "../../src/app/Procedure.js"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { CurrentSubject } from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Serve from "../support/Serve.js"
import { addNote, app as notesApp, bearer, listNotes, Notes, tokenStrategy } from "./fixtures.js"

process.env.FW_INSPECT_TOKEN = "inspect-secret"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const Marks = defineTable("_fw_marks", { fields: { note: Schema.String } })

const get = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers })
    return { status: response.status, body: await response.text() }
  })

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })
    return { status: response.status, body: await response.text() }
  })

/** A loopback HTTP server for the scope. */
const httpServer = (handle: (request: IncomingMessage, response: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly port: number; readonly close: () => void }>((resolve) => {
        const server = createServer(handle).listen(0, "127.0.0.1", () =>
          resolve({ port: (server.address() as AddressInfo).port, close: () => server.close() }))
      })
    ),
    (server) => Effect.sync(server.close)
  )

const withPlugins = (...plugins: ReadonlyArray<Plugin.Plugin>) =>
  defineApp({ name: "plugins", tables: [Notes], procedures: [addNote], auth: [tokenStrategy], plugins })

describe("plugins", () => {
  it.scopedLive("a plugin gets only what it declared: a read-only store without store:write", () =>
    Effect.gen(function*() {
      const results = yield* Queue.unbounded<string>()
      const reader = Plugin.definePlugin({
        name: "reader",
        permissions: ["store:changes:read"],
        tables: [Marks],
        onChangeEvent: (event: ChangeEvent) =>
          Effect.gen(function*() {
            if (event.table !== "notes") return
            const store = yield* Store.Store
            const attempt = yield* Effect.either(store.insert(Marks, { note: event.id }))
            yield* Queue.offer(results, attempt._tag === "Left" ? attempt.left._tag : "written")
          })
      })
      const writer = Plugin.definePlugin({
        name: "writer",
        permissions: ["store:changes:read", "store:write"],
        onChangeEvent: (event: ChangeEvent) =>
          Effect.gen(function*() {
            if (event.table !== "notes") return
            const store = yield* Store.Store
            yield* store.insert(Marks, { note: event.id })
            yield* Queue.offer(results, "written")
          })
      })
      const app = withPlugins(reader, writer)
      const served = yield* Serve.serve(app, memory)
      const client = yield* Serve.httpClient(served, app)
      yield* client.call(addNote, { text: "hello", rank: 1 }, { headers: bearer("tok-alice") })
      assert.deepStrictEqual([yield* Queue.take(results), yield* Queue.take(results)], ["StoreWriteDenied", "written"])
    }))

  it.scopedLive("an unknown permission, or a contribution without its permission, fails the boot", () =>
    Effect.gen(function*() {
      const unknown = Plugin.definePlugin({ name: "odd", permissions: ["store:everything" as Plugin.Permission] })
      const exit = yield* Effect.exit(Serve.serve(withPlugins(unknown), memory))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(JSON.stringify(exit), "unknown permission")
      const sneaky = Plugin.definePlugin({ name: "sneaky", permissions: [], onChangeEvent: () => Effect.void })
      const exit2 = yield* Effect.exit(Serve.serve(withPlugins(sneaky), memory))
      assert.include(JSON.stringify(exit2), "store:changes:read")
      const inspector = Plugin.definePlugin({
        name: "inspector",
        permissions: ["inspect:read"],
        inspectRoutes: [{ method: "POST", path: "/flip", handler: Effect.succeed(HttpServerResponse.empty()) }]
      })
      assert.include(JSON.stringify(yield* Effect.exit(Serve.serve(withPlugins(inspector), memory))), "inspect:write")
      // A stager, in either form, writes in the writing transaction: it needs both store permissions.
      const stager = Plugin.definePlugin({ name: "stager", permissions: ["store:changes:read"], onStageStatements: function*() {} })
      assert.include(JSON.stringify(yield* Effect.exit(Serve.serve(withPlugins(stager), memory))), "onStageStatements needs")
      // A fused part covers only one-row inserts: the other writes need the stager's other form.
      const fusedOnly = Plugin.definePlugin({ name: "fused", permissions: ["store:changes:read", "store:write"], onStageFused: () => null })
      assert.include(JSON.stringify(yield* Effect.exit(Serve.serve(withPlugins(fusedOnly), memory))), "onStageFused needs onStage")
    }))

  it.scopedLive("outbound HTTP is limited to declared hosts", () =>
    Effect.gen(function*() {
      const results = yield* Queue.unbounded<string>()
      const fetcher = (name: string, permissions: ReadonlyArray<Plugin.Permission>) =>
        Plugin.definePlugin({
          name,
          permissions,
          layer: Layer.effectDiscard(Effect.gen(function*() {
            const client = yield* HttpClient.HttpClient
            const outcome = yield* Effect.either(client.get("http://127.0.0.1:9/never"))
            yield* Queue.offer(results, `${name}:${outcome._tag === "Left" && outcome.left.message.includes("did not declare") ? "refused" : "attempted"}`)
          }))
        })
      const app = withPlugins(fetcher("allowed", ["network:outbound:127.0.0.1"]), fetcher("undeclared", []))
      yield* Serve.serve(app, memory)
      const seen = [yield* Queue.take(results), yield* Queue.take(results)].sort()
      assert.deepStrictEqual(seen, ["allowed:attempted", "undeclared:refused"])
    }))

  it.scopedLive("a plugin's procedures get its store: without store:write they cannot write", () =>
    Effect.gen(function*() {
      const sneaky = Plugin.definePlugin({
        name: "sneaky",
        permissions: [],
        procedures: [mutation("sneaky.write", {
          input: Schema.Struct({}),
          output: Schema.Struct({ id: Schema.String }),
          handler: (_, { store, subject }) =>
            Effect.map(store.insert(Notes, { tenantId: subject.tenantId ?? "", text: "by a plugin", rank: 1 }), (n) => ({ id: n.id }))
        })]
      })
      const app = defineApp({ name: "plugins", tables: [Notes], procedures: [addNote, listNotes], auth: [tokenStrategy], plugins: [sneaky] })
      const served = yield* Serve.serve(app, memory)
      const attempt = yield* post(served.rpcUrl, { _tag: "Request", id: "1", tag: "sneaky.write", payload: {}, headers: [["authorization", "Bearer tok-alice"]] })
      assert.notInclude(attempt.body, `"Success"`)
      const client = yield* Serve.httpClient(served, notesApp)
      assert.deepStrictEqual(yield* client.call(listNotes, {}, { headers: bearer("tok-alice") }), [])
    }))

  it.scopedLive("outbound HTTP: the host is checked on the final URL, and redirects are not followed", () =>
    Effect.gen(function*() {
      const undeclaredHits = { count: 0 }
      const undeclared = yield* httpServer((_, response) => void (undeclaredHits.count++, response.end("undeclared")))
      const declared = yield* httpServer((_, response) => void response.writeHead(302, { location: `http://localhost:${undeclared.port}/x` }).end())
      const results = yield* Queue.unbounded<string>()
      const plugin = Plugin.definePlugin({
        name: "prober",
        permissions: [`network:outbound:127.0.0.1:${declared.port}`],
        layer: Layer.effectDiscard(Effect.gen(function*() {
          const client = yield* HttpClient.HttpClient
          const redirected = yield* Effect.either(client.get(`http://127.0.0.1:${declared.port}/go`))
          yield* Queue.offer(results, `redirect:${redirected._tag === "Right" ? redirected.right.status : "failed"}`)
          const rewritten = client.pipe(HttpClient.mapRequest(HttpClientRequest.setUrl(`http://localhost:${undeclared.port}/y`)))
          const outcome = yield* Effect.either(rewritten.get(`http://127.0.0.1:${declared.port}/go`))
          yield* Queue.offer(results, `rewrite:${outcome._tag === "Left" && outcome.left.message.includes("did not declare") ? "refused" : "sent"}`)
        }))
      })
      yield* Serve.serve(withPlugins(plugin), memory)
      assert.deepStrictEqual([yield* Queue.take(results), yield* Queue.take(results)], ["redirect:302", "rewrite:refused"])
      assert.strictEqual(undeclaredHits.count, 0)
    }))

  it.scopedLive("plugin routes see the resolved caller; inspect routes sit behind the token", () =>
    Effect.gen(function*() {
      const greeter = Plugin.definePlugin({
        name: "greeter",
        permissions: ["inspect:read"],
        routes: [{
          method: "GET",
          path: "/hello/:name",
          handler: Effect.gen(function*() {
            const params = yield* Plugin.RouteParams
            const subject = yield* CurrentSubject
            return HttpServerResponse.text(`hello ${params.name}, you are ${subject.id}`)
          })
        }],
        inspectRoutes: [{ method: "GET", path: "/stats", handler: Effect.succeed(HttpServerResponse.unsafeJson({ ok: true })) }]
      })
      const served = yield* Serve.serve(withPlugins(greeter), memory)
      assert.strictEqual((yield* get(`${served.url}/hello/world`, bearer("tok-alice"))).body, "hello world, you are alice")
      assert.strictEqual((yield* get(`${served.url}/hello/world`, bearer("tok-bad"))).status, 401)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/plugins/greeter/stats`)).status, 401)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/plugins/greeter/stats`, { authorization: "Bearer wrong" })).status, 401)
      const allowed = yield* get(`${served.url}/_fw/inspect/plugins/greeter/stats`, { authorization: "Bearer inspect-secret" })
      assert.deepStrictEqual([allowed.status, allowed.body], [200, `{"ok":true}`])
    }))

  it.scopedLive("an inspect route written absolute mounts at the plugin's own inspect path, behind the token; another path fails the boot", () =>
    Effect.gen(function*() {
      const ok = Effect.succeed(HttpServerResponse.unsafeJson({ ok: true }))
      const counters = Plugin.definePlugin({
        name: "counters",
        permissions: ["inspect:read"],
        inspectRoutes: [{ method: "GET", path: "/_fw/inspect/counters", handler: ok }, { method: "GET", path: "/_fw/inspect/counters/:id", handler: ok }]
      })
      const served = yield* Serve.serve(withPlugins(counters), memory)
      const token = { authorization: "Bearer inspect-secret" }
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/counters`, token)).status, 200)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/counters/7`, token)).status, 200)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/counters`)).status, 401)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/counters`, { authorization: "Bearer wrong" })).status, 401)
      assert.strictEqual((yield* get(`${served.url}/_fw/inspect/plugins/counters/_fw/inspect/counters`, token)).status, 404)

      const squatter = Plugin.definePlugin({ name: "squatter", permissions: ["inspect:read"], inspectRoutes: [{ method: "GET", path: "/_fw/inspect/counters", handler: ok }] })
      assert.include(JSON.stringify(yield* Effect.exit(Serve.serve(withPlugins(squatter), memory))), "must be /_fw/inspect/squatter or below it")
      const core = Plugin.definePlugin({ name: "tables", permissions: ["inspect:read"], inspectRoutes: [{ method: "GET", path: "/_fw/inspect/tables", handler: ok }] })
      assert.include(JSON.stringify(yield* Effect.exit(Serve.serve(withPlugins(core), memory))), "PluginInvalid")
    }))

  it.effect("a plugin without store:write cannot purge the framework's tables either", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      yield* store.insert(Marks, { id: "m1", note: "kept" })
      const reader = Plugin.definePlugin({ name: "reader", permissions: ["store:changes:read"], tables: [Marks] })
      const client = yield* HttpClient.HttpClient
      const narrowed = Context.get(PluginServices.services(reader, store, client), Store.Store)
      const attempt = yield* Effect.either(narrowed.purge(Marks, ["m1"]))
      assert.strictEqual(attempt._tag === "Left" ? attempt.left._tag : "purged", "StoreWriteDenied")
      assert.isTrue(Option.isSome(yield* store.get(Marks, "m1")))
    }).pipe(Effect.provide(Layer.merge(memory, FetchHttpClient.layer))))
})

describe("plugin route bodies", () => {
  it.scopedLive("readBody reads within the route's cap; a larger body is a 413", () =>
    Effect.gen(function*() {
      const echo = Plugin.definePlugin({
        name: "echo",
        permissions: [],
        routes: [{
          method: "POST",
          path: "/echo",
          maxBodyBytes: 1024,
          handler: Effect.map(Plugin.readBody, (body) => HttpServerResponse.text(`${body.byteLength}`))
        }]
      })
      const served = yield* Serve.serve(withPlugins(echo), memory)
      const send = (bytes: number) =>
        Effect.promise(async () => {
          const response = await fetch(`${served.url}/echo`, { method: "POST", body: "x".repeat(bytes) })
          return [response.status, await response.text()] as const
        })
      assert.deepStrictEqual(yield* send(1024), [200, "1024"])
      const [status, body] = yield* send(1025)
      assert.strictEqual(status, 413)
      assert.include(body, "PayloadTooLarge")
    }))
})

describe("inspect surface", () => {
  it.scopedLive("invoke runs a procedure by tag; the token gates everything", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(notesApp, memory)
      const token = { authorization: "Bearer inspect-secret" }
      const invoked = yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "notes.add", input: { text: "via inspect", rank: 1 }, tenantId: "acme" }, token)
      assert.strictEqual(invoked.status, 200)
      const result = (JSON.parse(invoked.body) as { result: { text: string; tenantId: string } }).result
      assert.deepStrictEqual([result.text, result.tenantId], ["via inspect", "acme"])
      const listed = JSON.parse((yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "notes.list", input: {} }, token)).body)
      assert.strictEqual(listed.result.length, 1)
      assert.strictEqual((yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "nope", input: {} }, token)).status, 404)
      assert.strictEqual((yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "notes.add", input: { text: "" } }, token)).status, 400)
      assert.strictEqual((yield* post(`${served.url}/_fw/inspect/invoke`, "not an object", token)).status, 400)
      assert.strictEqual((yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "notes.list", input: {} })).status, 401)
      const procedures = JSON.parse((yield* get(`${served.url}/_fw/inspect/procedures`, token)).body)
      assert.includeMembers(procedures.procedures.map((p: { tag: string }) => p.tag), ["notes.add", "notes.list"])
    }))

  it.scopedLive("invoke keeps the operator's credentials from procedure code and interceptors", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const watcher = Plugin.definePlugin({
        name: "watcher",
        permissions: ["rpc:intercept:query"],
        interceptors: [{
          kind: "query",
          intercept: (call, next) => Effect.suspend(() => (seen.push(`${call.headers["authorization"] ?? "-"}|${call.headers["cookie"] ?? "-"}`), next))
        }]
      })
      const served = yield* Serve.serve(defineApp({ name: "watched", tables: [Notes], procedures: [listNotes], auth: [tokenStrategy], plugins: [watcher] }), memory)
      const invoked = yield* post(`${served.url}/_fw/inspect/invoke`, { tag: "notes.list", input: {}, tenantId: "acme" }, {
        authorization: "Bearer inspect-secret",
        cookie: "fw:session=operator"
      })
      assert.strictEqual(invoked.status, 200)
      assert.deepStrictEqual(seen, ["-|-"])
    }))

  it.scopedLive("the surface is closed while FW_INSPECT_TOKEN is unset", () =>
    Effect.gen(function*() {
      delete process.env.FW_INSPECT_TOKEN
      const served = yield* Serve.serve(notesApp, memory)
      const closed = yield* get(`${served.url}/_fw/inspect/procedures`, { authorization: "Bearer " })
      assert.strictEqual(closed.status, 404)
      process.env.FW_INSPECT_TOKEN = "inspect-secret"
    }))

  it.scopedLive("the OpenAPI document is served", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(notesApp, memory)
      const document = JSON.parse((yield* get(`${served.url}/openapi.json`)).body)
      assert.strictEqual(document.openapi, "3.1.0")
    }))
})
