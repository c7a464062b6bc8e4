/**
 * `defineAggregate` (spec 2.13): a named query materialised on a schedule (`build`) or maintained
 * per change (`incremental`). Everything that can be checked without the app is checked here, at
 * definition time, and refused with `AggregateDefinitionError` (spec 7.1, refusals 5, 6 and 9):
 * intervals and cron strings are parsed eagerly, and a cron's time zone defaults to UTC, never the
 * process zone.
 */
import type { Effect } from "effect"
import { Cron, Duration, Either, Schema } from "effect"
import type { StoreShape } from "../kernel/store/Store.js"
import type * as Table from "../kernel/schema/Table.js"
import type { AnalyticsShape } from "./Analytics.js"
import { AggregateDefinitionError } from "./Errors.js"

/** The refresh policy as written: an interval string, a cron with a time zone, or hybrid. */
export type Refresh =
  | string
  | { readonly cron: string; readonly timezone?: string }
  | { readonly interval: string; readonly onChange: ReadonlyArray<string | Table.Any>; readonly debounceMs?: number }

/** The parsed policy. */
export type Policy =
  | { readonly _tag: "interval"; readonly ms: number }
  | { readonly _tag: "cron"; readonly cron: Cron.Cron; readonly expression: string; readonly timezone: string }
  | { readonly _tag: "hybrid"; readonly ms: number; readonly onChange: ReadonlyArray<string>; readonly debounceMs: number }
  | { readonly _tag: "manual" }

/** What a build receives. It runs as the system (no per-request subject). */
export interface BuildContext {
  /** The same store a mutation sees. */
  readonly store: StoreShape
  /** The configured analytics sink (`noop` unless one is provided). */
  readonly analytics: AnalyticsShape
}

/** What a build returns: rows, as a value, a promise or an effect. */
export type BuildResult = ReadonlyArray<unknown> | Promise<ReadonlyArray<unknown>> | Effect.Effect<ReadonlyArray<unknown>, unknown>

/** The maintainable ops. */
export type Op = "count" | "sum" | "avg" | "min" | "max"

/** An incremental aggregate's shape. */
export interface Incremental<A> {
  /** The source table (name or declaration); checked against the app's tables at boot. */
  readonly source: string | Table.Any
  readonly op: Op
  /** The numeric column; required for all ops but `count`. */
  readonly column?: string
  /** One maintained row per distinct value of these columns (one row in all without). */
  readonly groupBy?: ReadonlyArray<string>
  /** Turns a group's value into an output row. `value` is null for avg/min/max of no values. */
  readonly toRow: (input: { readonly group: Readonly<Record<string, unknown>>; readonly value: number | null }) => A
}

/** The fields `defineAggregate` takes. */
export interface Options<A, I> {
  readonly name: string
  /** Required unless `incremental` (then it is the cadence of a full reconcile, and optional). */
  readonly refresh?: Refresh
  readonly output: Schema.Schema<A, I>
  /** B-tree indexes on SQL stores (each a list of output columns); no-op on memory. */
  readonly indexes?: ReadonlyArray<ReadonlyArray<keyof I & string>>
  readonly build?: (ctx: BuildContext) => BuildResult
  readonly bootRefresh?: "persistent" | "async" | "sync"
  readonly strategy?: "replace" | "merge"
  readonly mergeKey?: keyof A & string
  readonly incremental?: Incremental<A>
}

/** A defined aggregate. */
export interface Aggregate<A = unknown, I = unknown> {
  readonly _tag: "Aggregate"
  readonly name: string
  readonly refresh: Refresh | undefined
  readonly policy: Policy
  readonly output: Schema.Schema<A, I>
  readonly indexes: ReadonlyArray<ReadonlyArray<string>>
  readonly build: ((ctx: BuildContext) => BuildResult) | undefined
  readonly bootRefresh: "persistent" | "async" | "sync"
  readonly strategy: "replace" | "merge"
  readonly mergeKey: string | undefined
  readonly incremental:
    | (Omit<Incremental<A>, "source"> & {
      readonly source: string
      /** The declaration, when `source` was given as one. */
      readonly table: Table.Any | undefined
      readonly groupBy: ReadonlyArray<string>
    })
    | undefined
}

