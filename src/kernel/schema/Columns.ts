/**
 * How a table's fields map to SQL columns, derived from the encoded side of each field's schema:
 * strings are text, numbers are numbers, booleans are booleans, anything else is JSON.
 */
import type { Schema } from "effect"
import { SchemaAST } from "effect"

/** The storage kind of a column. */
export type Kind = "text" | "number" | "boolean" | "json"

/** One column. `optional`: the key may be absent; `nullable`: the value may be null. */
export interface Column {
  readonly name: string
  readonly kind: Kind
  readonly optional: boolean
  readonly nullable: boolean
}

const isNull = (ast: SchemaAST.AST): boolean =>
  (ast._tag === "Literal" && ast.literal === null) || (ast._tag === "Union" && ast.types.some(isNull))

const isNullish = (ast: SchemaAST.AST) =>
  ast._tag === "UndefinedKeyword" || ast._tag === "VoidKeyword" || (ast._tag === "Literal" && ast.literal === null)

const kindOf = (ast: SchemaAST.AST): Kind => {
  switch (ast._tag) {
    case "StringKeyword":
    case "TemplateLiteral":
      return "text"
    case "NumberKeyword":
      return "number"
    case "BooleanKeyword":
      return "boolean"
    case "Literal":
      return typeof ast.literal === "string" ? "text" : typeof ast.literal === "number" ? "number" : typeof ast.literal === "boolean" ? "boolean" : "json"
    case "Enums":
      return ast.enums.every(([, value]) => typeof value === "string") ? "text" : ast.enums.every(([, value]) => typeof value === "number") ? "number" : "json"
    case "Refinement":
      return kindOf(ast.from)
    case "Union": {
      const kinds = new Set(ast.types.filter((t) => !isNullish(t)).map(kindOf))
      return kinds.size === 1 ? [...kinds][0]! : "json"
    }
    default:
      return "json"
  }
}

/** What columns are read from: a table's name and its row schema. */
export interface Source {
  readonly name: string
  readonly schema: Schema.Schema.Any
}

const cache = new WeakMap<Source, ReadonlyArray<Column>>()

/** The columns of a table, `id` first. */
export const of = (table: Source): ReadonlyArray<Column> => {
  const cached = cache.get(table)
  if (cached) return cached
  const ast = SchemaAST.encodedAST(table.schema.ast)
  if (ast._tag !== "TypeLiteral") throw new Error(`table "${table.name}": expected a struct schema`)
  const columns = ast.propertySignatures.map((signature): Column => ({
    name: String(signature.name),
    kind: kindOf(signature.type),
    optional: signature.isOptional,
    nullable: isNull(signature.type)
  }))
  const ordered = [...columns.filter((c) => c.name === "id"), ...columns.filter((c) => c.name !== "id")]
  cache.set(table, ordered)
  return ordered
}

/** The SQL type of a column on a dialect. Text compares bytewise (`C` collation) on PostgreSQL, as on SQLite. */
export const sqlType = (column: Column, dialect: "sqlite" | "pg"): string => {
  const type = dialect === "pg"
    ? { text: `TEXT COLLATE "C"`, number: "DOUBLE PRECISION", boolean: "BOOLEAN", json: "JSONB" }[column.kind]
    : { text: "TEXT", number: "REAL", boolean: "INTEGER", json: "TEXT" }[column.kind]
  return column.name === "id" ? `${type} PRIMARY KEY` : type
}
