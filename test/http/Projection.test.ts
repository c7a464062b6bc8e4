import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as Projection from "../../src/http/Projection.js"
import { RestRouteInvalid } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { addProjected, bearer, listProjected, liveProjected, makeApp, renameProjected } from "./fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const app = makeApp({ idempotency: false })

const add = (url: string, token: string, text: string, rank: number) =>
  send(`${url}/v1/notes/add`, jsonBody("POST", { text, rank }, bearer(token)))

describe("projection of publicApi procedures", () => {
  it("method and path: query GET, mutation POST, /<version>/<tag as path>, overrides", () => {
    assert.deepInclude(Projection.placement(listProjected, {}), { method: "GET", path: "/v1/notes/list", version: "v1" })
    assert.deepInclude(Projection.placement(addProjected, {}), { method: "POST", path: "/v1/notes/add" })
    assert.deepInclude(Projection.placement(renameProjected, renameProjected.publicApi!), {
      method: "PATCH",
      path: "/v3/notes/:id/name",
      version: "v3"
    })
    assert.deepInclude(Projection.placement(liveProjected, { stream: "sse" }), { method: "GET", live: true })
    assert.deepInclude(Projection.placement(addProjected, { stream: "sse" }), { method: "POST", live: false })
    assert.deepInclude(Projection.placement(listProjected, { path: "/v4/custom" }), { path: "/v4/custom", version: "v4" })
    assert.throws(() => Projection.placement(listProjected, { path: "/v4/custom", version: "v5" }), RestRouteInvalid)
  })

  it.scopedLive("GET input comes from the query string, read through the input schema (numbers, arrays)", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      yield* add(url, "tok-alice", "low", 1)
      yield* add(url, "tok-alice", "high", 5)
      const filtered = yield* send(`${url}/v1/notes/list?minRank=2&ids=a`, { headers: bearer("tok-alice") })
      assert.strictEqual(filtered.status, 200)
      assert.deepStrictEqual((filtered.json() as ReadonlyArray<{ text: string }>).map((n) => n.text), ["high"])
      const invalid = yield* send(`${url}/v1/notes/list?minRank=lots`, { headers: bearer("tok-alice") })
      assert.strictEqual(invalid.status, 400)
      assert.strictEqual((invalid.json() as { _tag: string })._tag, "InputInvalid")
      assert.strictEqual((yield* send(`${url}/v1/notes/add`, { headers: bearer("tok-alice") })).headers.get("allow"), "POST")
    }))

  it.scopedLive("guards, the row filter and tenant scoping are the socket's: same answers over REST and rpc", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      yield* add(served.url, "tok-alice", "acme note", 1)
      yield* add(served.url, "tok-bob", "globex note", 1)
      assert.strictEqual((yield* add(served.url, "tok-carol", "no scope", 1)).status, 403)
      assert.strictEqual((yield* add(served.url, "tok-alice", "", 1)).status, 400)
      const rest = yield* send(`${served.url}/v1/notes/list`, { headers: bearer("tok-alice") })
      const rpc = yield* (yield* Serve.httpClient(served, app)).call(listProjected, {}, { headers: bearer("tok-alice") })
      assert.deepStrictEqual(rest.json(), rpc)
      assert.deepStrictEqual((rest.json() as ReadonlyArray<{ text: string }>).map((n) => n.text), ["acme note"])
      assert.strictEqual((yield* send(`${served.url}/v1/notes/list`, { headers: bearer("tok-carol") })).status, 403)
    }))

  it.scopedLive("a custom path with params, a version and extra scopes", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const note = (yield* add(url, "tok-alice", "old name", 1)).json() as { id: string }
      const rename = (token: string) => send(`${url}/v3/notes/${note.id}/name`, jsonBody("PATCH", { text: "new name" }, bearer(token)))
      const missingScope = yield* rename("tok-alice")
      assert.strictEqual(missingScope.status, 403)
      assert.include(missingScope.text, "notes:rename")
      const renamed = yield* rename("tok-root")
      assert.strictEqual(renamed.status, 200)
      assert.deepInclude(renamed.json() as object, { id: note.id, text: "new name" })
    }))

  it.scopedLive("a projected path taken by a hand-written route fails the mount", () =>
    Effect.gen(function*() {
      const clash = query("v2.notes", { input: Schema.Struct({}), output: Schema.Unknown, publicApi: { path: "/v2/notes" }, handler: () => Effect.succeed(1) })
      const exit = yield* Effect.exit(Serve.serve(defineApp({ procedures: [clash], restRoutes: app.restRoutes }), memory))
      assert.isTrue(exit._tag === "Failure" && String(exit.cause).includes("declared twice"))
    }))
})
