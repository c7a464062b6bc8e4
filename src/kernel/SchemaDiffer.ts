/**
 * The declarative schema differ: compares the declared tables with the live database and creates
 * the missing tables, columns and indexes. It never drops or alters anything, so applying twice
 * plans nothing the second time. A column added to a declaration is created nullable (existing rows
 * have no value for it).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
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

/** The name of an index over `columns` of `table`. */
export const indexName = (table: string, columns: ReadonlyArray<string>) => `${table}_${columns.join("_")}_idx`

/** Declared indexes plus one on the tenant field. */
const indexesOf = (table: Table.Any): ReadonlyArray<ReadonlyArray<string>> => {
  const declared = table.indexes
  const tenant = table.tenantField
  return tenant !== undefined && !declared.some((index) => index[0] === tenant) ? [[tenant], ...declared] : declared
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
        const tables = new Map<string, Set<string>>()
        for (const row of columns) {
          if (!tables.has(row.table_name)) tables.set(row.table_name, new Set())
          tables.get(row.table_name)!.add(row.column_name)
        }
        return { tables, indexes: new Set(indexes.map((i) => i.indexname)) }
      }),
    orElse: () =>
      Effect.gen(function*() {
        const objects = yield* sql<{ readonly type: string; readonly name: string }>`
          SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index')`
        const tables = new Map<string, Set<string>>()
        for (const object of objects.filter((o) => o.type === "table")) {
          const info = yield* sql.unsafe<{ readonly name: string }>(`PRAGMA table_info(${quote(object.name)})`)
          tables.set(object.name, new Set(info.map((c) => c.name)))
        }
        return { tables, indexes: new Set(objects.filter((o) => o.type === "index").map((o) => o.name)) }
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
    for (const table of tables) {
      const columns = Columns.of(table)
      const existing = live.tables.get(table.name)
      if (existing === undefined) {
        const definitions = columns.map((c) => `${quote(c.name)} ${Columns.sqlType(c, dialect)}`).join(", ")
        steps.push({
          kind: "createTable",
          table: table.name,
          description: `create table ${table.name} (${columns.map((c) => c.name).join(", ")})`,
          sql: `CREATE TABLE IF NOT EXISTS ${quote(table.name)} (${definitions})`
        })
      } else {
        for (const column of columns.filter((c) => !existing.has(c.name))) {
          steps.push({
            kind: "addColumn",
            table: table.name,
            description: `add column ${table.name}.${column.name}`,
            sql: `ALTER TABLE ${quote(table.name)} ADD COLUMN ${quote(column.name)} ${Columns.sqlType(column, dialect)}`
          })
        }
      }
      for (const index of indexesOf(table)) {
        const name = indexName(table.name, index)
        if (live.indexes.has(name)) continue
        steps.push({
          kind: "createIndex",
          table: table.name,
          description: `create index ${name}`,
          sql: `CREATE INDEX IF NOT EXISTS ${quote(name)} ON ${quote(table.name)} (${index.map(quote).join(", ")})`
        })
      }
    }
    return steps
  })

/** Applies the plan, in one transaction, and returns the steps taken. */
export const apply = (tables: ReadonlyArray<Table.Any>): Effect.Effect<ReadonlyArray<Step>, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      const steps = yield* plan(tables)
      for (const step of steps) yield* sql.unsafe(step.sql)
      return steps
    }))
  })
