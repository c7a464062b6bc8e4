/**
 * What handlers call: `isFlagEnabled`, `requireFlag`, `flagValue`, `flagVariant`, and the pure
 * `evaluateVariant`. They find the registry in the fiber's context (the flags plugin offers it to
 * every guard and handler), so a handler's type needs no extra requirement. Each is one fiber
 * step: the evaluation itself is a synchronous function on the fiber's `Clock`.
 */
import { Clock, Context, DefaultServices, Effect, Exit } from "effect"
import type { Guard } from "../app/Guard.js"
import { FlagDisabled } from "../app/Guard.js"
import type { Subject } from "../kernel/Subject.js"
import * as Definition from "./Definition.js"
import * as Evaluate from "./Evaluate.js"
import type { FlagRegistryShape } from "./FlagRegistry.js"
import { FlagRegistry } from "./FlagRegistry.js"
import type * as TypedFlag from "./TypedFlag.js"

/** Anything that carries the caller: a handler or guard context. */
export interface HasSubject {
  readonly subject: Subject
}

const missing = "flags: no FlagRegistry in this fiber (add flagsPlugin to the app, or provide FlagRegistry.layerMemory)"

/**
 * Runs `f` with the registry and a reader of the fiber's `Clock` (a `TestClock` under test), in
 * one fiber step; the clock is read only if `f` needs the time.
 */
const withRegistry = <A>(f: (registry: FlagRegistryShape, now: () => number) => A): Effect.Effect<A> =>
  Effect.withFiberRuntime((fiber) => {
    const registry = fiber.currentContext.unsafeMap.get(FlagRegistry.key) as FlagRegistryShape | undefined
    if (registry === undefined) return Effect.dieMessage(missing)
    return Exit.succeed(f(registry, () => Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock).unsafeCurrentTimeMillis()))
  })

/** Whether flag `key` is on for the caller (a server-side read: counted as use). Unknown keys are off. */
export const isFlagEnabled = (ctx: HasSubject, key: string): Effect.Effect<boolean> =>
  withRegistry((registry, now) => registry.evaluateSync(key, ctx.subject, now, "isFlagEnabled"))

const check = (ctx: HasSubject, key: string) =>
  Effect.flatMap(
    withRegistry((registry, now) => registry.evaluateSync(key, ctx.subject, now, "requireFlag")),
    (on) => on ? Effect.void : Effect.fail(new FlagDisabled({ flag: key }))
  )

/**
 * `requireFlag(ctx, key)` fails `FlagDisabled` when the flag is off for the caller;
 * `requireFlag(key)` is the same check as a guard (`guards: [requireFlag("beta")]`).
 */
export function requireFlag(key: string): Guard
export function requireFlag(ctx: HasSubject, key: string): Effect.Effect<void, FlagDisabled>
export function requireFlag(ctxOrKey: HasSubject | string, key?: string): Guard | Effect.Effect<void, FlagDisabled> {
  if (typeof ctxOrKey === "string") return (ctx) => check(ctx, ctxOrKey)
  return check(ctxOrKey, key!)
}

/** A typed flag's value for the caller: its served variant's value, else its default. */
export const flagValue = <A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I>): Effect.Effect<A> =>
  withRegistry((registry, now) => registry.valueSync(flag, ctx.subject, now(), "flagValue"))

/** The name of the variant a typed flag serves the caller, or null. */
export const flagVariant = <A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I>): Effect.Effect<string | null> =>
  withRegistry((registry, now) => {
    const variant = registry.variantSync(flag.key, ctx.subject, now(), "flagVariant")
    return variant === null || registry.resolved(flag.key)?.variants.length === 0 ? null : variant.name
  })

/**
 * Reproduces an evaluation without a registry: the variant `flag` serves `subject` at `now`
 * (default: the wall clock) under key `key`. A boolean flag yields `on` or `off`; a variant flag
 * that is off yields its `offVariant`, else null.
 */
export const evaluateVariant = (
  key: string,
  flag: Definition.Flag,
  subject: Subject,
  now: number = Date.now()
): Evaluate.VariantResolution | null => {
  const resolved = Definition.resolve(key, flag)
  return Evaluate.variantFor(resolved, subject, Evaluate.decide(resolved, subject, now) === "on")
}
