/**
 * SQLite's fast paths: statements and short transactions straight on the better-sqlite3 handle under
 * an `@effect/sql-sqlite-node` client. Only this folder loads SQLite's client packages.
 */
export * as SqliteDirect from "./SqliteDirect.js"
export * as SqliteDirectTransaction from "./SqliteDirectTransaction.js"
export * as SqliteTransaction from "./SqliteTransaction.js"
