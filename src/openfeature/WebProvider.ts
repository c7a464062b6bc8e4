/**
 * The OpenFeature web provider: `@openfeature/web-sdk` reads the browser client's live flag set
 * (the flags plugin's `flags.variants` query, pushed over the socket: a toggle or override on the
 * server arrives without a reload). Browser-safe: it loads the client and the web SDK, never
 * server code.
 *
 * - the caller is the client's signed-in session (the server resolves the Subject from the api's
 *   auth headers), so the evaluation context plays no part: set identity on the api, not on the SDK;
 * - boolean: whether the flag is on for the caller; string, number, object: the served variant's
 *   value, the caller's default when none is served; `variant`: the served variant's name;
 * - `reason`: `CACHED` (the server evaluated it and pushed it), `STALE` while the connection is
 *   being re-established or after a refusal (the last set is kept); the SDK answers
 *   `PROVIDER_NOT_READY` before the first set arrives;
 * - errors: `FLAG_NOT_FOUND`, `TYPE_MISMATCH` (as the server provider);
 * - every change of the set emits `PROVIDER_CONFIGURATION_CHANGED` with the keys that changed.
 *
 * Reads never count as flag usage (spec 2.11): the set is a bulk delivery, like the React hooks'.
 */
import type { JsonValue, Provider, ResolutionDetails } from "@openfeature/web-sdk"
import { ErrorCode, OpenFeatureEventEmitter, ProviderEvents } from "@openfeature/web-sdk"
import type { Api } from "../client/Api.js"
import * as Flags from "../client/Flags.js"
import type { LiveQuery, LiveState } from "../client/Stores.js"

type Kind = "boolean" | "string" | "number" | "object"

const fitsKind = (value: unknown, kind: Kind): boolean =>
  kind === "object" ? typeof value === "object" && value !== null : typeof value === kind

/** The keys whose served variant differs between two sets (added and removed keys included). */
const changedKeys = (before: Flags.VariantSet | undefined, after: Flags.VariantSet): Array<string> => {
  const previous = before?.variants ?? {}
  const changed: Array<string> = []
  for (const key of new Set([...Object.keys(previous), ...Object.keys(after.variants)])) {
    if (JSON.stringify(previous[key]) !== JSON.stringify(after.variants[key])) changed.push(key)
  }
  return changed
}

/** The OpenFeature web provider over an fw client api (see the module comment). */
export class FwWebProvider<E = never> implements Provider {
  readonly metadata = { name: "fw-web" } as const
  readonly runsOn = "client" as const
  /** Where `PROVIDER_CONFIGURATION_CHANGED` is emitted. */
  readonly events = new OpenFeatureEventEmitter()
  private readonly live: LiveQuery<Flags.VariantSet, E>
  private unsubscribe: (() => void) | undefined
  private last: Flags.VariantSet | undefined

  constructor(api: Api<E>) {
    this.live = Flags.liveVariants(api)
  }

  /** Subscribes to the live set; ready with the first set, failed by a refusal before one. */
  initialize(): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false
      const onChange = () => {
        const state = this.live.getSnapshot()
        if (!settled) {
          if (state.data !== undefined) {
            settled = true
            this.last = state.data
            resolve()
          } else if (state.status === "error") {
            settled = true
            reject(new Error("fw flags: the server refused the flag set"))
          }
          return
        }
        const data = state.data
        if (data === undefined || data === this.last) return
        const flagsChanged = changedKeys(this.last, data)
        this.last = data
        if (flagsChanged.length > 0) this.events.emit(ProviderEvents.ConfigurationChanged, { flagsChanged })
      }
      this.unsubscribe = this.live.subscribe(onChange)
      onChange()
    })
  }

  /** Stops following the live set. */
  onClose(): Promise<void> {
    this.unsubscribe?.()
    this.unsubscribe = undefined
    return Promise.resolve()
  }

  private resolve<T>(kind: Kind, flagKey: string, defaultValue: T): ResolutionDetails<T> {
    const state: LiveState<Flags.VariantSet, E> = this.live.getSnapshot()
    const data = state.data
    if (data === undefined) {
      return { value: defaultValue, reason: "ERROR", errorCode: ErrorCode.PROVIDER_NOT_READY, errorMessage: "the flag set has not arrived" }
    }
    if (!Object.hasOwn(data.variants, flagKey)) {
      return { value: defaultValue, reason: "ERROR", errorCode: ErrorCode.FLAG_NOT_FOUND, errorMessage: `flag "${flagKey}" is not declared` }
    }
    const reason = state.status === "live" ? "CACHED" : "STALE"
    const variant = data.variants[flagKey] ?? null
    if (kind === "boolean") {
      const on = variant !== null && variant.enabled
      return variant === null ? { value: on as T, reason } : { value: on as T, variant: variant.name, reason }
    }
    if (variant === null) return { value: defaultValue, reason }
    // A boolean flag serves the synthetic on/off variant, whose value is a boolean.
    if (!fitsKind(variant.value, kind)) {
      return {
        value: defaultValue,
        reason: "ERROR",
        errorCode: ErrorCode.TYPE_MISMATCH,
        errorMessage: `flag "${flagKey}": variant "${variant.name}" holds ${variant.value === null ? "null" : typeof variant.value}, read as ${kind}`
      }
    }
    return { value: variant.value as T, variant: variant.name, reason }
  }

  /** Whether the flag is on for the signed-in caller. */
  resolveBooleanEvaluation(flagKey: string, defaultValue: boolean): ResolutionDetails<boolean> {
    return this.resolve("boolean", flagKey, defaultValue)
  }

  /** The served variant's string value. */
  resolveStringEvaluation(flagKey: string, defaultValue: string): ResolutionDetails<string> {
    return this.resolve("string", flagKey, defaultValue)
  }

  /** The served variant's number value. */
  resolveNumberEvaluation(flagKey: string, defaultValue: number): ResolutionDetails<number> {
    return this.resolve("number", flagKey, defaultValue)
  }

  /** The served variant's object (or array) value. */
  resolveObjectEvaluation<T extends JsonValue>(flagKey: string, defaultValue: T): ResolutionDetails<T> {
    return this.resolve("object", flagKey, defaultValue)
  }
}
