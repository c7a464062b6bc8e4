/** Reading an aggregate's rows: the options of `read` and how they apply to decoded rows. */
/** Options of `read` (spec 2.13). */
export interface ReadOptions {
  /** Field to a value or a list of values (any of them), ANDed. */
  readonly where?: Readonly<Record<string, unknown>>
  readonly limit?: number
  readonly offset?: number
  /** Any output column; default: build order (merge: mergeKey order; incremental: group order). */
  readonly orderBy?: string
  readonly direction?: "asc" | "desc"
  /** Fail `AggregateStale` when the last refresh is older than this. */
  readonly maxAgeMs?: number
  /**
   * Incremental aggregates: how long a read waits for a state that is not built yet (the first
   * build after boot) before failing `AggregateNotReady`; default 30,000, 0 fails at once.
   */
  readonly buildWaitMs?: number
}

/** A value as compared and keyed: dates by their time. */
export const comparable = (value: unknown): unknown => value instanceof Date ? value.getTime() : value

const compare = (a: unknown, b: unknown): number => {
  const x = comparable(a)
  const y = comparable(b)
  if (x === y) return 0
  if (x === null || x === undefined) return -1
  if (y === null || y === undefined) return 1
  return (x as number) < (y as number) ? -1 : 1
}

const matches = (row: Readonly<Record<string, unknown>>, where: Readonly<Record<string, unknown>>) =>
  Object.entries(where).every(([field, condition]) => {
    if (condition === undefined) return true
    const value = comparable(row[field])
    return Array.isArray(condition) ? condition.some((c) => comparable(c) === value) : comparable(condition) === value
  })

/** Applies the read options to decoded rows. */
export const select = (rows: ReadonlyArray<unknown>, options: ReadOptions): ReadonlyArray<unknown> => {
  let out = options.where === undefined ? [...rows] : rows.filter((row) => matches(row as Record<string, unknown>, options.where!))
  if (options.orderBy !== undefined) {
    const field = options.orderBy
    const sign = options.direction === "desc" ? -1 : 1
    out = out.map((row, i) => [row, i] as const)
      .sort(([a, i], [b, j]) => sign * compare((a as Record<string, unknown>)[field], (b as Record<string, unknown>)[field]) || i - j)
      .map(([row]) => row)
  } else if (options.direction === "desc") {
    out.reverse()
  }
  const offset = Math.max(0, Math.floor(options.offset ?? 0))
  const limit = options.limit === undefined ? undefined : Math.max(0, Math.floor(options.limit))
  return out.slice(offset, limit === undefined ? undefined : offset + limit)
}
