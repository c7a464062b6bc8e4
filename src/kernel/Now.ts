/**
 * Eager effect combinators for request paths: when an effect is already an `Exit` (what
 * `Effect.succeed`, `Effect.fail` and `Effect.void` make), its continuation is applied at once
 * instead of being queued for a fiber.
 *
 * A route whose every step answers at once (a synchronous auth strategy, guards and handler) then
 * yields its response as an `Exit` without any fiber running, and the server writes it directly;
 * a step that does real work (an asynchronous strategy, a store read) makes the rest an ordinary
 * effect, run as before. The result is the same either way: an `Exit` needs no services, fiber
 * refs or scope, so applying the continuation now or in a fiber reads nothing different.
 */
import type { Cause } from "effect"
import { Effect, Either, Exit } from "effect"

/** The exit an effect already is, or `undefined` when it must run. */
export const exitOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? effect as Exit.Exit<A, E> : undefined

/** `Effect.flatMap`, applied now when `self` is a success already. */
export const flatMap = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  const exit = exitOf(self)
  if (exit === undefined) return Effect.flatMap(self, f)
  return exit._tag === "Success" ? f(exit.value) : Exit.failCause(exit.cause)
}

/** `Effect.map`, applied now when `self` is a success already. */
export const map = <A, E, R, B>(self: Effect.Effect<A, E, R>, f: (a: A) => B): Effect.Effect<B, E, R> => {
  const exit = exitOf(self)
  if (exit === undefined) return Effect.map(self, f)
  return exit._tag === "Success" ? Exit.succeed(f(exit.value)) : Exit.failCause(exit.cause)
}

/** `Effect.either`, now when `self` has finished already. */
export const either = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Either.Either<A, E>, never, R> => {
  const exit = exitOf(self)
  if (exit === undefined) return Effect.either(self)
  if (exit._tag === "Success") return Exit.succeed(Either.right(exit.value))
  const cause = exit.cause
  return cause._tag === "Fail" ? Exit.succeed(Either.left(cause.error)) : Exit.failCause(cause as Cause.Cause<never>)
}

/** `Effect.matchCauseEffect`, applied now when `self` has finished already. */
export const matchCauseEffect = <A, E, R, B, E2, R2, C, E3, R3>(
  self: Effect.Effect<A, E, R>,
  options: {
    readonly onFailure: (cause: Cause.Cause<E>) => Effect.Effect<B, E2, R2>
    readonly onSuccess: (a: A) => Effect.Effect<C, E3, R3>
  }
): Effect.Effect<B | C, E2 | E3, R | R2 | R3> => {
  const exit = exitOf(self)
  if (exit === undefined) return Effect.matchCauseEffect(self, options)
  return exit._tag === "Success" ? options.onSuccess(exit.value) : options.onFailure(exit.cause)
}

/** `Effect.catchAllCause`, applied now when `self` has failed already. */
export const catchAllCause = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (cause: Cause.Cause<E>) => Effect.Effect<B, E2, R2>
): Effect.Effect<A | B, E2, R | R2> => {
  const exit = exitOf(self)
  if (exit === undefined) return Effect.catchAllCause(self, f)
  // A success carries no error: only its phantom error type changes.
  return exit._tag === "Success" ? exit as Exit.Exit<A, never> : f(exit.cause)
}
