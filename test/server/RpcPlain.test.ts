/**
 * `POST /rpc/<tag>`: procedures called as plain JSON over a real socket, with the envelope's rules:
 * the caller (session cookie, bearer), guards, the cross-site screen, the body cap, error statuses
 * from the error table with the typed body, and the request's trace id reaching the handler.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import { requireAuthenticated, requireScope } from "../../src/app/Guard.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"

const secret = "plain-json-session-secret-0123456789"
const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const add = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String }),
  output: Schema.Struct({ text: Schema.String, by: Schema.String, traceId: Schema.String }),
  guards: [requireAuthenticated],
  handler: ({ text }, { subject, traceId }) =>
    text === "taken" ? Effect.fail({ status: 409, message: "that text is taken" }) : Effect.succeed({ text, by: subject.id, traceId })
})
const admin = query("admin.stats", {
  input: Schema.Struct({}),
  output: Schema.Number,
  guards: [requireScope("admin")],
  handler: () => Effect.succeed(42)
})
const ping = query("ping", { input: Schema.Struct({}), output: Schema.String, handler: () => Effect.succeed("pong") })

const app = defineApp({
  procedures: [add, admin, ping],
  auth: [passwordSessionStrategy({ secret })],
  http: { maxBodyBytes: 256 }
})

interface Answer {
  readonly status: number
  readonly body: unknown
}

const call = (url: string, tag: string, body: string | undefined, headers: Record<string, string> = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(`${url}/rpc/${tag}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      ...(body === undefined ? {} : { body })
    })
    return { status: response.status, body: await response.json() }
  })

describe("POST /rpc/<tag> (plain JSON)", () => {
  it.scopedLive("answers the output as JSON, failures with their status and typed body", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const session = yield* issueSession(Subject.make({ type: "user", id: "ada", tenantId: "acme" }), secret)
      const cookie = { cookie: `fw:session=${session}` }

      assert.deepStrictEqual(yield* call(url, "ping", undefined), { status: 200, body: "pong" })
      assert.deepStrictEqual(yield* call(url, "ping", "{}"), { status: 200, body: "pong" })
      assert.deepStrictEqual(yield* call(url, "notes.add", `{"text":"hi"}`), {
        status: 401,
        body: { _tag: "GuardRefused", message: "authentication required" }
      })
      const added = yield* call(url, "notes.add", `{"text":"hi"}`, { ...cookie, "x-fw-trace-id": "0af7651916cd43dd8448eb211c80319c" })
      assert.deepStrictEqual(added, {
        status: 200,
        body: { text: "hi", by: "ada", traceId: "0af7651916cd43dd8448eb211c80319c" }
      })
      assert.deepStrictEqual(yield* call(url, "notes.add", `{"text":"taken"}`, cookie), {
        status: 409,
        body: { _tag: "ProcedureFailure", message: "that text is taken" }
      })
      assert.deepStrictEqual(yield* call(url, "admin.stats", "{}", cookie), {
        status: 403,
        body: { _tag: "GuardRefused", message: `missing scope "admin"` }
      })
      const invalid = yield* call(url, "notes.add", `{"text":7}`, cookie)
      assert.strictEqual(invalid.status, 400)
      assert.strictEqual((invalid.body as { _tag: string })._tag, "InputInvalid")
      assert.deepStrictEqual(yield* call(url, "notes.add", "{not json", cookie), {
        status: 400,
        body: { _tag: "InputInvalid", message: "the request body is not valid JSON" }
      })
      assert.deepStrictEqual(yield* call(url, "nope", "{}"), {
        status: 404,
        body: { _tag: "ProcedureNotFound", message: `no procedure "nope"` }
      })
      assert.deepStrictEqual(yield* call(url, "ping.live", "{}"), {
        status: 400,
        body: { _tag: "ProcedureFailure", message: "live queries need the WebSocket transport" }
      })
    }))

  it.scopedLive("refuses a cross-site cookie call, a form body and a body over the cap", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(app, memory)
      const session = yield* issueSession(Subject.make({ type: "user", id: "ada", tenantId: "acme" }), secret)
      const cookie = { cookie: `fw:session=${session}` }
      const crossSite = yield* call(url, "notes.add", `{"text":"hi"}`, { ...cookie, origin: "https://evil.example" })
      assert.strictEqual(crossSite.status, 403)
      assert.strictEqual((crossSite.body as { _tag: string })._tag, "CrossSiteRequest")
      const fetched = yield* call(url, "notes.add", `{"text":"hi"}`, { ...cookie, "sec-fetch-site": "cross-site" })
      assert.strictEqual(fetched.status, 403)
      const form = yield* call(url, "ping", "a=1", { "content-type": "application/x-www-form-urlencoded" })
      assert.strictEqual(form.status, 415)
      assert.strictEqual((form.body as { _tag: string })._tag, "UnsupportedMediaType")
      const large = yield* call(url, "notes.add", JSON.stringify({ text: "x".repeat(1000) }), cookie)
      assert.strictEqual(large.status, 413)
      assert.strictEqual((large.body as { _tag: string })._tag, "PayloadTooLarge")
    }))
})