/** Any defined aggregate. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the one builder boundary: rows are decoded by each aggregate's own schema
export type Any = Aggregate<any, any>

const identifier = /^[A-Za-z_][A-Za-z0-9_.-]*$/
const units: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * Parses an interval: `500ms`, `30s`, `5m`, `1h`, `1d`, or an Effect duration string such as
 * `"5 minutes"`. Refuses anything else, and zero or negative or infinite durations.
 */
export const parseInterval = (text: string, where: string): number => {
  const short = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text)
  let ms: number
  if (short !== null) {
    ms = Number(short[1]) * units[short[2]!]!
  } else {
    try {
      ms = Duration.toMillis(Duration.decode(text as Duration.DurationInput))
    } catch {
      throw new AggregateDefinitionError(`${where}: invalid refresh interval "${text}" (use e.g. "30s", "5m", "1h" or "5 minutes")`)
    }
  }
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new AggregateDefinitionError(`${where}: invalid refresh interval "${text}" (must be a positive, finite duration)`)
  }
  return ms
}

/** Parses a cron expression in `timezone` (default UTC), eagerly. */
export const parseCron = (expression: string, timezone: string | undefined, where: string): Cron.Cron => {
  const parsed = Cron.parse(expression, timezone ?? "UTC")
  if (Either.isLeft(parsed)) {
    throw new AggregateDefinitionError(`${where}: invalid cron "${expression}"${timezone ? ` in time zone "${timezone}"` : ""}: ${parsed.left.message}`)
  }
  return parsed.right
}

const policyOf = (name: string, refresh: Refresh | undefined): Policy => {
  const where = `aggregate "${name}"`
  if (refresh === undefined) return { _tag: "manual" }
  if (typeof refresh === "string") return { _tag: "interval", ms: parseInterval(refresh, where) }
  if (typeof refresh !== "object" || refresh === null) throw new AggregateDefinitionError(`${where}: invalid refresh policy`)
  if ("cron" in refresh) {
    if (typeof refresh.cron !== "string") throw new AggregateDefinitionError(`${where}: cron must be a string`)
    const timezone = refresh.timezone ?? "UTC"
    return { _tag: "cron", cron: parseCron(refresh.cron, timezone, where), expression: refresh.cron, timezone }
  }
  if ("interval" in refresh) {
    const debounceMs = refresh.debounceMs ?? 1_000
    if (!Number.isFinite(debounceMs) || debounceMs < 0) throw new AggregateDefinitionError(`${where}: debounceMs must be a number ≥ 0`)
    if (!Array.isArray(refresh.onChange) || refresh.onChange.length === 0) {
      throw new AggregateDefinitionError(`${where}: a hybrid refresh needs a non-empty onChange list of tables`)
    }
    return {
      _tag: "hybrid",
      ms: parseInterval(refresh.interval, where),
      onChange: refresh.onChange.map((table) => typeof table === "string" ? table : table.name),
      debounceMs
    }
  }
  throw new AggregateDefinitionError(`${where}: invalid refresh policy (an interval string, {cron, timezone} or {interval, onChange, debounceMs})`)
}

const ops: ReadonlySet<string> = new Set(["count", "sum", "avg", "min", "max"])
/** Keys that describe shapes incremental maintenance cannot keep exact (spec 3.7). */
const unmaintainable = ["ops", "join", "joins", "window", "distinct", "having", "orderBy", "limit", "where"] as const
const incrementalKeys: ReadonlySet<string> = new Set(["source", "op", "column", "groupBy", "toRow"])

