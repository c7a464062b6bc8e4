/**
 * The flag registry: the resolved flags (code definitions with their live overrides), evaluation
 * on the Effect `Clock`, toggles and overrides (persisted and audited with `store: 'sql'`), usage
 * counting and the lifecycle report. `layerMemory` keeps state in the process; `layerSql` persists
 * it in `_fw_feature_flag_state` so every replica follows it through the change tap.
 */
import type { FiberRef, Queue, Scope } from "effect"
import { Clock, Context, DefaultServices, Effect, Either, Exit, Layer, PubSub, Schema } from "effect"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import type { StoreShape } from "../kernel/Store.js"
import { Store } from "../kernel/Store.js"
import type { Subject } from "../kernel/Subject.js"
import * as Definition from "./Definition.js"
import { FlagDefinitionError, FlagNotFound, FlagStoreFailed, OverrideRefused } from "./Errors.js"
import * as Evaluate from "./Evaluate.js"
import * as Lifecycle from "./Lifecycle.js"
import { FlagAudit, FlagState } from "./tables.js"
import * as TypedFlag from "./TypedFlag.js"
import * as Usage from "./Usage.js"

/** Options of the registry (the flag-related options of `flagsPlugin`). */
export interface Config {
  /** Untyped flags by key. */
  readonly flags?: Readonly<Record<string, Definition.Flag>>
  /** `defineFlag` results; their keys share one namespace with `flags`. */
  readonly typedFlags?: ReadonlyArray<TypedFlag.Any>
  /** Where live state is kept: in the process (default) or in the SQL store. */
  readonly store?: "memory" | "sql"
  /** Usage tracking (spec 2.11). */
  readonly usage?: {
    readonly track?: boolean
    readonly flushIntervalMs?: number
    readonly staleAfterDays?: number
    readonly retentionDays?: number
  }
}

/** A refused override (spec 7.1 #10), as listed by the inspect surface. */
export interface Refusal {
  readonly flag: string
  readonly reason: string
  readonly at: number
  /** `override`: refused when set; `stored`: a persisted override refused when read. */
  readonly source: "override" | "stored"
}

/** A flip or an override, before and after. */
export interface Change {
  readonly flag: string
  readonly before: Readonly<Record<string, unknown>>
  readonly after: Readonly<Record<string, unknown>>
  readonly version: number
}

/** One row of the inspect list. */
export interface ListEntry {
  readonly key: string
  readonly kind: "boolean" | "object" | "typed"
  readonly description: string | null
  readonly enabled: boolean
  readonly rollout: number
  readonly rolloutBy: "tenant" | "subject"
  readonly targetingRules: number
  readonly variants: ReadonlyArray<{ readonly name: string; readonly weight: number }>
  readonly offVariant: string | null
  readonly schedule: { readonly activateAt: number | null; readonly deactivateAt: number | null; readonly ramp: Definition.Resolved["ramp"] | null }
  readonly override: Readonly<Record<string, unknown>> | null
  readonly version: number
  readonly lifecycle: Lifecycle.Report
}

/** One audit row. */
export type AuditEntry = typeof FlagAudit.schema.Type

interface Entry {
  readonly key: string
  readonly base: Definition.Flag
  readonly typed: TypedFlag.Any | undefined
  resolved: Definition.Resolved
  override: Readonly<Record<string, unknown>> | undefined
  version: number
  /** Typed flags: each variant's value decoded through the schema. */
  decoded: ReadonlyMap<string, unknown>
}

