/**
 * The per-request tracing span of the HTTP server, kept only when the app installs a tracer.
 *
 * `@effect/platform` opens a server span for every request (parsing the URL, redacting and copying
 * every header into attributes). With effect's built-in tracer nothing outside the process ever
 * sees that span, yet it costs about a fifth of a small request's CPU time. So the span is skipped
 * when the tracer in force where the server is built is still the built-in one; an app that
 * installs a tracer (`@effect/opentelemetry`, `Layer.setTracer`) gets its spans and trace context
 * propagation exactly as the platform makes them. Request trace ids (`x-fw-trace-id`) and change
 * provenance do not depend on spans.
 */
import { HttpMiddleware } from "@effect/platform"
import { Effect, Layer } from "effect"
import * as Telemetry from "../kernel/Telemetry.js"

/** Whether `tracer` was installed by the app (anything but effect's built-in tracer). */
export const isInstalled = Telemetry.isInstalled

/** `serving` with the per-request span disabled unless a tracer is installed where it is built. */
export const onlyWhenTraced = <A, E, R>(serving: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrapEffect(Effect.map(Effect.tracer, (tracer) =>
    isInstalled(tracer) ? serving : HttpMiddleware.withTracerDisabledWhen(serving, () => true)))