const checkIncremental = <A>(name: string, shape: Incremental<A>) => {
  const refuse = (why: string) => new AggregateDefinitionError(`aggregate "${name}": incremental shape is not maintainable: ${why}`)
  for (const key of unmaintainable) if (key in shape) throw refuse(`"${key}" is not supported (one op over one table, optionally grouped)`)
  for (const key of Object.keys(shape)) if (!incrementalKeys.has(key)) throw refuse(`unknown field "${key}"`)
  if (Array.isArray(shape.op)) throw refuse("more than one op")
  if (typeof shape.op !== "string" || !ops.has(shape.op)) throw refuse(`op must be exactly one of count, sum, avg, min, max`)
  if (shape.op !== "count" && (typeof shape.column !== "string" || shape.column.length === 0)) throw refuse(`op "${shape.op}" needs a column`)
  if (typeof shape.toRow !== "function") throw refuse("toRow must be a function")
  const source = typeof shape.source === "string" ? shape.source : shape.source?.name
  if (typeof source !== "string" || source.length === 0) throw refuse("source must name a table")
  if (shape.groupBy !== undefined && (!Array.isArray(shape.groupBy) || shape.groupBy.some((c) => typeof c !== "string"))) {
    throw refuse("groupBy must be a list of column names")
  }
  if (typeof shape.source !== "string") {
    const fields = shape.source.fields
    for (const column of [...(shape.groupBy ?? []), ...(shape.column === undefined ? [] : [shape.column])]) {
      if (column !== "id" && !(column in fields)) throw refuse(`"${column}" is not a column of table "${source}"`)
    }
  }
  return { ...shape, source, table: typeof shape.source === "string" ? undefined : shape.source, groupBy: shape.groupBy ?? [] }
}

/**
 * Defines an aggregate.
 *
 * ```ts
 * export default defineAggregate({
 *   name: "ordersPerDay",
 *   refresh: { cron: "0 * * * *", timezone: "America/New_York" },
 *   output: Schema.Struct({ day: Schema.String, orders: Schema.Number }),
 *   build: ({ store }) => ...
 * })
 * ```
 */
export const defineAggregate = <A, I>(options: Options<A, I>): Aggregate<A, I> => {
  const name = options.name
  if (typeof name !== "string" || !identifier.test(name)) {
    throw new AggregateDefinitionError(`aggregate name "${String(name)}" must be an identifier (letters, digits, _ . -)`)
  }
  const where = `aggregate "${name}"`
  if (!Schema.isSchema(options.output)) throw new AggregateDefinitionError(`${where}: output must be a row schema`)
  const strategy = options.strategy ?? "replace"
  if (strategy !== "replace" && strategy !== "merge") throw new AggregateDefinitionError(`${where}: strategy must be "replace" or "merge"`)
  if (strategy === "merge" && (typeof options.mergeKey !== "string" || options.mergeKey.length === 0)) {
    throw new AggregateDefinitionError(`${where}: strategy "merge" needs a mergeKey`)
  }
  const bootRefresh = options.bootRefresh ?? "persistent"
  if (!["persistent", "async", "sync"].includes(bootRefresh)) {
    throw new AggregateDefinitionError(`${where}: bootRefresh must be "persistent", "async" or "sync"`)
  }
  const incremental = options.incremental === undefined ? undefined : checkIncremental(name, options.incremental)
  if (incremental === undefined && typeof options.build !== "function") {
    throw new AggregateDefinitionError(`${where}: needs a build function (or an incremental shape)`)
  }
  if (incremental !== undefined && options.build !== undefined) {
    throw new AggregateDefinitionError(`${where}: an incremental aggregate has no build (its rows are maintained per change)`)
  }
  if (incremental === undefined && options.refresh === undefined) throw new AggregateDefinitionError(`${where}: refresh is required`)
  if (incremental !== undefined && options.refresh !== undefined && typeof options.refresh === "object" && "onChange" in options.refresh) {
    throw new AggregateDefinitionError(`${where}: an incremental aggregate is maintained per change; a hybrid refresh adds nothing`)
  }
  for (const index of options.indexes ?? []) {
    if (!Array.isArray(index) || index.length === 0 || index.some((c) => typeof c !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(c))) {
      throw new AggregateDefinitionError(`${where}: each index must be a non-empty list of column names`)
    }
  }
  return {
    _tag: "Aggregate",
    name,
    refresh: options.refresh,
    policy: policyOf(name, options.refresh),
    output: options.output,
    indexes: (options.indexes ?? []) as ReadonlyArray<ReadonlyArray<string>>,
    build: options.build,
    bootRefresh,
    strategy,
    mergeKey: options.mergeKey,
    incremental
  }
}

/** True for the return value of `defineAggregate` (what an `*.aggregate.ts` file must export by default). */
export const isAggregate = (value: unknown): value is Any =>
  typeof value === "object" && value !== null && (value as { readonly _tag?: unknown })._tag === "Aggregate"