/** The registry service. */
export interface FlagRegistryShape {
  readonly store: "memory" | "sql"
  readonly usageOptions: Usage.Options
  /** The live-source name `flags.evaluate` notes as read (see `Plugin.LiveSource`). */
  readonly sourceName: string
  readonly keys: ReadonlyArray<string>
  /** The flag as evaluated now (definition patched by its override); undefined for an unknown key. */
  readonly resolved: (key: string) => Definition.Resolved | undefined
  /**
   * Synchronous evaluation at `now` (a time, or a function reading the clock, called only when the
   * answer or the usage count needs it); counts a server-side read when `source` is given and usage is tracked.
   */
  readonly evaluateSync: (key: string, subject: Subject, now: number | (() => number), source?: Usage.Source) => boolean
  /** Synchronous variant resolution at `now`. */
  readonly variantSync: (key: string, subject: Subject, now: number, source?: Usage.Source) => Evaluate.VariantResolution | null
  /** A typed flag's value at `now`. */
  readonly valueSync: <A, I>(flag: TypedFlag.TypedFlag<A, I>, subject: Subject, now: number, source?: Usage.Source) => A
  /** Whether `key` is on for `subject` on the Effect clock. Unknown keys are off. */
  readonly isEnabled: (subject: Subject, key: string, source?: Usage.Source) => Effect.Effect<boolean>
  /** The caller's whole flag set (a bulk delivery: never counted as use). */
  readonly snapshot: (subject: Subject) => Effect.Effect<Record<string, boolean>>
  /** Flips `enabled` (audited with `actor` on the SQL tier). */
  readonly toggle: (key: string, actor: string | null) => Effect.Effect<Change, FlagNotFound | FlagStoreFailed>
  /** Sets an override; it patches only the fields it names. Refused whole when invalid. */
  readonly override: (
    key: string,
    patch: Readonly<Record<string, unknown>>,
    actor: string | null
  ) => Effect.Effect<Change, FlagNotFound | OverrideRefused | FlagStoreFailed>
  /** Drops the override: the code definition applies again. */
  readonly clearOverride: (key: string, actor: string | null) => Effect.Effect<Change, FlagNotFound | FlagStoreFailed>
  /** Audit rows, newest first (empty on the memory tier). */
  readonly audit: (flag?: string) => Effect.Effect<ReadonlyArray<AuditEntry>, FlagStoreFailed>
  /** Every flag with its rollout and lifecycle report. */
  readonly list: Effect.Effect<ReadonlyArray<ListEntry>, FlagStoreFailed>
  /** Refused overrides, oldest first. */
  readonly refusals: Effect.Effect<ReadonlyArray<Refusal>>
  /** A queue yielding once per change of the live state. */
  readonly changes: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
  /** SQL tier: binds the store and loads persisted overrides. */
  readonly attach: (store: StoreShape) => Effect.Effect<void, FlagStoreFailed>
  /** Follows a committed change of `_fw_feature_flag_state` (local or from another replica). */
  readonly applyChange: (event: ChangeEvent) => Effect.Effect<void>
  /** Writes buffered usage counts. */
  readonly flushUsage: Effect.Effect<number, FlagStoreFailed>
  /** Deletes usage rows past the retention. */
  readonly sweepUsage: Effect.Effect<number, FlagStoreFailed>
}

/** The flag registry tag. */
export class FlagRegistry extends Context.Tag("@fw/framework/flags/FlagRegistry")<FlagRegistry, FlagRegistryShape>() {}

const dayMs = 86_400_000

/**
 * Resolves the usage options and applies construction refusals 2 and 3 (spec 7.1): tracking on
 * the memory store, and `staleAfterDays` greater than `retentionDays`. `FW_FLAG_USAGE_TTL_HOURS`
 * sets the retention when the option is absent.
 */
