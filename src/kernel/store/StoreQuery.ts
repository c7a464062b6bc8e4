/**
 * A store read's options as the driver's query: `where` (field values and operator objects, encoded
 * through the table's codec) as clauses with the caller's tenant scope, the order, limit and offset
 * checked; and the rows a driver returns decoded.
 */
import { Either } from "effect"
import type * as Driver from "./Driver.js"
import { RowInvalid, UnknownField } from "../Errors.js"
import * as RowCodec from "../schema/RowCodec.js"
import type * as Table from "../schema/Table.js"
import * as TenantScope from "./TenantScope.js"

const operators: ReadonlySet<string> = new Set(["eq", "neq", "gt", "gte", "lt", "lte", "in", "nin"])

/** The most values an `in`/`nin` may list: beyond it SQLite and PostgreSQL run out of statement parameters. */
export const maxListedValues = 10_000

const isOperatorObject = (value: unknown): value is Readonly<Record<string, unknown>> => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false
  // Own keys only: an operator inherited through the prototype would be counted here and then
  // dropped by `Object.entries`, silently removing the condition.
  const keys = Object.keys(value)
  return keys.length > 0 && keys.every((key) => operators.has(key))
}

/** One operand of a condition, encoded like the field. `eq`/`neq` null on a nullable field test for null. */
const encodeOperand = (
  table: Table.Any,
  codec: RowCodec.RowCodec,
  field: string,
  op: Driver.Operator,
  value: unknown
): Either.Either<unknown, RowInvalid> => {
  if (op === "in" || op === "nin") {
    if (!Array.isArray(value)) {
      return Either.left(new RowInvalid({ table: table.name, message: `where ${field}: "${op}" expects an array` }))
    }
    if (value.length > maxListedValues) {
      return Either.left(new RowInvalid({ table: table.name, message: `where ${field}: "${op}" lists more than ${maxListedValues} values` }))
    }
    const encoded: Array<unknown> = []
    for (const element of value) {
      const one = codec.encodeValue(field, element)
      if (Either.isLeft(one)) return Either.left(one.left)
      encoded.push(one.right)
    }
    return Either.right(encoded)
  }
  if (value === null && (op === "eq" || op === "neq") && codec.nullable.has(field)) return Either.right(null)
  return codec.encodeValue(field, value)
}

/** Normalises a `where` into encoded clauses, adding the tenant condition of `scope`. */
export const clausesOf = (
  table: Table.Any,
  where: Readonly<Record<string, unknown>> | undefined,
  scope: TenantScope.Scope
): Either.Either<Array<Driver.Clause>, UnknownField | RowInvalid> => {
  const codec = RowCodec.of(table)
  const clauses: Array<Driver.Clause> = []
  for (const field in where) {
    if (!codec.fields.has(field)) return Either.left(new UnknownField({ table: table.name, field }))
    const condition = where[field]
    if (condition === undefined) continue
    const conditions: ReadonlyArray<readonly [string, unknown]> = isOperatorObject(condition)
      ? Object.entries(condition)
      : [["eq", condition]]
    for (const [op, operand] of conditions) {
      if (operand === undefined) continue
      const value = encodeOperand(table, codec, field, op as Driver.Operator, operand)
      if (Either.isLeft(value)) return Either.left(value.left)
      clauses.push({ field, op: op as Driver.Operator, value: value.right })
    }
  }
  const tenant = TenantScope.clause(scope)
  if (tenant !== undefined) clauses.push(tenant)
  return Either.right(clauses)
}

export const decodeAll = (table: Table.Any, rows: ReadonlyArray<Driver.Encoded>): Either.Either<Array<unknown>, RowInvalid> => {
  const codec = RowCodec.of(table)
  const decoded: Array<unknown> = new Array(rows.length)
  for (let i = 0; i < rows.length; i++) {
    const row = codec.decode(rows[i]!)
    if (Either.isLeft(row)) return Either.left(row.left)
    decoded[i] = row.right
  }
  return Either.right(decoded)
}

/** The driver query of `find`'s options, under `scope`. */
export const queryOf = (
  table: Table.Any,
  options: {
    readonly where?: Readonly<Record<string, unknown>>
    readonly orderBy?: string
    readonly direction?: "asc" | "desc"
    readonly limit?: number
    readonly offset?: number
  } | undefined,
  scope: TenantScope.Scope
): Either.Either<Driver.Query, UnknownField | RowInvalid> => {
  const where = clausesOf(table, options?.where, scope)
  if (Either.isLeft(where)) return Either.left(where.left)
  const orderBy = options?.orderBy ?? "id"
  if (!RowCodec.of(table).fields.has(orderBy)) return Either.left(new UnknownField({ table: table.name, field: orderBy }))
  return Either.right({
    where: where.right,
    orderBy,
    direction: options?.direction ?? "asc",
    limit: wholeNumber(options?.limit),
    offset: wholeNumber(options?.offset)
  })
}

/**
 * A limit, offset or page size as a whole number from 0 to 2^53 − 1 (`undefined` when absent or not
 * finite): larger values do not fit the SQL tiers' integer parameters.
 */
export const wholeNumber = (n: number | undefined): number | undefined =>
  n === undefined || !Number.isFinite(n) ? undefined : Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.floor(n)))
