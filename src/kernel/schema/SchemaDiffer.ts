/**
 * The declarative schema differ: compares the declared tables with the live database (SQLite:
 * `sqlite_master` and `PRAGMA table_info`; PostgreSQL: `information_schema.columns` and
 * `pg_indexes` of the current schema) and creates the missing tables, columns and indexes. It never
 * drops or alters anything, so applying twice plans nothing the second time.
 *
 * Plain functions over the provided `SqlClient`: `plan(tables)` is the dry run, `apply(tables)`
 * runs the plan in one transaction and returns it.
 *
 * Every column except `id` is created nullable: a column added to a declaration must be (existing
 * rows have no value for it), and a field made optional later must keep accepting rows; the table
 * schema is what enforces presence.
 */
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import * as DdlLock from "./DdlLock.js"
import * as Columns from "./Columns.js"
import type * as Table from "./Table.js"

/** One step of a plan. */
export interface Step {
  readonly kind: "createTable" | "addColumn" | "createIndex"
  readonly table: string
  /** What the step does, in words. */
  readonly description: string
  readonly sql: string
}

const quote = (identifier: string) => `"${identifier.replaceAll(`"`, `""`)}"`

/** PostgreSQL truncates identifiers to 63 bytes; longer index names are shortened deterministically. */
const maxIdentifierLength = 63

/** FNV-1a, 32 bits, as 8 hex digits: a stable suffix for shortened names. */
const fnv1a = (text: string) => {
  let hash = 0x811c9dc5
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0
  return hash.toString(16).padStart(8, "0")
}

/** The name of an index over `columns` of `table`: `<table>_<col1>_<col2>_idx`, shortened with a hash past 63 bytes. */
export const indexName = (table: string, columns: ReadonlyArray<string>): string => {
  const name = `${table}_${columns.join("_")}_idx`
  if (new TextEncoder().encode(name).length <= maxIdentifierLength) return name
  return `${name.slice(0, maxIdentifierLength - 13).replace(/_+$/, "")}_${fnv1a(name)}_idx`
}

/** Declared indexes plus one on the tenant field (unless a declared index leads with it). */
const indexesOf = (table: Table.Any): ReadonlyArray<ReadonlyArray<string>> => {
  const declared = table.indexes
  const tenant = table.tenantField
  return tenant !== undefined && !declared.some((index) => index[0] === tenant) ? [[tenant], ...declared] : declared
}

const group = (rows: ReadonlyArray<{ readonly table_name: string; readonly column_name: string }>) => {
  const tables = new Map<string, Set<string>>()
  for (const row of rows) {
    let columns = tables.get(row.table_name)
    if (columns === undefined) tables.set(row.table_name, columns = new Set())
    columns.add(row.column_name)
  }
  return tables
}

/** Reads the live tables (with their columns) and index names. */
const introspect = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.onDialectOrElse({
    pg: () =>
      Effect.gen(function*() {
        const columns = yield* sql<{ readonly table_name: string; readonly column_name: string }>`
          SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`
        const indexes = yield* sql<{ readonly indexname: string }>`
          SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()`
        return { tables: group(columns), indexes: new Set(indexes.map((i) => i.indexname)) }
      }),
    orElse: () =>
      Effect.gen(function*() {
        // One query for every table's columns (`pragma_table_info` as a table-valued function).
        const columns = yield* sql<{ readonly table_name: string; readonly column_name: string }>`
          SELECT m.name AS table_name, p.name AS column_name
          FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p WHERE m.type = 'table'`
        const indexes = yield* sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'index'`
        return { tables: group(columns), indexes: new Set(indexes.map((i) => i.name)) }
      })
  })
})

/** The steps that would bring the database up to the declared tables (a dry run). */
export const plan = (tables: ReadonlyArray<Table.Any>): Effect.Effect<ReadonlyArray<Step>, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
    const live = yield* introspect
    const steps: Array<Step> = []
    const planned = new Set<string>()
    for (const table of tables) {
      const columns = Columns.of(table)
      const existing = live.tables.get(table.name)
      if (existing === undefined) {
        const definitions = columns.map((c) => `${quote(c.name)} ${Columns.sqlType(c, dialect)}`).join(", ")
        steps.push({
          kind: "createTable",
          table: table.name,
          description: `create table ${table.name} (${columns.map((c) => `${c.name} ${c.kind}`).join(", ")})`,
          sql: `CREATE TABLE IF NOT EXISTS ${quote(table.name)} (${definitions})`
        })
      } else {
        for (const column of columns.filter((c) => !existing.has(c.name))) {
          steps.push({
            kind: "addColumn",
            table: table.name,
            description: `add column ${table.name}.${column.name} ${column.kind} (nullable)`,
            // PostgreSQL can skip a column another replica added meanwhile; SQLite runs one writer.
            sql: `ALTER TABLE ${quote(table.name)} ADD COLUMN ${dialect === "pg" ? "IF NOT EXISTS " : ""}${
              quote(column.name)
            } ${Columns.sqlType(column, dialect)}`
          })
        }
      }
      for (const index of indexesOf(table)) {
        const name = indexName(table.name, index)
        if (live.indexes.has(name) || planned.has(name)) continue
        planned.add(name)
        steps.push({
          kind: "createIndex",
          table: table.name,
          description: `create index ${name} on ${table.name} (${index.join(", ")})`,
          sql: `CREATE INDEX IF NOT EXISTS ${quote(name)} ON ${quote(table.name)} (${index.map(quote).join(", ")})`
        })
      }
    }
    return steps
  })

/** Applies the plan in one transaction and returns the steps taken. */
export const apply = (tables: ReadonlyArray<Table.Any>): Effect.Effect<ReadonlyArray<Step>, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Replicas booting together apply one after the other (PostgreSQL).
    return yield* sql.withTransaction(DdlLock.withDdlLock(DdlLock.keys.schema)(Effect.gen(function*() {
      const steps = yield* plan(tables)
      for (const step of steps) yield* sql.unsafe(step.sql)
      return steps
    }))).pipe(
      // @effect/sql turns a failed COMMIT into a defect; it is a database failure like any other.
      Effect.catchSomeDefect((defect) =>
        defect instanceof SqlError ? Option.some(Effect.fail(defect)) : Option.none()
      )
    )
  })
