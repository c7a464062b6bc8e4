/**
 * Writes of the live flag state: toggles and overrides (on the SQL tier persisted in
 * `_fw_feature_flag_state` with a row of `_fw_feature_flag_audit` per change, on the memory tier
 * installed in the process), stored overrides applied when read at start or when a replica changed
 * them, and refusals (spec 7.1 #10), logged and kept for the inspect list.
 */
import { Clock, Effect, Either } from "effect"
import * as LogText from "../kernel/LogText.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Definition from "./Definition.js"
import * as Entry from "./Entry.js"
import { FlagStoreFailed, OverrideRefused, storeFailed } from "./Errors.js"
import { FlagAudit, FlagState } from "./tables.js"

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

/**
 * Who changes a flag: the authenticated operator (the inspect gate's Subject, `system` /
 * `inspect-token` for the token, or what server code names itself), and a note they typed.
 */
export interface Operator {
  readonly type: string
  readonly id: string
  /** Free text the operator typed (a ticket, a reason): recorded as a note, never as who acted. */
  readonly note?: string | null
}

/** The write side of a registry. */
export interface Writer {
  /** Refused overrides, oldest first. */
  readonly refused: ReadonlyArray<Refusal>
  /**
   * Persists (SQL) or installs (memory) the override `next` makes of the current one, with an
   * audit row on SQL; refused whole (and listed) when the result is invalid.
   */
  readonly commit: (
    entry: Entry.Entry,
    action: "toggle" | "override" | "clear",
    by: Operator,
    next: (current: Entry.Override | undefined, resolved: Definition.Resolved) => Entry.Override | undefined
  ) => Effect.Effect<Change, OverrideRefused | FlagStoreFailed>
  /** Installs a stored override (refused and listed when it no longer fits the code definition). */
  readonly applyStored: (entry: Entry.Entry, override: Entry.Override | undefined, version: number, at: number) => Effect.Effect<void>
}

/**
 * The writer of a registry kept in `mode`: `store` is the bound SQL store (undefined until the
 * plugin attaches it), `notify` tells live subscribers the state changed.
 */
/** A stored override; an empty one is a cleared override (the code definition stands). */
export const storedOverride = (override: Readonly<Record<string, unknown>>): Readonly<Record<string, unknown>> | undefined =>
  Object.keys(override).length === 0 ? undefined : override

export const makeWriter = (options: {
  readonly mode: "memory" | "sql"
  readonly store: () => StoreShape | undefined
  readonly notify: Effect.Effect<unknown>
}): Writer => {
  const mode = options.mode
  const refused: Array<Refusal> = []

  const refuse = (flag: string, reason: string, at: number, source: Refusal["source"]) =>
    Effect.zipRight(
      Effect.sync(() => refused.push({ flag, reason, at, source })),
      Effect.logWarning(`flags: override of "${flag}" refused whole, the code definition stands: ${LogText.quote(reason)}`)
    )

  /**
   * Persists (SQL) or installs (memory) a new override for `entry`, with an audit row on SQL.
   * The state row is re-read inside the transaction so concurrent replicas build on the latest version.
   */
  const commit = (
    entry: Entry.Entry,
    action: "toggle" | "override" | "clear",
    by: Operator,
    next: (current: Entry.Override | undefined, resolved: Definition.Resolved) => Entry.Override | undefined
  ): Effect.Effect<Change, OverrideRefused | FlagStoreFailed> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const bound = options.store()
      if (bound === undefined) {
        if (mode === "sql") return yield* new FlagStoreFailed({ message: "the flag store is not attached yet (the plugin has not started)" })
        const before = Entry.snapshotOf(entry.resolved)
        const override = next(entry.override, entry.resolved)
        const built = Entry.candidate(entry, override)
        if (Either.isLeft(built)) {
          yield* refuse(entry.key, built.left, now, "override")
          return yield* new OverrideRefused({ flag: entry.key, reason: built.left })
        }
        Entry.install(entry, built.right.resolved, built.right.override, entry.version + 1)
        yield* options.notify
        return { flag: entry.key, before, after: Entry.snapshotOf(entry.resolved), version: entry.version }
      }
      const store = bound
      // The state row is read under its row lock, so a concurrent flip on another replica waits for
      // this one and builds on it (read committed would otherwise let both read the same version).
      const result = yield* store.transaction(Effect.gen(function*() {
        const row = yield* store.get(FlagState, entry.key, { forUpdate: true })
        const stored = row._tag === "Some" ? storedOverride(row.value.override) : undefined
        const version = row._tag === "Some" ? row.value.version : 0
        // A stored override that no longer fits was refused when read: the change builds on the code definition.
        const fits = Entry.candidate(entry, stored)
        const current = Either.isRight(fits) ? stored : undefined
        const currentResolved = Either.isRight(fits) ? fits.right.resolved : Definition.resolve(entry.key, entry.base)
        const override = next(current, currentResolved)
        const built = Entry.candidate(entry, override)
        if (Either.isLeft(built)) return Either.left(built.left)
        // A cleared override keeps its row (an empty override): deleting it would restart the
        // flag's version at 1, and every replica (this one included) would take the next change for
        // one older than the version it holds and ignore it.
        const state = { id: entry.key, override: built.right.override ?? {}, version: version + 1, updatedAt: now, updatedBy: `${by.type}:${by.id}` }
        // No row to lock: a concurrent first writer makes this insert fail `DuplicateRow`, and the
        // whole change is retried on the row that writer committed.
        yield* row._tag === "Some" ? store.upsert(FlagState, state) : store.insert(FlagState, state)
        const before = Entry.snapshotOf(currentResolved)
        const after = Entry.snapshotOf(built.right.resolved)
        yield* store.insert(FlagAudit, {
          flag: entry.key,
          action,
          actor: null,
          operatorType: by.type,
          operatorId: by.id,
          note: by.note ?? null,
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
      if (version > entry.version) Entry.install(entry, built.resolved, built.override, version)
      yield* options.notify
      return { flag: entry.key, before, after, version }
    })

  const applyStored = (entry: Entry.Entry, override: Entry.Override | undefined, version: number, at: number) =>
    Effect.gen(function*() {
      const key = entry.key
      const built = Entry.candidate(entry, override)
      if (Either.isLeft(built)) {
        yield* refuse(key, built.left, at, "stored")
        Entry.install(entry, Definition.resolve(key, entry.base), undefined, version)
      } else {
        Entry.install(entry, built.right.resolved, built.right.override, version)
      }
      yield* options.notify
    })

  return { refused, commit, applyStored }
}
