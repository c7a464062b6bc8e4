/**
 * Area errors on the wire: `search.query`'s typed errors reach a client with their own tag and
 * status (not as a `ProcedureFailure`) over both rpc transports and the browser client, when the
 * client is given the same classes; tags are checked for collisions when the app is defined.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Schema } from "effect"
import { WebSocket } from "ws"
import { AppDefinitionError, defineApp } from "../../src/app/App.js"
import * as Errors from "../../src/app/Errors.js"
import { definePlugin } from "../../src/app/Plugin.js"
import * as Procedure from "../../src/app/Procedure.js"
import * as Client from "../../src/client/Client.js"
import type { ClientError, SocketConstructor } from "../../src/client/index.js"
import { mount, ProtocolError } from "../../src/client/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import { SearchFieldRejected, SearchIndexNotFound, searchErrors, SearchTenantMissing } from "../../src/search/Errors.js"
import * as Serve from "../support/Serve.js"
import * as TokenStrategy from "../support/TokenStrategy.js"
import { Notes, plugin } from "./support.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** Callers authenticate with `authorization: Bearer <id>@<tenant>` (nothing after the `@`: no tenant). */
const headerAuth = TokenStrategy.idAtTenant("wire-errors-test")

const searchApp = () => defineApp({ tables: [Notes], plugins: [plugin("memory")], auth: headerAuth })

const alice = { headers: { authorization: "Bearer alice@t1" } }

describe("area errors on the wire", () => {
  it.scopedLive("search.query refusals arrive typed over POST /rpc and the WebSocket", () =>
    Effect.gen(function*() {
      const app = searchApp()
      assert.deepStrictEqual(app.errors.map((error) => error._tag).sort(), searchErrors.map((error) => error._tag).sort())
      const served = yield* Serve.serve(app, memory)
      const query = app.procedures.get("search.query")!
      for (const protocol of [Client.layerHttp(served.rpcUrl), Client.layerWebSocket(served.wsUrl)]) {
        const client = yield* Client.connect(app.procedures.values(), protocol, { errors: searchErrors })
        const missing = yield* Effect.flip(client.call(query, { index: "nope", q: "x" } as never, alice))
        assert.instanceOf(missing, SearchIndexNotFound)
        if (missing._tag === "SearchIndexNotFound") {
          assert.strictEqual(missing.index, "nope")
          assert.strictEqual(missing.status, 404)
        }
        const rejected = yield* Effect.flip(
          client.call(query, { index: "notes", q: "x", filters: [{ field: "tenantId", op: "eq", value: "t2" }] } as never, alice)
        )
        assert.instanceOf(rejected, SearchFieldRejected)
        const tenantless = yield* Effect.flip(client.call(query, { index: "notes", q: "x" } as never, { headers: { authorization: "Bearer bob@" } }))
        assert.instanceOf(tenantless, SearchTenantMissing)
      }
      // The HTTP status and body of POST /rpc's answer carry the tag and the fields.
      const response = yield* Effect.promise(() =>
        fetch(served.rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer alice@t1" },
          body: JSON.stringify({ _tag: "Request", id: "1", tag: "search.query", payload: { index: "nope", q: "x" }, headers: [] })
        }).then((r) => r.json())
      )
      assert.deepStrictEqual(response, [{
        _tag: "Exit",
        requestId: "1",
        exit: { _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "SearchIndexNotFound", index: "nope" } } }
      }])
    }))

  it.scopedLive("the browser client decodes the errors it was given, and names the ones it was not", () =>
    Effect.gen(function*() {
      const app = searchApp()
      const served = yield* Serve.serve(app, memory)
      const query = app.procedures.get("search.query")!
      const Socket = WebSocket as unknown as SocketConstructor
      const typed = yield* Effect.acquireRelease(
        Effect.sync(() => mount({ apis: { main: { url: served.wsUrl, headers: alice.headers } }, WebSocket: Socket, errors: searchErrors })),
        (fw) => Effect.sync(fw.dispose)
      )
      const fail = <E>(promise: () => Promise<unknown>) =>
        Effect.flip(Effect.tryPromise({ try: promise, catch: (error) => error as ClientError<E> }))
      const missing = yield* fail(() => typed.apis.main.call(query, { index: "nope", q: "x" } as never))
      assert.instanceOf(missing, SearchIndexNotFound)
      const plain = yield* Effect.acquireRelease(
        Effect.sync(() => mount({ apis: { main: { url: served.wsUrl, headers: alice.headers } }, WebSocket: Socket })),
        (fw) => Effect.sync(fw.dispose)
      )
      const unknown = yield* fail(() => plain.apis.main.call(query, { index: "nope", q: "x" } as never))
      assert.instanceOf(unknown, ProtocolError)
      if (unknown._tag === "ProtocolError") assert.include(unknown.reason, "SearchIndexNotFound")
    }))

  it("an area error may not take a framework tag, nor two classes one tag", () => {
    class InputInvalid extends Schema.TaggedError<InputInvalid>()("InputInvalid", { message: Schema.String }) {
      get status() {
        return 400
      }
    }
    class OtherNotFound extends Schema.TaggedError<OtherNotFound>()("SearchIndexNotFound", { index: Schema.String }) {
      get status() {
        return 404
      }
    }
    const withErrors = (name: string, errors: ReadonlyArray<Errors.AreaErrorClass>) =>
      definePlugin({ name, permissions: [], errors })
    assert.throws(() => defineApp({ plugins: [withErrors("a", [InputInvalid])] }), AppDefinitionError, /InputInvalid/)
    assert.throws(
      () => defineApp({ plugins: [plugin("memory"), withErrors("a", [OtherNotFound])] }),
      AppDefinitionError,
      /SearchIndexNotFound/
    )
    // The same class declared twice is one error.
    const twice = defineApp({ plugins: [withErrors("a", [SearchIndexNotFound]), withErrors("b", [SearchIndexNotFound])] })
    assert.strictEqual(twice.errors.length, 1)
    // A client given colliding classes is refused the same way.
    assert.throws(() => Errors.wireError([OtherNotFound, SearchIndexNotFound]), Errors.ErrorTagCollision)
  })

  it.scopedLive("a plugin procedure's undeclared status error is still a ProcedureFailure", () =>
    Effect.gen(function*() {
      class Teapot extends Schema.TaggedError<Teapot>()("Teapot", {}) {
        get status() {
          return 418
        }
      }
      const brew = Procedure.action("brew", {
        input: Schema.Struct({}),
        output: Schema.Null,
        handler: () => Effect.fail(new Teapot())
      })
      const app = defineApp({ procedures: [brew] })
      const served = yield* Serve.serve(app, memory)
      const client = yield* Serve.httpClient(served, app)
      const result = yield* Effect.either(client.call(brew, {}))
      assert.isTrue(Either.isLeft(result))
      if (Either.isLeft(result)) {
        assert.strictEqual(result.left._tag, "ProcedureFailure")
        if (result.left._tag === "ProcedureFailure") assert.strictEqual(result.left.status, 418)
      }
    }))
})
