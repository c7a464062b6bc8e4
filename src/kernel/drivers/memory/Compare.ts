/**
 * Value comparison with SQL semantics, for the memory tier: a null never matches a comparison
 * (not even `neq`) except `eq null` / `neq null` (IS NULL / IS NOT NULL), and nulls sort first
 * ascending. Strings compare by code unit, as SQLite's BINARY and PostgreSQL's "C" collation do
 * for the characters of the Basic Multilingual Plane.
 */
import type * as Driver from "../../store/Driver.js"

const same = (a: unknown, b: unknown): boolean =>
  a === b || (typeof a === "object" && a !== null && JSON.stringify(a) === JSON.stringify(b))

/** Orders two encoded values; nulls first. */
export const compare = (a: unknown, b: unknown): number => {
  if (a === b) return 0
  if (a === null || a === undefined) return -1
  if (b === null || b === undefined) return 1
  if (typeof a === "boolean" && typeof b === "boolean") return a === b ? 0 : a ? 1 : -1
  if (typeof a === "object" || typeof b === "object") return compare(JSON.stringify(a), JSON.stringify(b))
  return (a as number | string) < (b as number | string) ? -1 : (a as number | string) > (b as number | string) ? 1 : 0
}

/** True when `row` satisfies `clause`. */
export const matches = (row: Driver.Encoded, clause: Driver.Clause): boolean => {
  const value = row[clause.field]
  if (clause.value === null) {
    const isNull = value === null || value === undefined
    return clause.op === "eq" ? isNull : clause.op === "neq" ? !isNull : false
  }
  if (value === null || value === undefined) return false
  switch (clause.op) {
    case "eq":
      return same(value, clause.value)
    case "neq":
      return !same(value, clause.value)
    case "gt":
      return compare(value, clause.value) > 0
    case "gte":
      return compare(value, clause.value) >= 0
    case "lt":
      return compare(value, clause.value) < 0
    case "lte":
      return compare(value, clause.value) <= 0
    case "in":
      return (clause.value as ReadonlyArray<unknown>).some((v) => same(value, v))
    case "nin":
      return !(clause.value as ReadonlyArray<unknown>).some((v) => same(value, v))
  }
}