export const usageOptions = (config: Config, env: Readonly<Record<string, string | undefined>> = process.env): Usage.Options => {
  const store = config.store ?? "memory"
  const usage = config.usage ?? {}
  if (usage.track === true && store === "memory") {
    throw new FlagDefinitionError("flags: usage tracking needs store: 'sql' (counts must outlive the process and be shared by replicas)")
  }
  const ttlHours = env.FW_FLAG_USAGE_TTL_HOURS
  let retentionDays = usage.retentionDays ?? 90
  if (usage.retentionDays === undefined && ttlHours !== undefined && ttlHours !== "") {
    const hours = Number(ttlHours)
    if (!Number.isFinite(hours) || hours <= 0) {
      throw new FlagDefinitionError(`flags: FW_FLAG_USAGE_TTL_HOURS must be a positive number of hours, got ${JSON.stringify(ttlHours)}`)
    }
    retentionDays = hours / 24
  }
  const staleAfterDays = usage.staleAfterDays ?? 30
  const flushIntervalMs = usage.flushIntervalMs ?? 300_000
  for (const [name, value] of [["staleAfterDays", staleAfterDays], ["retentionDays", retentionDays], ["flushIntervalMs", flushIntervalMs]] as const) {
    if (!Number.isFinite(value) || value <= 0) throw new FlagDefinitionError(`flags: usage.${name} must be a positive number`)
  }
  if (staleAfterDays > retentionDays) {
    throw new FlagDefinitionError(
      `flags: usage.staleAfterDays (${staleAfterDays}) is greater than retentionDays (${retentionDays}): staleness could never be proven`
    )
  }
  return { track: usage.track ?? store === "sql", flushIntervalMs, staleAfterDays, retentionDays }
}

const storeFailed = (error: { readonly message: string }) => new FlagStoreFailed({ message: error.message })

const decodeVariants = (typed: TypedFlag.Any | undefined, resolved: Definition.Resolved): ReadonlyMap<string, unknown> => {
  if (typed === undefined) return new Map()
  const decode = Schema.decodeUnknownSync(typed.schema)
  return new Map(resolved.variants.map((variant) => [variant.name, decode(variant.value)]))
}

const snapshotOf = (resolved: Definition.Resolved): Record<string, unknown> => ({
  enabled: resolved.enabled,
  rollout: resolved.rollout
})

/** The current time of the fiber's `Clock` (a `TestClock` under test), read synchronously. */
const nowOf = (fiber: { getFiberRef<X>(ref: FiberRef.FiberRef<X>): X }) =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock).unsafeCurrentTimeMillis()

/**
 * Builds a registry (synchronously, so a plugin can offer it to handlers before the server starts).
 * Throws `FlagDefinitionError` for refusals 1–3 and invalid definitions.
 */
