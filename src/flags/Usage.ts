/**
 * Usage tracking (spec 2.11): its options (with construction refusals 2 and 3), server-side reads
 * counted in memory per (flag, source, UTC day) and flushed to `_fw_feature_flag_usage` every
 * `flushIntervalMs`; rows older than the retention are swept.
 */
import { Effect } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import { FlagDefinitionError } from "./Errors.js"
import { FlagUsage } from "./tables.js"

/**
 * Where a server-side read came from (`openfeature`: an evaluation through the OpenFeature server
 * provider). Client hooks, the OpenFeature web provider and bulk `flags.evaluate` deliveries never count.
 */
export type Source = "isFlagEnabled" | "requireFlag" | "flagValue" | "flagVariant" | "gatedBy" | "openfeature"

/** The `usage` options of `flagsPlugin` (spec 2.11). */
export interface Config {
  readonly track?: boolean
  readonly flushIntervalMs?: number
  readonly staleAfterDays?: number
  readonly retentionDays?: number
}

/** Usage options, resolved. */
export interface Options {
  readonly track: boolean
  readonly flushIntervalMs: number
  readonly staleAfterDays: number
  readonly retentionDays: number
}

const dayMs = 86_400_000

/**
 * Resolves the usage options and applies construction refusals 2 and 3 (spec 7.1): tracking on
 * the memory store, and `staleAfterDays` greater than `retentionDays`. `FW_FLAG_USAGE_TTL_HOURS`
 * sets the retention when the option is absent.
 */
export const usageOptions = (
  config: { readonly store?: "memory" | "sql"; readonly usage?: Config },
  env: Readonly<Record<string, string | undefined>> = process.env
): Options => {
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

/** The count of one (flag, source) on its current UTC day. */
export interface Counter {
  readonly flag: string
  readonly source: Source
  day: number
  count: number
  lastSeenAt: number
}

/** The ISO date (`YYYY-MM-DD`) of a UTC day number. */
export const isoDay = (day: number) => new Date(day * dayMs).toISOString().slice(0, 10)

/** The row id of a (flag, day, source) usage row. */
export const rowId = (flag: string, day: number, source: Source) => `${flag}|${isoDay(day)}|${source}`

/** An in-memory buffer of counts. */
export const makeBuffer = () => {
  const live = new Map<string, Counter>()
  let closed: Array<Counter> = []
  /** Counts one read on `counter` at `now`; a new UTC day closes the previous day's count. */
  const bump = (counter: Counter, now: number) => {
    const day = Math.floor(now / dayMs)
    if (counter.day === day) {
      counter.count++
      if (now > counter.lastSeenAt) counter.lastSeenAt = now
    } else {
      if (counter.count > 0) closed.push({ ...counter })
      counter.day = day
      counter.count = 1
      counter.lastSeenAt = now
    }
  }
  /** The live counter of (flag, source), made on first use; it stays valid across drains. */
  const counter = (flag: string, source: Source): Counter => {
    const id = `${flag}|${source}`
    let found = live.get(id)
    if (found === undefined) {
      found = { flag, source, day: -1, count: 0, lastSeenAt: 0 }
      live.set(id, found)
    }
    return found
  }
  return {
    counter,
    bump,
    /** Counts one read (a map lookup; the hot path keeps `counter(flag, source)` and calls `bump`). */
    note(flag: string, source: Source, now: number) {
      bump(counter(flag, source), now)
    },
    /** The newest unflushed read of `flag`, if any. */
    newest(flag: string): number | undefined {
      let newest: number | undefined
      for (const counter of [...live.values(), ...closed]) {
        if (counter.flag === flag && counter.count > 0 && (newest === undefined || counter.lastSeenAt > newest)) newest = counter.lastSeenAt
      }
      return newest
    },
    /** Takes every pending count (the buffer is empty afterwards). */
    drain(): ReadonlyArray<Counter> {
      const out = [...closed, ...[...live.values()].filter((counter) => counter.count > 0).map((counter) => ({ ...counter }))]
      closed = []
      for (const counter of live.values()) counter.count = 0
      return out
    },
    /** Puts counts back after a failed flush. */
    restore(counters: ReadonlyArray<Counter>) {
      closed.push(...counters)
    }
  }
}

/** @see makeBuffer */
export type Buffer = ReturnType<typeof makeBuffer>

/** Writes pending counts: each (flag, day, source) row gains its count; `lastSeenAt` keeps the newest. */
export const flush = (store: StoreShape, buffer: Buffer) =>
  Effect.gen(function*() {
    const pending = buffer.drain()
    if (pending.length === 0) return 0
    const merged = new Map<string, Counter>()
    for (const counter of pending) {
      const id = rowId(counter.flag, counter.day, counter.source)
      const seen = merged.get(id)
      if (seen === undefined) merged.set(id, { ...counter })
      else {
        seen.count += counter.count
        seen.lastSeenAt = Math.max(seen.lastSeenAt, counter.lastSeenAt)
      }
    }
    // Rows in id order, each read under its row lock: replicas flushing the same rows at once wait
    // for each other (in one order, so without deadlock) and add to the committed count instead of
    // overwriting it. A row two replicas insert first fails one of them `DuplicateRow`: that
    // transaction is retried and finds the row.
    const entries = [...merged.entries()].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
    const write = store.transaction(Effect.forEach(entries, ([id, counter]) =>
      Effect.gen(function*() {
        const existing = yield* store.get(FlagUsage, id, { forUpdate: true })
        const before = existing._tag === "Some" ? existing.value : undefined
        const row = {
          id,
          flag: counter.flag,
          day: isoDay(counter.day),
          dayStart: counter.day * dayMs,
          source: counter.source,
          count: (before?.count ?? 0) + counter.count,
          lastSeenAt: Math.max(before?.lastSeenAt ?? 0, counter.lastSeenAt)
        }
        yield* before === undefined ? store.insert(FlagUsage, row) : store.upsert(FlagUsage, row)
      }), { discard: true })).pipe(Effect.retry({ while: (error) => error._tag === "DuplicateRow", times: 5 }))
    yield* write.pipe(Effect.tapError(() => Effect.sync(() => buffer.restore(pending))))
    return merged.size
  })

/** Deletes usage rows of days that ended before `now - retentionMs`. */
export const sweep = (store: StoreShape, now: number, retentionMs: number) =>
  Effect.gen(function*() {
    const old = yield* store.find(FlagUsage, { where: { dayStart: { lt: now - retentionMs - dayMs + 1 } } })
    // `purge` skips rows already gone: every replica sweeps, and two sweeping at once both succeed
    // (a `delete` of a row the other removed failed `RowNotFound`). Nothing listens to this table.
    yield* store.purge(FlagUsage, old.map((row) => row.id))
    return old.length
  })

/** The newest recorded read of every flag inside the retention window. */
export const newestReads = (store: StoreShape, now: number, retentionMs: number) =>
  Effect.gen(function*() {
    const rows = yield* store.find(FlagUsage, { where: { dayStart: { gte: now - retentionMs - dayMs + 1 } } })
    const newest = new Map<string, number>()
    for (const row of rows) newest.set(row.flag, Math.max(newest.get(row.flag) ?? 0, row.lastSeenAt))
    return newest
  })
