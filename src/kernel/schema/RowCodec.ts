/**
 * Encoding and decoding of rows (and of the values a query compares against) through a table's
 * schema, compiled once per table. Failures are `RowInvalid` with a message that names the fields
 * and what was expected, never the offending value (it may be a secret).
 */
import { Either, ParseResult, Schema, SchemaAST } from "effect"
import * as Columns from "./Columns.js"
import type * as Driver from "../store/Driver.js"
import { RowInvalid } from "../Errors.js"
import type * as Table from "./Table.js"

/** The compiled codec of one table. Synchronous: table schemas must not use async transformations. */
export interface RowCodec {
  /** Every column name, `id` included. */
  readonly fields: ReadonlySet<string>
  /** Columns that may hold null (optional or nullable fields). */
  readonly nullable: ReadonlySet<string>
  /** A whole row (Type side) to its encoded form; absent optional fields are left out. Excess fields are refused. */
  readonly encode: (row: unknown) => Either.Either<Driver.Encoded, RowInvalid>
  /** An encoded (stored) row to its Type side. Columns the table does not declare are ignored. */
  readonly decode: (row: Driver.Encoded) => Either.Either<unknown, RowInvalid>
  /** One field's value (Type side, as written in a `where`) to its encoded form. */
  readonly encodeValue: (field: string, value: unknown) => Either.Either<unknown, RowInvalid>
}

/** "price: Expected number; name: is missing", without the actual values. */
const describe = (error: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(error).slice(0, 5).map((issue) => {
    const path = issue.path.length === 0 ? "row" : issue.path.map(String).join(".")
    const what = issue._tag === "Unexpected"
      ? "is not a declared field"
      : issue.message.replace(/, actual [\s\S]*$/, "")
    return `${path}: ${what}`
  }).join("; ")

/**
 * Canonical encoded form: an absent optional field has no key, except where the field may also be
 * null: SQL stores both as NULL, so every tier stores (and reads back) null there.
 */
const canonical = (row: Record<string, unknown>, nullWhenAbsent: ReadonlyArray<string>): Driver.Encoded => {
  for (const key in row) if (row[key] === undefined) delete row[key]
  for (const key of nullWhenAbsent) if (!(key in row)) row[key] = null
  return row
}

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * What no tier can store faithfully, found anywhere in an encoded value: a non-finite number (JSON
 * and SQLite store null, so the row would no longer decode), a NUL or an unpaired surrogate in text
 * (PostgreSQL refuses them, SQLite rewrites them), a bigint, a cycle. Undefined when the value is fine.
 */
const unstorable = (value: unknown, seen?: Set<object>): string | undefined => {
  switch (typeof value) {
    case "number":
      return Number.isFinite(value) ? undefined : "numbers must be finite"
    case "string":
      return mayBeUnstorable(value) && (value.includes("\u0000") || loneSurrogate.test(value))
        ? "text must not contain NUL or unpaired surrogates"
        : undefined
    case "bigint":
      return "bigint values cannot be stored"
    case "object": {
      if (value === null) return undefined
      // The set of enclosing objects is made only for an object: most values are primitives.
      const enclosing = seen ?? new Set<object>()
      if (enclosing.has(value)) return "a value refers to itself"
      enclosing.add(value)
      for (const item of Array.isArray(value) ? value : Object.values(value)) {
        const problem = unstorable(item, enclosing)
        if (problem !== undefined) return problem
      }
      enclosing.delete(value)
      return undefined
    }
    default:
      return undefined
  }
}

/** True when `text` holds a NUL or a surrogate: only then is the exact check worth running. */
const mayBeUnstorable = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === 0 || (code >= 0xd800 && code <= 0xdfff)) return true
  }
  return false
}

/**
 * A check of one value against a field schema that needs no parser: primitive keywords, literals
 * and unions of them (`NullOr`, optional fields). `undefined` when the schema is anything else.
 */
type Check = (value: unknown) => boolean

const checkOf = (ast: SchemaAST.AST): Check | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return (value) => typeof value === "string"
    case "NumberKeyword":
      return (value) => typeof value === "number"
    case "BooleanKeyword":
      return (value) => typeof value === "boolean"
    case "UndefinedKeyword":
      return (value) => value === undefined
    case "Literal": {
      const literal = ast.literal
      return (value) => value === literal
    }
    case "Union": {
      const checks: Array<Check> = []
      for (const member of ast.types) {
        const check = checkOf(member)
        if (check === undefined) return undefined
        checks.push(check)
      }
      return (value) => checks.some((check) => check(value))
    }
    default:
      return undefined
  }
}

interface PlainField {
  readonly name: string
  readonly optional: boolean
  readonly check: Check
}

/**
 * The fields of a row schema whose encoded and decoded forms are the same values (a struct of
 * plain fields, see `checkOf`), else `undefined`. For such a table, encoding and decoding a valid
 * row is a copy of its declared fields in declaration order, which is what the parser produces;
 * anything the copy does not accept goes to the parser, so failures read the same.
 */
