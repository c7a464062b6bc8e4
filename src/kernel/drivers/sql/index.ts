/**
 * The SQL tier over `@effect/sql`, shared by SQLite and PostgreSQL: statements built once per dialect,
 * the reading of a database failure, and the dispatch to each dialect's fast paths.
 */
export * as SqlDriver from "./SqlDriver.js"
export * as SqlFailure from "./SqlFailure.js"
