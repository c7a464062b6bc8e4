/**
 * Provenance of a write: which trace, which subject, which procedure caused it.
 * Set by the procedure runtime in a FiberRef and copied onto every ChangeEvent.
 */
import { Effect, FiberRef, Schema } from "effect"

/** Where a change came from. */
export const Provenance = Schema.Struct({
  traceId: Schema.String,
  subjectId: Schema.NullOr(Schema.String),
  procedure: Schema.NullOr(Schema.String)
})
/** @see Provenance */
export type Provenance = typeof Provenance.Type

/** Provenance of code that runs outside any procedure (boot, plugins, scripts). */
export const system: Provenance = { traceId: "system", subjectId: null, procedure: null }

/** The provenance of the current fiber. */
export const current: FiberRef.FiberRef<Provenance> = FiberRef.unsafeMake<Provenance>(system)

/** Runs `effect` with `provenance`. */
export const withProvenance = (provenance: Provenance) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.locally(effect, current, provenance)

/** A fresh random trace id (122 random bits, 32 hex digits). */
export const newTraceId = (): string => crypto.randomUUID().replaceAll("-", "")

/** The header a caller may name its trace id in. */
export const traceHeader = "x-fw-trace-id"
const traceIdPattern = /^[A-Za-z0-9-]{8,64}$/

/** The trace id of a request: a well-formed `x-fw-trace-id` header, or a fresh one. */
export const traceIdOf = (headers: Readonly<Record<string, string | undefined>>): string => {
  const given = headers[traceHeader]
  return given !== undefined && traceIdPattern.test(given) ? given : newTraceId()
}
