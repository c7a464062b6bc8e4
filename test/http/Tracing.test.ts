/**
 * The per-request tracing span: skipped when the app installs no tracer (a handler sees no span
 * and a `traceparent` header is ignored), made as the platform makes it when one is installed
 * (a server span per request, whose trace is the caller's `traceparent`).
 */
import { assert, describe, it } from "@effect/vitest"
import { HttpServer } from "@effect/platform"
import * as NodeServer from "../../src/server/NodeServer.js"
import { Context, Effect, Layer, Option, Schema, Tracer } from "effect"
import { createServer } from "node:http"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Server from "../../src/server/Server.js"
import { send } from "./client.js"

const whoTraces = defineRestRoute({
  method: "GET",
  path: "/trace",
  output: Schema.Struct({ traceId: Schema.NullOr(Schema.String) }),
  handler: () => Effect.map(Effect.option(Effect.currentSpan), (span) => ({ traceId: Option.isSome(span) ? span.value.traceId : null }))
})
const app = defineApp({ restRoutes: [whoTraces] })

/** A tracer recording the spans it makes (delegating to effect's native tracer). */
const recording = () => {
  const spans: Array<Tracer.Span> = []
  const native = Effect.runSync(Effect.tracer)
  const tracer = Tracer.make({
    span: (...args) => {
      const span = native.span(...args)
      spans.push(span)
      return span
    },
    context: native.context
  })
  return { spans, tracer }
}

/** Serves `app` in the scope, with `tracer` installed if given; the base URL. */
const serve = (tracer?: Tracer.Tracer) =>
  Effect.gen(function*() {
    const serving = Server.layer(app, { announce: false }).pipe(
      Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
      Layer.provideMerge(NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
    )
    const context = yield* Layer.build(tracer === undefined ? serving : serving.pipe(Layer.provide(Layer.setTracer(tracer))))
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    return `http://127.0.0.1:${address.port}`
  })

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
const traceparent = `00-${traceId}-00f067aa0ba902b7-01`

describe("request tracing", () => {
  it.scopedLive("without an installed tracer, requests get no span and traceparent is ignored", () =>
    Effect.gen(function*() {
      const url = yield* serve()
      const reply = yield* send(`${url}/trace`, { headers: { traceparent } })
      assert.strictEqual(reply.status, 200)
      assert.deepStrictEqual(reply.json(), { traceId: null })
    }))

  it.scopedLive("with an installed tracer, each request gets a server span continuing the caller's trace", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recording()
      const url = yield* serve(tracer)
      const reply = yield* send(`${url}/trace`, { headers: { traceparent } })
      assert.strictEqual(reply.status, 200)
      assert.deepStrictEqual(reply.json(), { traceId })
      const server = spans.filter((span) => span.kind === "server")
      assert.strictEqual(server.length, 1)
      assert.strictEqual(server[0]!.name, "http.server GET")
      assert.strictEqual(server[0]!.traceId, traceId)
      assert.strictEqual(server[0]!.attributes.get("http.route"), "/trace")
      assert.strictEqual(server[0]!.attributes.get("http.response.status_code"), 200)
      // A request without traceparent starts a trace of its own.
      const fresh = yield* send(`${url}/trace`)
      assert.notStrictEqual((fresh.json() as { readonly traceId: string | null }).traceId, traceId)
      assert.isString((fresh.json() as { readonly traceId: string | null }).traceId)
    }))
})
