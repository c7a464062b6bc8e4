/**
 * The app's declared tables as the store sees them: a table that is not declared (by
 * `defineApp({ tables })` or a plugin) fails with `TableNotDeclared` naming it, on every tier, before
 * any statement reaches the database. Without this the memory tier would serve the table (it has
 * no schema) and SQL would fail the statement as an outage (`StoreUnavailable`), so the same app
 * would work in tests and fail in production. What is knowable at boot (the tables a plugin says it
 * uses, `Plugin.usesTables`) is checked at boot by `check`.
 */
import { Effect, Stream } from "effect"
import { TableNotDeclared } from "../kernel/Errors.js"
import type * as Table from "../kernel/schema/Table.js"
import type { StoreShape } from "../kernel/store/StoreShape.js"
import type * as Plugin from "./Plugin.js"

/** The names of `tables`. */
export const namesOf = (tables: ReadonlyArray<Table.Any>): ReadonlySet<string> => new Set(tables.map((table) => table.name))

/**
 * `store` refusing every operation on a table whose name is not in `declared`. The operations on a
 * declared table are the store's own (the same effects, so its fast paths stay).
 */
export const guard = (store: StoreShape, declared: ReadonlySet<string>): StoreShape => {
  const refused = (table: Table.Any) => declared.has(table.name) ? undefined : new TableNotDeclared({ table: table.name })
  // Each operation keeps the store's generic signature: the check is on the name only.
  const checked = <F extends (table: Table.Any, ...rest: Array<never>) => Effect.Effect<unknown, unknown>>(operation: F): F =>
    ((table: Table.Any, ...rest: Array<never>) => {
      const error = refused(table)
      return error === undefined ? operation(table, ...rest) : Effect.fail(error)
    }) as F
  return {
    ...store,
    insert: checked(store.insert),
    insertMany: checked(store.insertMany),
    update: checked(store.update),
    upsert: checked(store.upsert),
    delete: checked(store.delete),
    purge: checked(store.purge),
    get: checked(store.get),
    find: checked(store.find),
    count: checked(store.count),
    walk: ((table: Table.Any, options?: never) => {
      const error = refused(table)
      return error === undefined ? store.walk(table, options) : Stream.fail(error)
    }) as StoreShape["walk"]
  }
}

/** The first table a plugin uses (`usesTables`) that is not in `declared`, as the boot's failure. */
export const check = (plugin: Plugin.Plugin, declared: ReadonlySet<string>): Effect.Effect<void, TableNotDeclared> => {
  for (const table of plugin.usesTables ?? []) {
    const name = typeof table === "string" ? table : table.name
    if (!declared.has(name)) return Effect.fail(new TableNotDeclared({ table: name, usedBy: `plugin "${plugin.name}"` }))
  }
  return Effect.void
}
