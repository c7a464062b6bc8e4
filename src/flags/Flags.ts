/**
 * What handlers call: `isFlagEnabled`, `requireFlag`, `flagValue`, `flagVariant` (each for any flag
 * by key, and the last two for a `defineFlag` result too), and the pure `evaluateVariant`. The reads
 * find the registry in the fiber's context (the flags plugin offers it to every guard and handler),
 * so a handler's type needs no extra requirement, and evaluate the live flag (its override
 * applied). Each is a `FiberRead`: the evaluation is a synchronous function on the fiber's `Clock`
 * (a `TestClock` under test), answered without a fiber step when yielded in `Effect.gen` and in one
 * step when run as an effect.
 */
import { Cause, Exit } from "effect"
import type { Effect } from "effect"
import type { Guard } from "../app/Guard.js"
import { FlagDisabled } from "../app/Guard.js"
import type { Subject } from "../kernel/Subject.js"
import * as Definition from "./Definition.js"
import { FlagDefinitionError } from "./Errors.js"
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

/** Whether `value` names a flag by key rather than by its `defineFlag` result. */
const isKey = <A, I>(value: string | TypedFlag.TypedFlag<A, I>): value is string => typeof value === "string"

/**
 * `flagValue(ctx, typedFlag)`: a typed flag's value for the caller, its served variant's value
 * decoded through the schema, else its default.
 *
 * `flagValue(ctx, key)`: any flag's value for the caller, as declared (JSON; a typed flag's in its
 * encoded form): the served variant's value; a flag with no variants serves its boolean (`true`
 * on, `false` off); null when nothing is served (a variant flag that is off without an
 * `offVariant`) and for an unknown key.
 *
 * Both read the live flag (overrides applied) at the time of the fiber's `Clock`, and count as a
 * server-side read.
 */
export function flagValue<A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I>): Effect.Effect<A>
export function flagValue(ctx: HasSubject, key: string): Effect.Effect<unknown>
export function flagValue<A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I> | string): Effect.Effect<A | unknown> {
  if (isKey(flag)) {
    return new RegistryRead((registry, fiber) => registry.variantSync(flag, ctx.subject, fiber, "flagValue")?.value ?? null)
  }
  return new RegistryRead((registry, fiber) => registry.valueSync(flag, ctx.subject, fiber, "flagValue"))
}

/**
 * The name of the variant a flag (its `defineFlag` result, or any flag by key) serves the caller:
 * null when it serves none (a variant flag that is off without an `offVariant`), for a flag that
 * declares no variants (a kill-switch has arms `on`/`off` only in `evaluateVariant`; read it with
 * `isFlagEnabled`), and for an unknown key. Reads the live flag (overrides applied) at the time of
 * the fiber's `Clock`, and counts as a server-side read.
 */
export function flagVariant<A, I>(ctx: HasSubject, flag: TypedFlag.TypedFlag<A, I> | string): Effect.Effect<string | null> {
  const key = isKey(flag) ? flag : flag.key
  return new RegistryRead((registry, fiber) => {
    const variant = registry.variantSync(key, ctx.subject, fiber, "flagVariant")
    return variant === null || registry.resolved(key)?.variants.length === 0 ? null : variant.name
  })
}

/**
 * Reproduces an evaluation: the variant the definition `flag` serves `subject` at `now` under the
 * key `key` (spec 4.2). A boolean flag yields `on` or `off`; a variant flag that is off yields its
 * `offVariant`, else null.
 *
 * A pure function of its arguments: it evaluates the definition it is given (no registry, so no
 * override and no usage count) and reads no clock. `now` (epoch ms) may be left out only for a
 * flag without a schedule, whose answer does not depend on the time; for a scheduled flag it
 * throws `FlagDefinitionError` asking for it (in Effect code, `yield* Clock.currentTimeMillis`).
 * To read the live flag a caller is served, overrides and the fiber's clock included, a handler
 * calls `isFlagEnabled`, `flagVariant` and `flagValue`.
 */
export const evaluateVariant = (
  key: string,
  flag: Definition.Flag,
  subject: Subject,
  now?: number
): Evaluate.VariantResolution | null => {
  const resolved = Definition.resolve(key, flag)
  if (now === undefined && resolved.timed) {
    throw new FlagDefinitionError(
      `evaluateVariant("${key}"): the flag has a schedule, so its answer depends on the time: pass \`now\` (in Effect code, yield* Clock.currentTimeMillis)`
    )
  }
  // Without a schedule the answer is the same at every instant: 0 is as good as any.
  const at = now ?? 0
  return Evaluate.variantFor(resolved, subject, Evaluate.decide(resolved, subject, at) === "on")
}
