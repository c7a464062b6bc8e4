/**
 * With `@effect/opentelemetry` installed by the app (an in-memory span exporter and a metric
 * reader), procedures, REST routes, store statements and plugin work produce spans carrying the
 * framework's trace id (`fw.trace_id`, the `x-fw-trace-id` the caller named), nested in one
 * OpenTelemetry trace per request; procedure and request metrics (count by outcome, duration) are
 * exported. Without a tracer none of these spans is made.
 */
import { assert, describe, it } from "@effect/vitest"
import { NodeSdk } from "@effect/opentelemetry"
import { HttpServer } from "@effect/platform"
import * as NodeServer from "../../src/server/NodeServer.js"
import { AggregationTemporality, InMemoryMetricExporter, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import type { DataPoint, Histogram } from "@opentelemetry/sdk-metrics"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Context, Effect, Layer, Schema, Schedule } from "effect"
import { createServer } from "node:http"
import { defineApp } from "../../src/app/App.js"
import { requireAuthenticated } from "../../src/app/Guard.js"
import { definePlugin } from "../../src/app/Plugin.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import * as Client from "../../src/client/Client.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Server from "../../src/server/Server.js"
import { send } from "../http/client.js"

const Notes = defineTable("notes", { fields: { tenantId: Schema.String, text: Schema.String }, tenantField: "tenantId" })
const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String }),
  output: Notes.schema,
  guards: [requireAuthenticated],
  handler: ({ text }, { store, subject }) => store.insert(Notes, { tenantId: subject.tenantId!, text })
})
const refuse = query("notes.refuse", {
  input: Schema.Struct({}),
  output: Schema.Null,
  handler: () => Effect.fail({ status: 409, message: "refused" })
})
/** The span the handler runs in, if any. */
const currentSpan = query("spans.current", {
  input: Schema.Struct({}),
  output: Schema.Struct({ span: Schema.NullOr(Schema.String) }),
  handler: () => Effect.map(Effect.option(Effect.currentSpan), (span) => ({ span: span._tag === "Some" ? span.value.name : null }))
})
const countNotes = defineRestRoute({
  method: "GET",
  path: "/notes/count",
  output: Schema.Struct({ count: Schema.Number }),
  handler: (_, { store }) => Effect.map(store.count(Notes), (count) => ({ count }))
})
const audit = definePlugin({
  name: "audit",
  permissions: ["store:changes:read", "rpc:intercept:mutation"],
  interceptors: [{ kind: "mutation", intercept: (_, next) => next }],
  onChangeEvent: () => Effect.void.pipe(Effect.delay(0))
})
const secret = "an-observability-test-secret-of-32-bytes"
const app = defineApp({
  tables: [Notes],
  procedures: [addNote, refuse, currentSpan],
  restRoutes: [countNotes],
  plugins: [audit],
  auth: [passwordSessionStrategy({ secret })]
})

/** Serves `app` in the scope, with `telemetry` provided where the server is built; the base URL. */
const serve = (telemetry: Layer.Layer<never> | Layer.Layer<unknown>) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(Server.layer(app, { announce: false }).pipe(
      Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
      Layer.provideMerge(NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
      Layer.provide(telemetry)
    ))
    const { address } = Context.get(context, HttpServer.HttpServer)
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    return `http://127.0.0.1:${address.port}`
  })

/** Spans named `name`. */
const named = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((span) => span.name === name)

/** Waits (live) until `found` holds on the exporter's spans, at most ~5 s (then the assertions below fail). */
const until = (exporter: InMemorySpanExporter, found: (spans: ReadonlyArray<ReadableSpan>) => boolean) =>
  Effect.suspend(() => found(exporter.getFinishedSpans()) ? Effect.void : Effect.fail("not yet")).pipe(
    Effect.retry({ times: 250, schedule: Schedule.spaced("20 millis") }),
    Effect.catchAll(() => Effect.void)
  )

const traceId = "0af7651916cd43dd8448eb211c80319c"

