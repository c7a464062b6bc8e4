/**
 * The OpenFeature server provider: `@openfeature/server-sdk` evaluates fw flags in process, from
 * the same registry handlers read (code definitions with their live overrides and toggles).
 *
 * - boolean: whether the flag is on for the caller (a variant flag serving its `offVariant` is off);
 * - string, number, object: the served variant's value (JSON, as declared), the caller's default
 *   when the flag serves no variant (off without an `offVariant`);
 * - `variant`: the served variant's name (`on`/`off` for a boolean flag);
 * - `reason`: the step that decided (see `Reason`), the fw step in `flagMetadata.fwStep`, the
 *   flag's `description` in `flagMetadata.description`;
 * - errors: `FLAG_NOT_FOUND` (no such key), `TYPE_MISMATCH` (the served value is not of the
 *   asked type, or a string/number/object read of a boolean flag), `INVALID_CONTEXT` (an
 *   attribute the mapping reads has the wrong type; see `Context`).
 *
 * Every evaluation of a known flag counts as a server-side read from source `openfeature` (spec
 * 2.11: usage tracking and the dead-flag report), like `isFlagEnabled`.
 */
import type { EvaluationContext, JsonValue, Provider, ResolutionDetails } from "@openfeature/server-sdk"
import { ErrorCode } from "@openfeature/server-sdk"
import type { Resolved } from "../flags/Definition.js"
import * as Evaluate from "../flags/Evaluate.js"
import type { FlagRegistryShape } from "../flags/FlagRegistry.js"
import * as Context from "./Context.js"
import * as Reason from "./Reason.js"

/** Options of the server provider. */
export interface Options {
  /**
   * The time evaluations read (epoch ms; default `Date.now`). Tests pass a fixed or stepped
   * clock to evaluate schedules and ramps at a chosen instant.
   */
  readonly now?: () => number
  /** The provider's name in OpenFeature's metadata (default `fw`). */
  readonly name?: string
}

/** What the provider reads flags from: a registry, or the flags plugin that holds one. */
export type Source = FlagRegistryShape | { readonly registry: FlagRegistryShape }

type Kind = "string" | "number" | "object"

const failure = <T>(value: T, errorCode: ErrorCode, errorMessage: string): Promise<ResolutionDetails<T>> =>
  Promise.resolve({ value, reason: "ERROR", errorCode, errorMessage })

const fitsKind = (value: unknown, kind: Kind): boolean =>
  kind === "object" ? typeof value === "object" && value !== null : typeof value === kind

const metadata = new WeakMap<Resolved, Map<Evaluate.Reason, Readonly<Record<string, string>>>>()

/** `flagMetadata` of a step: the same object for every evaluation of one resolved flag (the SDK freezes it). */
const metadataOf = (flag: Resolved, step: Evaluate.Reason): Readonly<Record<string, string>> => {
  let byStep = metadata.get(flag)
  if (byStep === undefined) metadata.set(flag, byStep = new Map())
  let found = byStep.get(step)
  if (found === undefined) {
    found = flag.description === undefined ? { fwStep: step } : { fwStep: step, description: flag.description }
    byStep.set(step, found)
  }
  return found
}

/** The OpenFeature server provider over an fw flag registry (see the module comment). */
export class FwServerProvider implements Provider {
  readonly metadata: { readonly name: string }
  readonly runsOn = "server" as const
  private readonly registry: FlagRegistryShape
  private readonly now: () => number

  constructor(source: Source, options: Options = {}) {
    this.registry = "registry" in source ? source.registry : source
    this.now = options.now ?? Date.now
    this.metadata = { name: options.name ?? "fw" }
  }

  /** The flag, the caller and the served variant (counted as a read), or a failure. */
  private evaluate(flagKey: string, context: EvaluationContext) {
    const flag = this.registry.resolved(flagKey)
    if (flag === undefined) return { ok: false, error: ErrorCode.FLAG_NOT_FOUND, message: `flag "${flagKey}" is not declared` } as const
    const subject = Context.subjectOf(context)
    if (Context.isInvalid(subject)) return { ok: false, error: ErrorCode.INVALID_CONTEXT, message: `flag "${flagKey}": ${subject.invalid}` } as const
    const now = this.now()
    // The step-by-step evaluation says which step decided; the registry's compiled one (the
    // same answer) is asked only to count the read, and only when usage is tracked.
    const step = Evaluate.decide(flag, subject, now)
    if (this.registry.usageOptions.track) this.registry.evaluateSync(flagKey, subject, now, "openfeature")
    return { ok: true, flag, step, variant: Evaluate.variantFor(flag, subject, step === "on"), now } as const
  }

  private details<T>(flag: Resolved, step: Evaluate.Reason, now: number, value: T, variant: string | undefined): ResolutionDetails<T> {
    const flagMetadata = metadataOf(flag, step)
    return variant === undefined
      ? { value, reason: Reason.of(flag, step, now), flagMetadata }
      : { value, variant, reason: Reason.of(flag, step, now), flagMetadata }
  }

  /** Whether the flag is on for the caller. */
  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean, context: EvaluationContext): Promise<ResolutionDetails<boolean>> {
    const read = this.evaluate(flagKey, context)
    if (!read.ok) return failure(defaultValue, read.error, read.message)
    const variant = read.variant
    return Promise.resolve(this.details(read.flag, read.step, read.now, variant !== null && variant.enabled, variant?.name))
  }

  private resolveValue<T>(kind: Kind, flagKey: string, defaultValue: T, context: EvaluationContext): Promise<ResolutionDetails<T>> {
    const flag = this.registry.resolved(flagKey)
    // A boolean flag has no value but on/off: refused before it is read, so it is not counted.
    if (flag !== undefined && flag.variants.length === 0) {
      return failure(defaultValue, ErrorCode.TYPE_MISMATCH, `flag "${flagKey}" is a boolean flag, read as ${kind}`)
    }
    const read = this.evaluate(flagKey, context)
    if (!read.ok) return failure(defaultValue, read.error, read.message)
    const variant = read.variant
    if (variant === null) return Promise.resolve(this.details(read.flag, read.step, read.now, defaultValue, undefined))
    if (!fitsKind(variant.value, kind)) {
      return failure(defaultValue, ErrorCode.TYPE_MISMATCH, `flag "${flagKey}": variant "${variant.name}" holds ${variant.value === null ? "null" : typeof variant.value}, read as ${kind}`)
    }
    return Promise.resolve(this.details(read.flag, read.step, read.now, variant.value as T, variant.name))
  }

  /** The served variant's string value. */
  resolveStringEvaluation(flagKey: string, defaultValue: string, context: EvaluationContext): Promise<ResolutionDetails<string>> {
    return this.resolveValue("string", flagKey, defaultValue, context)
  }

  /** The served variant's number value. */
  resolveNumberEvaluation(flagKey: string, defaultValue: number, context: EvaluationContext): Promise<ResolutionDetails<number>> {
    return this.resolveValue("number", flagKey, defaultValue, context)
  }

  /** The served variant's object (or array) value. */
  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T, context: EvaluationContext): Promise<ResolutionDetails<T>> {
    return this.resolveValue("object", flagKey, defaultValue, context)
  }
}
