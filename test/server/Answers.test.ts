import { assert, describe, it } from "@effect/vitest"
import { Console, Effect, Layer } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { app } from "../app/fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const request = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const json = (text: string) => JSON.parse(text) as unknown

describe("framework answers share one JSON error shape", () => {
  it.scopedLive("unknown path 404, bare GET /rpc 400, wrong method 405, malformed POST /rpc 400 in the rpc wire format", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const missing = yield* request(`${served.url}/nowhere?x=1`)
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(json(missing.text), { _tag: "RouteNotFound", message: "no route for GET /nowhere" })
      const bare = yield* request(served.rpcUrl)
      assert.strictEqual(bare.status, 400)
      assert.strictEqual((json(bare.text) as { _tag: string })._tag, "UpgradeRequired")
      const put = yield* request(served.rpcUrl, { method: "PUT" })
      assert.strictEqual(put.status, 405)
      assert.strictEqual((json(put.text) as { _tag: string })._tag, "MethodNotAllowed")
      for (const body of ["{not json", JSON.stringify({ hello: 1 }), JSON.stringify([{ _tag: "Request", id: "1", tag: "notes.list", payload: {} }, 5])]) {
        const malformed = yield* request(served.rpcUrl, { method: "POST", body, headers: { "content-type": "application/json" } })
        assert.strictEqual(malformed.status, 400, body)
        const answers = json(malformed.text) as ReadonlyArray<{ _tag: string }>
        assert.deepStrictEqual(answers.map((answer) => answer._tag), ["Defect"])
      }
    }))

  it.scopedLive("the startup line names the app, its URL and /docs; announce: false keeps it quiet", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const console: Console.Console = {
        ...yield* Effect.console,
        log: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void lines.push(args.join(" ")))
      }
      const served = yield* Serve.serve(app, memory, { announce: true }).pipe(Effect.withConsole(console))
      yield* Serve.serve(app, memory).pipe(Effect.withConsole(console))
      assert.deepStrictEqual(lines, [`fw: serving ${app.name} on ${served.url} (docs at /docs)`])
    }))
})
