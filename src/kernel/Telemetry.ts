/**
 * Spans and metrics of the framework's work, recorded only when the app installs a tracer.
 *
 * The framework uses effect's own `Effect.withSpan` and `Metric` APIs; an app that provides
 * `@effect/opentelemetry` (`NodeSdk.layer` with a span processor and a metric reader) exports
 * them. Without an installed tracer nothing is recorded: each instrumented operation then costs
 * one check of the fiber's tracer, so the fast path stays as it was. Every span carries the
 * framework's own trace id (the one `x-fw-trace-id` names, in logs and change provenance) as the
 * `fw.trace_id` attribute.
 */
import type { Tracer } from "effect"
import { Effect, Exit, FiberRef, Metric, MetricBoundaries, MetricLabel } from "effect"
import * as Provenance from "./changes/Provenance.js"

/** The tracer a fiber has when none is installed: effect's native tracer. */
const builtIn: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** Whether `tracer` was installed by the app (anything but effect's built-in tracer). */
export const isInstalled = (tracer: Tracer.Tracer): boolean => tracer !== builtIn

/** The attribute naming the framework's trace id on every span. */
export const traceIdAttribute = "fw.trace_id"

/** Attributes of a span. */
export type Attributes = Readonly<Record<string, string | number | boolean>>

/**
 * `effect` in a span named `name` when a tracer is installed, as it is otherwise. The span's
 * `fw.trace_id` is `traceId`, or the current provenance's.
 */
export const span = (name: string, attributes: Attributes, traceId?: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) =>
    tracer === builtIn ? effect : Effect.flatMap(
      traceId === undefined ? Effect.map(FiberRef.get(Provenance.current), (p) => p.traceId) : Effect.succeed(traceId),
      (id) => Effect.withSpan(effect, name, { attributes: { ...attributes, [traceIdAttribute]: id } })
    ))

const durationBoundaries = MetricBoundaries.exponential({ start: 0.5, factor: 2, count: 16 })

/** Procedure calls, tagged `procedure`, `kind` and `outcome` (`ok` or the failure's `_tag`). */
export const procedureCalls = Metric.counter("fw_procedure_calls_total", {
  description: "procedure calls by procedure, kind and outcome (ok or the error's tag)",
  incremental: true
})

/** Procedure durations in milliseconds, tagged `procedure` and `kind`. */
export const procedureDuration = Metric.histogram(
  "fw_procedure_duration_ms",
  durationBoundaries,
  "procedure call duration in milliseconds"
)

/** HTTP requests answered by REST routes, tagged `route` and `status`. */
export const requests = Metric.counter("fw_http_requests_total", {
  description: "REST route requests by route and status",
  incremental: true
})

/** REST route durations in milliseconds, tagged `route`. */
export const requestDuration = Metric.histogram(
  "fw_http_request_duration_ms",
  durationBoundaries,
  "REST route request duration in milliseconds"
)

/** The `_tag` of a failure (`Defect`, `Interrupted` or `Error` when it has none). */
export const outcomeOf = <A, E>(exit: Exit.Exit<A, E>): string => {
  if (Exit.isSuccess(exit)) return "ok"
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (failure !== undefined) {
    return typeof failure === "object" && failure !== null && "_tag" in failure && typeof failure._tag === "string"
      ? failure._tag
      : "Error"
  }
  return exit.cause._tag === "Interrupt" ? "Interrupted" : "Defect"
}

/**
 * `effect` measured as a procedure call (count by outcome, duration) inside its span, when a
 * tracer is installed; as it is otherwise.
 */
export const procedure = (tag: string, kind: string, traceId: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => {
    if (tracer === builtIn) return effect
    const tags = { procedure: tag, kind }
    return Effect.withSpan(
      measured(effect, (exit, millis) =>
        Effect.zipRight(
          Metric.increment(Metric.taggedWithLabels(procedureCalls, labels({ ...tags, outcome: outcomeOf(exit) }))),
          Metric.update(Metric.taggedWithLabels(procedureDuration, labels(tags)), millis)
        )),
      `fw.procedure ${tag}`,
      { kind: "internal", attributes: { "fw.procedure": tag, "fw.kind": kind, [traceIdAttribute]: traceId } }
    )
  })

/**
 * `effect` (answering a REST route) measured by status and duration inside its span, when a
 * tracer is installed; as it is otherwise.
 */
export const route = (route: string, traceId: string) =>
<A extends { readonly status: number }, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.tracerWith((tracer) => {
    if (tracer === builtIn) return effect
    return Effect.withSpan(
      measured(effect, (exit, millis) =>
        Effect.zipRight(
          Metric.increment(Metric.taggedWithLabels(requests, labels({
            route,
            status: Exit.isSuccess(exit) ? String(exit.value.status) : outcomeOf(exit)
          }))),
          Metric.update(Metric.taggedWithLabels(requestDuration, labels({ route })), millis)
        )),
      `fw.route ${route}`,
      { attributes: { "fw.route": route, [traceIdAttribute]: traceId } }
    )
  })

const labels = (tags: Readonly<Record<string, string>>) =>
  Object.entries(tags).map(([key, value]) => MetricLabel.make(key, value))

const measured = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  record: (exit: Exit.Exit<A, E>, millis: number) => Effect.Effect<void>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.onExit(effect, (exit) => record(exit, performance.now() - started))
  })
