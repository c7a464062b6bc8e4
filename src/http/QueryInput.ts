/**
 * Query strings and path params arrive as strings; the input schema decides what they become.
 * For each key, the encoded side of the schema's field is read: a string field keeps the string
 * (so `Schema.NumberFromString` sees `"3"`), a number field gets `Number("3")`, a boolean field
 * `true`/`false`, `null` where the field admits null, an array field gets every repeated value
 * (`?tag=a&tag=b`, or a single one wrapped), and a structured field is read as JSON
 * (`?range={"from":1}`). Anything that does not convert is passed as the string, so the decode
 * reports it against the schema.
 */
import { SchemaAST } from "effect"

type Scalar = "string" | "number" | "boolean" | "null" | "json"

/** How one field is read from its strings. */
interface FieldReading {
  readonly scalars: ReadonlySet<Scalar>
  readonly array: FieldReading | undefined
}

/** Reads a record of query or path strings into the values a schema expects. */
export type Reader = (raw: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>) => Record<string, unknown>

const scalarsOf = (ast: SchemaAST.AST, into: Set<Scalar>, arrays: Array<SchemaAST.TupleType>): void => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
    case "BigIntKeyword":
    case "UnknownKeyword":
    case "AnyKeyword":
      into.add("string")
      return
    case "NumberKeyword":
      into.add("number")
      return
    case "BooleanKeyword":
      into.add("boolean")
      return
    case "Literal":
      into.add(
        ast.literal === null
          ? "null"
          : typeof ast.literal === "number"
          ? "number"
          : typeof ast.literal === "boolean"
          ? "boolean"
          : "string"
      )
      return
    case "Enums":
      for (const [, value] of ast.enums) into.add(typeof value === "number" ? "number" : "string")
      return
    case "UndefinedKeyword":
    case "VoidKeyword":
    case "NeverKeyword":
      return
    case "Union":
      for (const member of ast.types) scalarsOf(member, into, arrays)
      return
    case "Refinement":
    case "Transformation":
      scalarsOf(ast.from, into, arrays)
      return
    case "TupleType":
      arrays.push(ast)
      return
    default:
      into.add("json")
  }
}

const readingOf = (ast: SchemaAST.AST): FieldReading => {
  const scalars = new Set<Scalar>()
  const arrays: Array<SchemaAST.TupleType> = []
  scalarsOf(ast, scalars, arrays)
  const tuple = arrays[0]
  if (tuple === undefined) return { scalars, array: undefined }
  const element = tuple.rest[0]?.type ?? tuple.elements[0]?.type
  return { scalars, array: readingOf(element ?? SchemaAST.stringKeyword) }
}

const numeric = /^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$/

const readScalar = (value: string, reading: FieldReading): unknown => {
  const { scalars } = reading
  if (scalars.has("string")) return value
  if (scalars.has("null") && value === "null") return null
  if (scalars.has("number") && numeric.test(value)) return Number(value)
  if (scalars.has("boolean") && (value === "true" || value === "false")) return value === "true"
  if (scalars.has("json")) {
    try {
      return JSON.parse(value)
    } catch {
      return value
    }
  }
  return value
}

const readField = (value: string | ReadonlyArray<string>, reading: FieldReading | undefined): unknown => {
  if (reading === undefined) return value
  const array = reading.array
  if (array !== undefined && !reading.scalars.has("string")) {
    return (typeof value === "string" ? [value] : value).map((v) => readScalar(v, array))
  }
  return typeof value === "string" ? readScalar(value, reading) : value.map((v) => readScalar(v, reading))
}

/** The struct behind an encoded `ast` (through refinements and optional unions), if any. */
export const structOf = (ast: SchemaAST.AST): SchemaAST.TypeLiteral | undefined => {
  switch (ast._tag) {
    case "TypeLiteral":
      return ast
    case "Refinement":
    case "Transformation":
      return structOf(ast.from)
    case "Union": {
      const structs = ast.types.map(structOf).filter((s) => s !== undefined)
      return structs.length === 1 ? structs[0] : undefined
    }
    default:
      return undefined
  }
}

/** The encoded AST of field `name` of the struct behind `ast`. */
export const fieldOf = (ast: SchemaAST.AST, name: string): SchemaAST.AST | undefined =>
  structOf(SchemaAST.encodedAST(ast))?.propertySignatures.find((p) => p.name === name)?.type

/** A reader for the struct behind `ast` (no struct: strings pass through, repeated keys as arrays). */
export const reader = (ast: SchemaAST.AST | undefined): Reader => {
  const struct = ast === undefined ? undefined : structOf(SchemaAST.encodedAST(ast))
  const readings = new Map<string, FieldReading>()
  for (const property of struct?.propertySignatures ?? []) {
    if (typeof property.name === "string") readings.set(property.name, readingOf(property.type))
  }
  return (raw) => {
    const out: Record<string, unknown> = {}
    for (const key in raw) {
      const value = raw[key]
      if (value !== undefined) out[key] = readField(value, readings.get(key))
    }
    return out
  }
}
