/**
 * The entry module the `fw` CLI loads: its default export names the app, the store tier to serve
 * it on, and the port.
 */
import type { SqlClient } from "@effect/sql"
import type { Layer } from "effect"
import type { ChangeTap } from "../kernel/changes/ChangeTap.js"
import type { Store } from "../kernel/store/Store.js"
import type { App } from "../app/App.js"

/** What an entry module exports by default. */
export interface Entry {
  readonly app: App
  /**
   * The store tier, with everything it needs provided. For a SQL tier also output the `SqlClient`
   * (`Layer.provideMerge`) so `fw db apply` can reach the database.
   */
  readonly store: Layer.Layer<Store | ChangeTap | SqlClient.SqlClient, unknown> | Layer.Layer<Store | ChangeTap, unknown>
  /** Default 3000; env `PORT` overrides. */
  readonly port?: number
  readonly host?: string
}

/** Declares an entry (identity, for type checking). */
export const defineEntry = (entry: Entry): Entry => entry
