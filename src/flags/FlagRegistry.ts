/**
 * The flag registry: the resolved flags (code definitions with their live overrides), evaluation
 * on the Effect `Clock`, toggles and overrides (persisted and audited with `store: 'sql'`), usage
 * counting and the lifecycle report. `layerMemory` keeps state in the process; `layerSql` persists
 * it in `_fw_feature_flag_state` so every replica follows it through the change tap. One flag's
 * live state is an `Entry`, writes go through `Commit`, inspect rows are built by `List`.
 */
import type { Queue, Scope } from "effect"
import { Clock, Context, Effect, Either, Layer, PubSub, Schema } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { StoreShape } from "../kernel/store/Store.js"
import { Store } from "../kernel/store/Store.js"
import type { Subject } from "../kernel/Subject.js"
import type { Change, Refusal } from "./Commit.js"
import * as Commit from "./Commit.js"
import type * as Definition from "./Definition.js"
import * as Entry from "./Entry.js"
import { FlagDefinitionError, FlagNotFound, storeFailed } from "./Errors.js"
import type { FlagStoreFailed, OverrideRefused } from "./Errors.js"
import * as Evaluate from "./Evaluate.js"
import * as Experiments from "./Experiments.js"
import * as FiberRead from "./FiberRead.js"
import type { ListEntry } from "./List.js"
import * as List from "./List.js"
import { FlagAudit, FlagState } from "./tables.js"
import * as Time from "./Time.js"
import type * as TypedFlag from "./TypedFlag.js"
import * as Usage from "./Usage.js"

export type { Change, Refusal } from "./Commit.js"
export type { ListEntry } from "./List.js"
export type { TimeSource } from "./Time.js"
export { usageOptions } from "./Usage.js"

/** Options of the registry (the flag-related options of `flagsPlugin`). */
export interface Config {
  /** Untyped flags by key. */
  readonly flags?: Readonly<Record<string, Definition.Flag>>
  /** `defineFlag` results; their keys share one namespace with `flags`. */
  readonly typedFlags?: ReadonlyArray<TypedFlag.Any>
  /** Where live state is kept: in the process (default) or in the SQL store. */
  readonly store?: "memory" | "sql"
  /** Usage tracking (spec 2.11). */
  readonly usage?: Usage.Config
  /** The experiments typed flags feed: an override of such a flag must keep serving their arms. */
  readonly experiments?: ReadonlyArray<Experiments.ExperimentLike>
}

/** One audit row. */
export type AuditEntry = typeof FlagAudit.schema.Type

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
   * Synchronous evaluation at `now` (read only when the answer or the usage count needs it);
   * counts a server-side read when `source` is given and usage is tracked. Unknown keys are off.
   */
  readonly evaluateSync: (key: string, subject: Subject, now: Time.TimeSource, source?: Usage.Source) => boolean
  /** Synchronous variant resolution at `now`. */
  readonly variantSync: (key: string, subject: Subject, now: Time.TimeSource, source?: Usage.Source) => Evaluate.VariantResolution | null
  /** A typed flag's value at `now`. */
  readonly valueSync: <A, I>(flag: TypedFlag.TypedFlag<A, I>, subject: Subject, now: Time.TimeSource, source?: Usage.Source) => A
  /** Whether `key` is on for `subject` on the Effect clock. Unknown keys are off. */
  readonly isEnabled: (subject: Subject, key: string, source?: Usage.Source) => Effect.Effect<boolean>
  /** The caller's whole flag set (a bulk delivery: never counted as use). */
  readonly snapshot: (subject: Subject) => Effect.Effect<Record<string, boolean>>
  /** Flips `enabled` (audited with the operator `by` on the SQL tier). */
  readonly toggle: (key: string, by: Commit.Operator) => Effect.Effect<Change, FlagNotFound | FlagStoreFailed>
  /** Sets an override; it patches only the fields it names. Refused whole when invalid. */
  readonly override: (
    key: string,
    patch: Readonly<Record<string, unknown>>,
    by: Commit.Operator
  ) => Effect.Effect<Change, FlagNotFound | OverrideRefused | FlagStoreFailed>
  /** Drops the override: the code definition applies again. */
  readonly clearOverride: (key: string, by: Commit.Operator) => Effect.Effect<Change, FlagNotFound | FlagStoreFailed>
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

/** `isEnabled` of a registry: one synchronous read of the fiber that runs it (see `FiberRead`). */
class EnabledRead extends FiberRead.FiberRead<boolean> {
  constructor(
    private readonly evaluate: FlagRegistryShape["evaluateSync"],
    private readonly subject: Subject,
    private readonly key: string,
    private readonly source: Usage.Source | undefined
  ) {
    super()
  }
  read(fiber: FiberRead.RunningFiber) {
    return this.evaluate(this.key, this.subject, fiber, this.source) ? FiberRead.exitTrue : FiberRead.exitFalse
  }
}

/**
 * Builds a registry (synchronously, so a plugin can offer it to handlers before the server starts).
 * Throws `FlagDefinitionError` for refusals 1–3 and invalid definitions.
 */