describe("OpenTelemetry", () => {
  it.scopedLive("procedures, routes, store statements and plugin work are spans with the framework's trace id; metrics are exported", () =>
    Effect.gen(function*() {
      const exporter = new InMemorySpanExporter()
      const metrics = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
      const reader = new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 3_600_000 })
      const url = yield* serve(NodeSdk.layer(() => ({
        resource: { serviceName: "fw-test" },
        spanProcessor: new SimpleSpanProcessor(exporter),
        metricReader: reader
      })))
      const session = yield* issueSession(Subject.make({ type: "user", id: "ada", tenantId: "acme" }), secret)
      const headers = { cookie: `fw:session=${session}`, "x-fw-trace-id": traceId }
      const client = yield* Client.connect(app.procedures.values(), Client.layerHttp(`${url}/rpc`))

      yield* client.call(addNote, { text: "hello" }, { headers })
      assert.deepStrictEqual(yield* client.call(currentSpan, {}, { headers }), { span: "fw.procedure spans.current" })
      const refused = yield* Effect.either(client.call(refuse, {}, { headers }))
      assert.isTrue(refused._tag === "Left")
      const counted = yield* send(`${url}/notes/count`, { headers })
      assert.strictEqual(counted.status, 200)
      yield* until(exporter, (spans) => named(spans, "fw.plugin audit onChangeEvent").length > 0)

      const spans = exporter.getFinishedSpans()
      const one = (name: string) => {
        const found = named(spans, name)
        assert.strictEqual(found.length, 1, `one "${name}" span among ${spans.map((span) => span.name).join(", ")}`)
        return found[0]!
      }
      const procedure = one("fw.procedure notes.add")
      const insert = one("fw.store insert")
      const intercept = one("fw.plugin audit intercept")
      const onChange = one("fw.plugin audit onChangeEvent")
      const route = one("fw.route GET /notes/count")
      const count = one("fw.store count")
      for (const span of [procedure, insert, intercept, onChange, route, count, one("fw.procedure notes.refuse")]) {
        assert.strictEqual(span.attributes["fw.trace_id"], traceId, span.name)
      }
      assert.strictEqual(procedure.attributes["fw.procedure"], "notes.add")
      assert.strictEqual(insert.attributes["fw.store.table"], "notes")
      // The store statement and the interceptor run inside the procedure's span, in its trace.
      assert.strictEqual(insert.spanContext().traceId, procedure.spanContext().traceId)
      assert.strictEqual(intercept.parentSpanContext?.spanId, procedure.spanContext().spanId)
      // The route's span is a child of the platform's server span, and its statement of the route's.
      const server = spans.find((span) => span.name === "http.server GET" && span.spanContext().traceId === route.spanContext().traceId)
      assert.isDefined(server)
      assert.strictEqual(count.parentSpanContext?.spanId, route.spanContext().spanId)

      const collected = yield* Effect.promise(() => reader.collect())
      const exported = collected.resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)
      const points = (name: string) => (exported.find((metric) => metric.descriptor.name === name)?.dataPoints ?? []) as Array<DataPoint<unknown>>
      const valueOf = (name: string, attributes: Record<string, string>) =>
        points(name).find((point) => Object.entries(attributes).every(([key, value]) => point.attributes[key] === value))?.value
      assert.strictEqual(valueOf("fw_procedure_calls_total", { procedure: "notes.add", kind: "mutation", outcome: "ok" }), 1)
      assert.strictEqual(valueOf("fw_procedure_calls_total", { procedure: "notes.refuse", kind: "query", outcome: "ProcedureFailure" }), 1)
      assert.strictEqual((valueOf("fw_procedure_duration_ms", { procedure: "notes.add" }) as Histogram | undefined)?.count, 1)
      assert.strictEqual(valueOf("fw_http_requests_total", { route: "GET /notes/count", status: "200" }), 1)
      assert.strictEqual((valueOf("fw_http_request_duration_ms", { route: "GET /notes/count" }) as Histogram | undefined)?.count, 1)
    }))

  it.scopedLive("without an installed tracer, no framework span is made", () =>
    Effect.gen(function*() {
      const url = yield* serve(Layer.empty)
      const client = yield* Client.connect(app.procedures.values(), Client.layerHttp(`${url}/rpc`))
      assert.deepStrictEqual(yield* client.call(currentSpan, {}), { span: null })
    }))
})