const plainFieldsOf = (schema: Schema.Schema.Any): ReadonlyArray<PlainField> | undefined => {
  const ast = schema.ast
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0) return undefined
  const fields: Array<PlainField> = []
  for (const signature of ast.propertySignatures) {
    const check = checkOf(signature.type)
    if (check === undefined || typeof signature.name !== "string") return undefined
    fields.push({ name: signature.name, optional: signature.isOptional, check })
  }
  return fields
}

/** The declared fields of `row` copied in declaration order, or `undefined` when one fails its check. */
const copyPlain = (fields: ReadonlyArray<PlainField>, row: Readonly<Record<string, unknown>>): Record<string, unknown> | undefined => {
  const out: Record<string, unknown> = {}
  for (const field of fields) {
    if (!Object.prototype.hasOwnProperty.call(row, field.name)) {
      if (field.optional) continue
      return undefined
    }
    const value = row[field.name]
    if (!field.check(value)) return undefined
    out[field.name] = value
  }
  return out
}

/**
 * The longest id a row may have: PostgreSQL cannot index a key much over 2 KiB, and an id is a key
 * everywhere. 512 UTF-16 units encode to at most 2,048 bytes of UTF-8.
 */
export const maxIdLength = 512

/**
 * Whether some row could have this id. One that no row can have (not text, NUL, an unpaired
 * surrogate, too long) is simply not found, and no statement is sent for it.
 */
export const isStorableId = (id: unknown): id is string =>
  typeof id === "string" && id.length <= maxIdLength && (!mayBeUnstorable(id) || unstorable(id) === undefined)

const compile = (table: Table.Any): RowCodec => {
  const invalid = (prefix: string) => (error: ParseResult.ParseError) =>
    new RowInvalid({ table: table.name, message: `${prefix}${describe(error)}` })
  const encodeRow = Schema.encodeUnknownEither(table.schema, { errors: "all", onExcessProperty: "error" })
  const decodeRow = Schema.decodeUnknownEither(table.schema, { errors: "all", onExcessProperty: "ignore" })
  const columns = Columns.of(table)
  const nullWhenAbsent = columns.filter((column) => column.optional && column.nullable).map((column) => column.name)
  const valueEncoders = new Map<string, (value: unknown) => Either.Either<unknown, RowInvalid>>()
  const valueEncoder = (field: string) => {
    let encoder = valueEncoders.get(field)
    if (encoder === undefined) {
      // The one-field slice of the row schema encodes a value exactly as the row would.
      const encodeOne = Schema.encodeUnknownEither(table.schema.pipe(Schema.pick(field)), { errors: "all" })
      const onError = invalid("where ")
      encoder = (value) =>
        Either.match(encodeOne({ [field]: value }), {
          onLeft: (error) => Either.left(onError(error)),
          onRight: (encoded) => {
            const value = (encoded as Record<string, unknown>)[field]
            const problem = unstorable(value)
            return problem === undefined
              ? Either.right(value)
              : Either.left(new RowInvalid({ table: table.name, message: `where ${field}: ${problem}` }))
          }
        })
      valueEncoders.set(field, encoder)
    }
    return encoder
  }
  const onEncodeError = invalid("")
  const onDecodeError = invalid("stored row: ")
  const plain = plainFieldsOf(table.schema)
  const declared = new Set(columns.map((column) => column.name))
  /** A plain row with no undeclared key copied, else `undefined` (the parser then says what is wrong). */
  const copyForEncode = (row: unknown): Record<string, unknown> | undefined => {
    if (plain === undefined || typeof row !== "object" || row === null || Array.isArray(row)) return undefined
    const keys = Reflect.ownKeys(row)
    for (const key of keys) if (typeof key !== "string" || !declared.has(key)) return undefined
    return copyPlain(plain, row as Readonly<Record<string, unknown>>)
  }
  const decodeParsed = (row: Driver.Encoded) => Either.mapLeft(decodeRow(row), onDecodeError)
  return {
    fields: declared,
    nullable: new Set(columns.filter((column) => column.optional || column.nullable).map((column) => column.name)),
    encode: (row) => {
      // Written out rather than with Either.match: a store write runs this once per row.
      let encoded = copyForEncode(row)
      if (encoded === undefined) {
        const parsed = encodeRow(row)
        if (Either.isLeft(parsed)) return Either.left(onEncodeError(parsed.left))
        encoded = parsed.right as Record<string, unknown>
      }
      for (const field in encoded) {
        const value = encoded[field]
        const problem = field === "id" && typeof value === "string" && value.length > maxIdLength
          ? `ids are at most ${maxIdLength} characters`
          : unstorable(value)
        if (problem !== undefined) return Either.left(new RowInvalid({ table: table.name, message: `${field}: ${problem}` }))
      }
      return Either.right(canonical(encoded, nullWhenAbsent))
    },
    decode: plain === undefined ? decodeParsed : (row) => {
      const copy = copyPlain(plain, row)
      return copy === undefined ? decodeParsed(row) : Either.right(copy)
    },
    encodeValue: (field, value) => valueEncoder(field)(value)
  }
}

const cache = new WeakMap<Table.Any, RowCodec>()

/** The codec of `table`, compiled on first use. */
export const of = (table: Table.Any): RowCodec => {
  let codec = cache.get(table)
  if (codec === undefined) {
    codec = compile(table)
    cache.set(table, codec)
  }
  return codec
}