export const make = (config: Config): FlagRegistryShape => {
  const mode = config.store ?? "memory"
  const usage = Usage.usageOptions(config)
  const entries = new Map<string, Entry.Entry>()
  const fed = Experiments.fedBy(config.typedFlags ?? [], config.experiments ?? [])
  for (const [key, flag] of Object.entries(config.flags ?? {})) entries.set(key, Entry.make(key, flag, undefined))
  for (const typed of config.typedFlags ?? []) {
    if (entries.has(typed.key)) {
      throw new FlagDefinitionError(
        `flag "${typed.key}" is declared both in flags and in typedFlags (or twice in typedFlags): keys share one namespace`
      )
    }
    entries.set(typed.key, Entry.make(typed.key, typed.definition, typed, fed.get(typed.key)))
  }
  const keys = [...entries.keys()]
  const buffer = Usage.makeBuffer()
  const hub = Effect.runSync(PubSub.sliding<void>(16))
  let bound: StoreShape | undefined
  const writer = Commit.makeWriter({ mode, store: () => bound, notify: PubSub.publish(hub, undefined) })
  const sourceName = "_fw_feature_flags"

  const entryOf = (key: string) => {
    const entry = entries.get(key)
    return entry === undefined ? Effect.fail(new FlagNotFound({ flag: key })) : Effect.succeed(entry)
  }

  const track = usage.track
  /** Counts a server-side read of `entry` from `source` at `now`. */
  const count = (entry: Entry.Entry, source: Usage.Source, now: number) => {
    let counter = entry.counters[source]
    if (counter === undefined) counter = entry.counters[source] = buffer.counter(entry.key, source)
    buffer.bump(counter, now)
  }

  const evaluateSync = (key: string, subject: Subject, now: Time.TimeSource, source?: Usage.Source): boolean => {
    const entry = entries.get(key)
    if (entry === undefined) return false
    if (track && source !== undefined) {
      const at = Time.timeOf(now)
      count(entry, source, at)
      return entry.evaluate(subject, at)
    }
    return entry.evaluate(subject, entry.timed ? Time.timeOf(now) : 0)
  }

  const variantSync = (key: string, subject: Subject, time: Time.TimeSource, source?: Usage.Source) => {
    const entry = entries.get(key)
    if (entry === undefined) return null
    const now = Time.timeOf(time)
    if (track && source !== undefined) count(entry, source, now)
    const resolved = entry.resolved
    return Evaluate.variantFor(resolved, subject, Evaluate.decide(resolved, subject, now) === "on")
  }

  const valueSync = <A, I>(flag: TypedFlag.TypedFlag<A, I>, subject: Subject, now: Time.TimeSource, source?: Usage.Source): A => {
    const entry = entries.get(flag.key)
    if (entry === undefined || entry.typed === undefined) return flag.default
    const variant = variantSync(flag.key, subject, now, source)
    if (variant === null || (variant.name === "on" && entry.resolved.variants.length === 0)) return flag.default
    if (variant.name === "off" && entry.resolved.variants.length === 0) return flag.default
    return entry.decoded.has(variant.name) ? entry.decoded.get(variant.name) as A : flag.default
  }

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
    isEnabled: (subject, key, source) => new EnabledRead(evaluateSync, subject, key, source),
    snapshot: (subject) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const out: Record<string, boolean> = {}
        for (const key of keys) out[key] = evaluateSync(key, subject, now)
        return out
      }),
    toggle: (key, by) =>
      Effect.flatMap(entryOf(key), (entry) =>
        writer.commit(entry, "toggle", by, (current, resolved) => ({ ...current, enabled: !resolved.enabled })).pipe(
          // A flip of `enabled` alone cannot fail the value schema.
          Effect.catchTag("OverrideRefused", (error) => Effect.die(error))
        )),
    override: (key, patch, by) =>
      Effect.flatMap(entryOf(key), (entry) => writer.commit(entry, "override", by, (current) => ({ ...current, ...patch }))),
    clearOverride: (key, by) =>
      Effect.flatMap(entryOf(key), (entry) =>
        writer.commit(entry, "clear", by, () => undefined).pipe(Effect.catchTag("OverrideRefused", (error) => Effect.die(error)))),
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
      return [...entries.values()].map((entry) => {
        const buffered = buffer.newest(entry.key)
        const recorded = stored.get(entry.key)
        const newest = buffered === undefined ? recorded : recorded === undefined ? buffered : Math.max(buffered, recorded)
        return List.listEntry(entry, now, usage, newest)
      })
    }),
    refusals: Effect.sync(() => [...writer.refused]),
    changes: PubSub.subscribe(hub),
    attach: (store) =>
      Effect.gen(function*() {
        bound = store
        const rows = yield* store.find(FlagState).pipe(Effect.mapError(storeFailed))
        const now = yield* Clock.currentTimeMillis
        for (const row of rows) {
          const entry = entries.get(row.id)
          if (entry !== undefined) yield* writer.applyStored(entry, Commit.storedOverride(row.override), row.version, now)
        }
      }),
    applyChange: (event) =>
      Effect.gen(function*() {
        if (event.table !== FlagState.name) return
        const entry = entries.get(event.id)
        if (entry === undefined) return
        if (event.op === "delete") {
          if (entry.override !== undefined) yield* writer.applyStored(entry, undefined, entry.version + 1, event.at)
          return
        }
        const row = StateRow(event.after)
        if (Either.isLeft(row)) return yield* Effect.logWarning(`flags: unreadable state row for "${event.id}"`)
        if (row.right.version < entry.version) return
        yield* writer.applyStored(entry, Commit.storedOverride(row.right.override), row.right.version, event.at)
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
