import SwaggerParser from "@apidevtools/swagger-parser"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { lint } from "../support/OpenApiLint.js"
import * as Serve from "../support/Serve.js"
import { send } from "./client.js"
import { makeApp } from "./fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

interface Operation {
  readonly operationId: string
  readonly tags: ReadonlyArray<string>
  readonly deprecated?: boolean
  readonly parameters?: ReadonlyArray<{ readonly name: string; readonly in: string }>
  readonly requestBody?: unknown
  readonly responses: Record<string, { readonly content?: Record<string, unknown> }>
  readonly "x-fw-api-version"?: string
}
interface Document {
  readonly openapi: string
  readonly tags: ReadonlyArray<{ readonly name: string; readonly "x-fw-api-version"?: string }>
  readonly paths: Record<string, Record<string, Operation>>
}

describe("OpenAPI", () => {
  it.scopedLive("/openapi.json covers hand-written and projected routes, per version, and validates", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(makeApp(), memory)
      const reply = yield* send(`${url}/openapi.json`)
      assert.strictEqual(reply.status, 200)
      const document = reply.json() as Document
      assert.strictEqual(document.openapi, "3.1.0")
      yield* Effect.promise(() => SwaggerParser.validate(structuredClone(document) as never))
      // Every kind of route (versions, sunset, idempotency, rate limits, SSE, bytes): no Redocly problem.
      assert.deepStrictEqual(yield* Effect.promise(() => lint(document, `${url}/openapi.json`)), [])

      const get = document.paths["/v2/notes/{id}"]!.get!
      assert.deepStrictEqual(get.tags, ["v2"])
      assert.strictEqual(get["x-fw-api-version"], "v2")
      assert.deepInclude(get.parameters!.map((p) => [p.in, p.name]), ["path", "id"])
      assert.deepInclude(get.parameters!.map((p) => [p.in, p.name]), ["query", "upper"])
      assert.includeMembers(Object.keys(get.responses), ["200", "400", "401", "403", "500"])

      const post = document.paths["/v2/notes"]!.post!
      assert.isDefined(post.requestBody)
      assert.includeMembers(Object.keys(post.responses), ["409", "413", "415", "422"])

      const old = document.paths["/v1/things"]!.get!
      assert.isTrue(old.deprecated)
      assert.deepStrictEqual(old.tags, ["v1"])
      assert.includeMembers(Object.keys(document.paths["/v1/gone"]!.get!.responses), ["410"])

      const projected = document.paths["/v1/notes/list"]!.get!
      assert.strictEqual(projected.operationId, "notes.list")
      assert.deepInclude(projected.parameters!.map((p) => [p.in, p.name]), ["query", "minRank"])
      assert.isDefined(document.paths["/v1/notes/add"]!.post!.requestBody)
      assert.deepStrictEqual(document.paths["/v3/notes/{id}/name"]!.patch!.tags, ["v3"])
      assert.property(document.paths["/v1/notes/feed"]!.get!.responses["200"]!.content, "text/event-stream")
      assert.deepStrictEqual(document.paths["/teapot"]!.get!.tags, ["unversioned"])
      assert.isUndefined(document.paths["/teapot"]!.get!["x-fw-api-version"])

      const tags = Object.fromEntries(document.tags.map((t) => [t.name, t]))
      assert.includeMembers(Object.keys(tags), ["v1", "v2", "v3", "unversioned"])
      assert.strictEqual(tags["v2"]!["x-fw-api-version"], "v2")
    }))

  it.scopedLive("/docs serves the docs page (inline viewer) over the same document", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(makeApp(), memory)
      const docs = yield* send(`${url}/docs`)
      assert.strictEqual(docs.status, 200)
      assert.include(docs.headers.get("content-type") ?? "", "text/html")
      assert.include(docs.text, "/v2/notes/{id}")
    }))
})