export const make = (config: Config): FlagRegistryShape => {
  const mode = config.store ?? "memory"
  const usage = usageOptions(config)
  const entries = new Map<string, Entry>()
  for (const [key, flag] of Object.entries(config.flags ?? {})) {
    const resolved = Definition.resolve(key, flag)
    entries.set(key, { key, base: flag, typed: undefined, resolved, override: undefined, version: 0, decoded: new Map() })
  }
  for (const typed of config.typedFlags ?? []) {
    if (entries.has(typed.key)) {
      throw new FlagDefinitionError(
        `flag "${typed.key}" is declared both in flags and in typedFlags (or twice in typedFlags): keys share one namespace`
      )
    }
    const resolved = Definition.resolve(typed.key, typed.definition)
    entries.set(typed.key, { key: typed.key, base: typed.definition, typed, resolved, override: undefined, version: 0, decoded: decodeVariants(typed, resolved) })
  }
  const keys = [...entries.keys()]
  const buffer = Usage.makeBuffer()
  const refused: Array<Refusal> = []
  const hub = Effect.runSync(PubSub.sliding<void>(16))
  const notify = PubSub.publish(hub, undefined)
  let bound: StoreShape | undefined
  const sourceName = "_fw_feature_flags"

  /** A stored override; an empty one is a cleared override (the code definition stands). */
  const overrideOf = (override: Readonly<Record<string, unknown>>) => Object.keys(override).length === 0 ? undefined : override

  /** Patches the code definition with `override`; Left: why it is refused. */
  type Built = { readonly resolved: Definition.Resolved; readonly override: Readonly<Record<string, unknown>> | undefined }
  const candidate = (entry: Entry, override: Readonly<Record<string, unknown>> | undefined): Either.Either<Built, string> => {
    if (override === undefined) return Either.right({ resolved: Definition.resolve(entry.key, entry.base), override: undefined })
    try {
      let patch = override
      if (entry.typed !== undefined && override.variants !== undefined) {
        if (!Array.isArray(override.variants)) return Either.left("variants must be a list of {name, value, weight?}")
        const encoded = TypedFlag.encodeVariants(entry.typed.schema, override.variants)
        if (Either.isLeft(encoded)) return Either.left(encoded.left)
        patch = { ...override, variants: encoded.right }
      }
      return Either.right({ resolved: Definition.patch(entry.key, entry.base, patch), override: patch })
    } catch (error) {
      return Either.left(error instanceof Error ? error.message : String(error))
    }
  }

  const install = (entry: Entry, resolved: Definition.Resolved, override: Readonly<Record<string, unknown>> | undefined, version: number) => {
    entry.resolved = resolved
    entry.override = override
    entry.version = version
    entry.decoded = decodeVariants(entry.typed, resolved)
  }

  const refuse = (flag: string, reason: string, at: number, source: Refusal["source"]) =>
    Effect.zipRight(
      Effect.sync(() => refused.push({ flag, reason, at, source })),
      Effect.logWarning(`flags: override of "${flag}" refused whole, the code definition stands: ${reason}`)
    )

  const entryOf = (key: string) => {
    const entry = entries.get(key)
    return entry === undefined ? Effect.fail(new FlagNotFound({ flag: key })) : Effect.succeed(entry)
  }

  const track = usage.track
  const evaluateSync = (key: string, subject: Subject, now: number | (() => number), source?: Usage.Source): boolean => {
    const entry = entries.get(key)
    if (entry === undefined) return false
    const counted = track && source !== undefined
    const resolved = entry.resolved
    if (!counted && !resolved.timed) return Evaluate.isOn(resolved, subject, 0)
    const at = typeof now === "number" ? now : now()
    if (counted) buffer.note(key, source, at)
    return Evaluate.isOn(resolved, subject, at)
  }

  const variantSync = (key: string, subject: Subject, now: number, source?: Usage.Source) => {
    const entry = entries.get(key)
    if (entry === undefined) return null
    if (track && source !== undefined) buffer.note(key, source, now)
    const resolved = entry.resolved
    return Evaluate.variantFor(resolved, subject, Evaluate.decide(resolved, subject, now) === "on")
  }

  const valueSync = <A, I>(flag: TypedFlag.TypedFlag<A, I>, subject: Subject, now: number, source?: Usage.Source): A => {
    const entry = entries.get(flag.key)
    if (entry === undefined || entry.typed === undefined) return flag.default
    const variant = variantSync(flag.key, subject, now, source)
    if (variant === null || (variant.name === "on" && entry.resolved.variants.length === 0)) return flag.default
    if (variant.name === "off" && entry.resolved.variants.length === 0) return flag.default
    return entry.decoded.has(variant.name) ? entry.decoded.get(variant.name) as A : flag.default
  }

  /**
   * Persists (SQL) or installs (memory) a new override for `entry`, with an audit row on SQL.
   * The state row is re-read inside the transaction so concurrent replicas build on the latest version.
   */
  const commit = (
    entry: Entry,
    action: "toggle" | "override" | "clear",
    actor: string | null,
    next: (current: Readonly<Record<string, unknown>> | undefined, resolved: Definition.Resolved) => Readonly<Record<string, unknown>> | undefined
  ) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (bound === undefined) {
        if (mode === "sql") return yield* new FlagStoreFailed({ message: "the flag store is not attached yet (the plugin has not started)" })
        const before = snapshotOf(entry.resolved)
        const override = next(entry.override, entry.resolved)
        const built = candidate(entry, override)
        if (Either.isLeft(built)) {
          yield* refuse(entry.key, built.left, now, "override")
          return yield* new OverrideRefused({ flag: entry.key, reason: built.left })
        }
        install(entry, built.right.resolved, built.right.override, entry.version + 1)
        yield* notify
        return { flag: entry.key, before, after: snapshotOf(entry.resolved), version: entry.version }
      }
      const store = bound
      // The state row is read under its row lock, so a concurrent flip on another replica waits for
      // this one and builds on it (read committed would otherwise let both read the same version).
      const result = yield* store.transaction(Effect.gen(function*() {
        const row = yield* store.get(FlagState, entry.key, { forUpdate: true })
        const stored = row._tag === "Some" ? overrideOf(row.value.override) : undefined
        const version = row._tag === "Some" ? row.value.version : 0
        // A stored override that no longer fits was refused when read: the change builds on the code definition.
        const fits = candidate(entry, stored)
        const current = Either.isRight(fits) ? stored : undefined
        const currentResolved = Either.isRight(fits) ? fits.right.resolved : Definition.resolve(entry.key, entry.base)
        const override = next(current, currentResolved)
        const built = candidate(entry, override)
        if (Either.isLeft(built)) return Either.left(built.left)
        // A cleared override keeps its row (an empty override): deleting it would restart the
        // flag's version at 1, and every replica (this one included) would take the next change for
        // one older than the version it holds and ignore it.
        const state = { id: entry.key, override: built.right.override ?? {}, version: version + 1, updatedAt: now, updatedBy: actor }
        // No row to lock: a concurrent first writer makes this insert fail `DuplicateRow`, and the
        // whole change is retried on the row that writer committed.
        yield* row._tag === "Some" ? store.upsert(FlagState, state) : store.insert(FlagState, state)
        const before = snapshotOf(currentResolved)
        const after = snapshotOf(built.right.resolved)
        yield* store.insert(FlagAudit, {
          flag: entry.key,
          action,
          actor,
          at: now,
          before: { ...before, override: stored ?? null },
          after: { ...after, override: built.right.override ?? null }
        })
        return Either.right({ built: built.right, before, after, version: version + 1 })
      })).pipe(
        Effect.retry({ while: (error) => error._tag === "DuplicateRow", times: 5 }),
        Effect.mapError(storeFailed)
      )
      if (Either.isLeft(result)) {
        yield* refuse(entry.key, result.left, now, "override")
        return yield* new OverrideRefused({ flag: entry.key, reason: result.left })
      }
      const { built, before, after, version } = result.right
      if (version > entry.version) install(entry, built.resolved, built.override, version)
      yield* notify
      return { flag: entry.key, before, after, version }
    })

  const applyStored = (key: string, override: Readonly<Record<string, unknown>> | undefined, version: number, at: number) =>
    Effect.gen(function*() {
      const entry = entries.get(key)
      if (entry === undefined) return
      const built = candidate(entry, override)
      if (Either.isLeft(built)) {
        yield* refuse(key, built.left, at, "stored")
        install(entry, Definition.resolve(key, entry.base), undefined, version)
      } else {
        install(entry, built.right.resolved, built.right.override, version)
      }
      yield* notify
    })

  const StateRow = Schema.decodeUnknownEither(FlagState.schema)

  const registry: FlagRegistryShape = {
    store: mode,
    usageOptions: usage,
    sourceName,
    keys,
    resolved: (key) => entries.get(key)?.resolved,
    evaluateSync,
    variantSync,
    valueSync,
    isEnabled: (subject, key, source) =>
      Effect.withFiberRuntime((fiber) => Exit.succeed(evaluateSync(key, subject, () => nowOf(fiber), source))),
    snapshot: (subject) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const out: Record<string, boolean> = {}
        for (const key of keys) out[key] = evaluateSync(key, subject, now)
        return out
      }),
    toggle: (key, actor) =>
      Effect.flatMap(entryOf(key), (entry) =>
        commit(entry, "toggle", actor, (current, resolved) => ({ ...current, enabled: !resolved.enabled })).pipe(
          // A flip of `enabled` alone cannot fail the value schema.
          Effect.catchTag("OverrideRefused", (error) => Effect.die(error))
        )),
    override: (key, patch, actor) =>
      Effect.flatMap(entryOf(key), (entry) => commit(entry, "override", actor, (current) => ({ ...current, ...patch }))),
    clearOverride: (key, actor) =>
      Effect.flatMap(entryOf(key), (entry) =>
        commit(entry, "clear", actor, () => undefined).pipe(Effect.catchTag("OverrideRefused", (error) => Effect.die(error)))),
    audit: (flag) =>
      bound === undefined
        ? Effect.succeed([])
        : bound.find(FlagAudit, {
          ...(flag === undefined ? {} : { where: { flag } }),
          orderBy: "at",
          direction: "desc",
          limit: 1000
        }).pipe(Effect.mapError(storeFailed)),
    list: Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const retentionMs = usage.retentionDays * dayMs
      const stored = usage.track && bound !== undefined
        ? yield* Usage.newestReads(bound, now, retentionMs).pipe(Effect.mapError(storeFailed))
        : new Map<string, number>()
      return [...entries.values()].map((entry): ListEntry => {
        const r = entry.resolved
        const buffered = buffer.newest(entry.key)
        const recorded = stored.get(entry.key)
        const newest = buffered === undefined ? recorded : recorded === undefined ? buffered : Math.max(buffered, recorded)
        return {
          key: entry.key,
          kind: entry.typed !== undefined ? "typed" : r.boolean ? "boolean" : "object",
          description: r.description ?? null,
          enabled: r.enabled,
          rollout: Evaluate.percentageAt(r, now),
          rolloutBy: r.rolloutBy,
          targetingRules: r.targeting.length,
          variants: r.variants.map((variant) => ({ name: variant.name, weight: variant.weight })),
          offVariant: r.offVariant ?? null,
          schedule: { activateAt: r.activateAt ?? null, deactivateAt: r.deactivateAt ?? null, ramp: r.ramp ?? null },
          override: entry.override ?? null,
          version: entry.version,
          lifecycle: Lifecycle.report(r, usage.track, newest, now, usage.staleAfterDays * dayMs)
        }
      })
    }),
    refusals: Effect.sync(() => [...refused]),
    changes: PubSub.subscribe(hub),
    attach: (store) =>
      Effect.gen(function*() {
        bound = store
        const rows = yield* store.find(FlagState).pipe(Effect.mapError(storeFailed))
        const now = yield* Clock.currentTimeMillis
        for (const row of rows) yield* applyStored(row.id, overrideOf(row.override), row.version, now)
      }),
    applyChange: (event) =>
      Effect.gen(function*() {
        if (event.table !== FlagState.name) return
        const entry = entries.get(event.id)
        if (entry === undefined) return
        if (event.op === "delete") {
          if (entry.override !== undefined) yield* applyStored(event.id, undefined, entry.version + 1, event.at)
          return
        }
        const row = StateRow(event.after)
        if (Either.isLeft(row)) return yield* Effect.logWarning(`flags: unreadable state row for "${event.id}"`)
        if (row.right.version < entry.version) return
        yield* applyStored(event.id, overrideOf(row.right.override), row.right.version, event.at)
      }),
    flushUsage: Effect.suspend(() =>
      bound === undefined || !track ? Effect.succeed(0) : Usage.flush(bound, buffer).pipe(Effect.mapError(storeFailed))
    ),
    sweepUsage: Effect.suspend(() =>
      bound === undefined || !track
        ? Effect.succeed(0)
        : Effect.flatMap(Clock.currentTimeMillis, (now) => Usage.sweep(bound!, now, usage.retentionDays * dayMs)).pipe(Effect.mapError(storeFailed))
    )
  }
  return registry
}

/** A registry keeping its state in the process. */
export const layerMemory = (config: Omit<Config, "store">): Layer.Layer<FlagRegistry> =>
  Layer.sync(FlagRegistry, () => make({ ...config, store: "memory" }))

/** A registry persisting its state in the SQL store (the flags tables must exist). */
export const layerSql = (config: Omit<Config, "store">): Layer.Layer<FlagRegistry, FlagStoreFailed, Store> =>
  Layer.effect(
    FlagRegistry,
    Effect.gen(function*() {
      const registry = make({ ...config, store: "sql" })
      yield* registry.attach(yield* Store)
      return registry
    })
  )
