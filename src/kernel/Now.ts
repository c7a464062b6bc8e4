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
 *
 * An effect that waits for a fiber already running on its own (`later`: an rpc call started at
 * once that waits for the database) keeps through these combinators what is to be made of that
 * fiber's exit: the server then writes the answer from the fiber's end, with no request fiber to
 * await it (`laterOf`). Its effect form stays what it always was.
 */
import type { Cause, Fiber } from "effect"
import { Effect, Either, Exit } from "effect"

/** What an effect made by `later` (or from one by these combinators) waits for, and what it then is. */
export interface Pending<A, E, R> {
  /** The fiber whose exit it waits for. */
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  /** The effect it is once `fiber` ended with `exit` (an `Exit` when nothing is left to run). */
  readonly then: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<A, E, R>
}

/**
 * Where an effect made by `later` keeps its `Pending`: a property of its own, not a `WeakMap` entry.
 * An rpc call marks about six effects this way, each short-lived; in a `WeakMap` every entry of a
 * new object took V8's ephemeron write barrier's slow path and the scavenger's ephemeron work
 * (most of the 4 % of a fleet replica's CPU at saturation that `perf` put there).
 */
const pendingKey: unique symbol = Symbol.for("@fw/framework/Now/pending")
interface Marked {
  [pendingKey]?: Pending<unknown, unknown, unknown>
}
const pendingOf = (effect: unknown): Pending<unknown, unknown, unknown> | undefined => (effect as Marked)[pendingKey]

/**
 * Marks `effect`, which waits for `fiber` and then is `then(exit)` of its exit, as such (see the
 * module doc); returns it. `then` must be what `effect` does with the exit, applied at once: only
 * `Now` combinators (an `Exit` needs no fiber).
 */
export const later = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  then: (exit: Exit.Exit<unknown, unknown>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  (effect as Marked)[pendingKey] = { fiber, then } as Pending<unknown, unknown, unknown>
  return effect
}

/** The fiber `effect` waits for and what it then is, when it was made by `later` (or from one by these combinators). */
export const laterOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Pending<A, E, R> | undefined =>
  pendingOf(effect) as Pending<A, E, R> | undefined

/** `made` (the effect form of `self` continued), marked as waiting for `self`'s fiber when `self` is. */
const continued = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  made: Effect.Effect<B, E2, R2>,
  next: (self: Effect.Effect<A, E, R>) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E2, R2> => {
  const pending = pendingOf(self) as Pending<A, E, R> | undefined
  return pending === undefined ? made : later(made, pending.fiber, (exit) => next(pending.then(exit)))
}

/** The exit an effect already is, or `undefined` when it must run. */
export const exitOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Exit.Exit<A, E> | undefined =>
  Exit.isExit(effect) ? effect as Exit.Exit<A, E> : undefined

/** `Effect.flatMap`, applied now when `self` is a success already. */
export const flatMap = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  const exit = exitOf(self)
  if (exit === undefined) return continued(self, Effect.flatMap(self, f), (then) => flatMap(then, f))
  return exit._tag === "Success" ? f(exit.value) : Exit.failCause(exit.cause)
}

/** `Effect.map`, applied now when `self` is a success already. */
export const map = <A, E, R, B>(self: Effect.Effect<A, E, R>, f: (a: A) => B): Effect.Effect<B, E, R> => {
  const exit = exitOf(self)
  if (exit === undefined) return continued(self, Effect.map(self, f), (then) => map(then, f))
  return exit._tag === "Success" ? Exit.succeed(f(exit.value)) : Exit.failCause(exit.cause)
}

/** `Effect.either`, now when `self` has finished already. */
export const either = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Either.Either<A, E>, never, R> => {
  const exit = exitOf(self)
  if (exit === undefined) return continued(self, Effect.either(self), either)
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
  if (exit === undefined) return continued(self, Effect.matchCauseEffect(self, options), (then) => matchCauseEffect(then, options))
  return exit._tag === "Success" ? options.onSuccess(exit.value) : options.onFailure(exit.cause)
}

/** `Effect.catchAllCause`, applied now when `self` has failed already. */
export const catchAllCause = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (cause: Cause.Cause<E>) => Effect.Effect<B, E2, R2>
): Effect.Effect<A | B, E2, R | R2> => {
  const exit = exitOf(self)
  if (exit === undefined) return continued(self, Effect.catchAllCause(self, f), (then) => catchAllCause(then, f))
  // A success carries no error: only its phantom error type changes.
  return exit._tag === "Success" ? exit as Exit.Exit<A, never> : f(exit.cause)
}
