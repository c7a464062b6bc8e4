/**
 * What handlers call: `isFlagEnabled`, `requireFlag`, `flagValue`, `flagVariant`, and the pure
 * `evaluateVariant`. They find the registry in the fiber's context (the flags plugin offers it to
 * every guard and handler), so a handler's type needs no extra requirement. Each is a `FiberRead`:
 * the evaluation is a synchronous function on the fiber's `Clock`, answered without a fiber step
 * when yielded in `Effect.gen` and in one step when run as an effect.
 */
import { Cause, Exit } from "effect"
import type { Effect } from "effect"
import type { Guard } from "../app/Guard.js"
import { FlagDisabled } from "../app/Guard.js"
import type { Subject } from "../kernel/Subject.js"
import * as Definition from "./Definition.js"
import * as Evaluate from "./Evaluate.js"
import * as FiberRead from "./FiberRead.js"
import type { FlagRegistryShape } from "./FlagRegistry.js"
import { FlagRegistry } from "./FlagRegistry.js"
import type * as TypedFlag from "./TypedFlag.js"
import type * as Usage from "./Usage.js"

/** Anything that carries the caller: a handler or guard context. */
export interface HasSubject {
  readonly subject: Subject
}

const missing = "flags: no FlagRegistry in this fiber (add flagsPlugin to the app, or provide FlagRegistry.layerMemory)"

const registryOf = (fiber: FiberRead.RunningFiber) =>
  fiber.currentContext.unsafeMap.get(FlagRegistry.key) as FlagRegistryShape | undefined

const noRegistry = () => Exit.die(new Cause.RuntimeException(missing))

/** `isFlagEnabled`: whether `key` is on for `subject`, counted as a read from `source`. */
class EnabledRead extends FiberRead.FiberRead<boolean> {
  constructor(private readonly subject: Subject, private readonly key: string, private readonly source: Usage.Source) {
    super()
  }
  read(fiber: FiberRead.RunningFiber) {
    const registry = registryOf(fiber)
    if (registry === undefined) return noRegistry()
    return registry.evaluateSync(this.key, this.subject, fiber, this.source) ? FiberRead.exitTrue : FiberRead.exitFalse
  }
}

/** `requireFlag`: void when `key` is on for `subject`, else `FlagDisabled`. */
class RequiredRead extends FiberRead.FiberRead<void, FlagDisabled> {
  constructor(private readonly subject: Subject, private readonly key: string) {
    super()
  }
  read(fiber: FiberRead.RunningFiber) {
    const registry = registryOf(fiber)
    if (registry === undefined) return noRegistry()
    return registry.evaluateSync(this.key, this.subject, fiber, "requireFlag") ? Exit.void : Exit.fail(new FlagDisabled({ flag: this.key }))
  }
}

/** Any other read of the registry at the fiber's time. */
class RegistryRead<A> extends FiberRead.FiberRead<A> {
  constructor(private readonly f: (registry: FlagRegistryShape, fiber: FiberRead.RunningFiber) => A) {
    super()
  }
  read(fiber: FiberRead.RunningFiber) {
    const registry = registryOf(fiber)
    return registry === undefined ? noRegistry() : Exit.succeed(this.f(registry, fiber))
  }
}

/** Whether flag `key` is on for the caller (a server-side read: counted as use). Unknown keys are off. */
export const isFlagEnabled = (ctx: HasSubject, key: string): Effect.Effect<boolean> => new EnabledRead(ctx.subject, key, "isFlagEnabled")

/**
 * `requireFlag(ctx, key)` fails `FlagDisabled` when the flag is off for the caller;
 * `requireFlag(key)` is the same check as a guard (`guards: [requireFlag("beta")]`).
 */
export function requireFlag(key: string): Guard
export function requireFlag(ctx: HasSubject, key: string): Effect.Effect<void, FlagDisabled>
export function requireFlag(ctxOrKey: HasSubject | string, key?: string): Guard | Effect.Effect<void, FlagDisabled> {
  if (typeof ctxOrKey === "string") return (ctx) => new RequiredRead(ctx.subject, ctxOrKey)
  return new RequiredRead(ctxOrKey.subject, key!)
}

/** A typed flag's value for the caller: its served variant's value, else its default. */
export const flagValue = <A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I>): Effect.Effect<A> =>
  new RegistryRead((registry, fiber) => registry.valueSync(flag, ctx.subject, fiber, "flagValue"))

/** The name of the variant a typed flag serves the caller, or null. */
export const flagVariant = <A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I>): Effect.Effect<string | null> =>
  new RegistryRead((registry, fiber) => {
    const variant = registry.variantSync(flag.key, ctx.subject, fiber, "flagVariant")
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
