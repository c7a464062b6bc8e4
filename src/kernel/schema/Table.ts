/**
 * Table declarations. A table is a name, a Schema.Struct of fields, an optional tenant field
 * and optional indexes; every row has a string primary key `id`.
 */
import { Schema } from "effect"
import * as Columns from "./Columns.js"

/** The Schema.Struct fields a table declares (without `id`, which every table has). */
export type Fields = Schema.Struct.Fields

/** A declared table. */
export interface Table<Name extends string = string, F extends Fields = Fields> {
  readonly _tag: "Table"
  readonly name: Name
  readonly fields: F
  /** The field holding the owning tenant; rows of such a table are visible only inside that tenant. */
  readonly tenantField: (keyof F & string) | undefined
  /** Secondary indexes, each a list of columns. */
  readonly indexes: ReadonlyArray<ReadonlyArray<string>>
  /** Schema of a whole row: `{ id: string } & fields`. */
  readonly schema: Schema.Struct<{ readonly id: typeof Schema.String } & F>
}

/** Any declared table. */
export interface Any {
  readonly _tag: "Table"
  readonly name: string
  readonly fields: Fields
  readonly tenantField: string | undefined
  readonly indexes: ReadonlyArray<ReadonlyArray<string>>
  readonly schema: Schema.Schema.AnyNoContext
}

/** The decoded row type of a table. */
export type Row<T extends Any> = T extends Table<string, infer F> ? Schema.Struct.Type<{ readonly id: typeof Schema.String } & F>
  : never

/** The row type without `id` (what an insert may omit). */
export type Insert<T extends Any> = Omit<Row<T>, "id"> & { readonly id?: string }

/** Error thrown at definition time for an invalid table declaration. */
export class TableDefinitionError extends Error {
  override readonly name = "TableDefinitionError"
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Declares a table.
 *
 * ```ts
 * const Todos = defineTable("todos", {
 *   fields: { tenantId: Schema.String, title: Schema.String, done: Schema.Boolean },
 *   tenantField: "tenantId",
 *   indexes: [["tenantId", "done"]]
 * })
 * ```
 */
export const defineTable = <const Name extends string, const F extends Fields>(
  name: Name,
  options: {
    readonly fields: F
    readonly tenantField?: keyof F & string
    readonly indexes?: ReadonlyArray<ReadonlyArray<keyof F & string | "id">>
  }
): Table<Name, F> => {
  if (!identifier.test(name)) throw new TableDefinitionError(`table name "${name}" is not a plain identifier`)
  if ("id" in options.fields) throw new TableDefinitionError(`table "${name}" declares "id": every table has a string id already`)
  for (const field of Object.keys(options.fields)) {
    if (!identifier.test(field)) throw new TableDefinitionError(`table "${name}": field "${field}" is not a plain identifier`)
  }
  if (options.tenantField !== undefined && !(options.tenantField in options.fields)) {
    throw new TableDefinitionError(`table "${name}": tenantField "${options.tenantField}" is not a declared field`)
  }
  for (const index of options.indexes ?? []) {
    for (const column of index) {
      if (column !== "id" && !(column in options.fields)) {
        throw new TableDefinitionError(`table "${name}": index column "${column}" is not a declared field`)
      }
    }
  }
  const table: Table<Name, F> = {
    _tag: "Table",
    name,
    fields: options.fields,
    tenantField: options.tenantField,
    indexes: options.indexes ?? [],
    schema: Schema.Struct({ id: Schema.String, ...options.fields })
  }
  // Tenant ids are strings: SQL would compare a number column loosely ("42.0" and " 42" match 42),
  // and the tiers would disagree on who sees what.
  if (options.tenantField !== undefined && Columns.of(table).find((column) => column.name === options.tenantField)?.kind !== "text") {
    throw new TableDefinitionError(`table "${name}": tenantField "${options.tenantField}" must be a string field`)
  }
  return table
}

/** True for framework tables (`_fw_*`), which plugins such as row history never record. */
export const isFrameworkTable = (table: Any | string): boolean =>
  (typeof table === "string" ? table : table.name).startsWith("_fw_")
