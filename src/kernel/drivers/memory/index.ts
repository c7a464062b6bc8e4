/**
 * The in-process tier: committed rows in Maps, compared with SQL's semantics, so the memory tier
 * answers as SQLite and PostgreSQL do (the conformance suite holds them equal).
 */
export * as Compare from "./Compare.js"
export * as MemoryDriver from "./MemoryDriver.js"
