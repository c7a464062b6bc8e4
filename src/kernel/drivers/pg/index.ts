/**
 * PostgreSQL's fast paths and connections: direct statements on node-postgres clients, fused inserts,
 * sessions of their own and the LISTEN watchdog. Only this folder loads PostgreSQL's client packages.
 */
export * as ListenWatchdog from "./ListenWatchdog.js"
export * as PgConnectionLost from "./PgConnectionLost.js"
export * as PgDirect from "./PgDirect.js"
export * as PgDirectDriver from "./PgDirectDriver.js"
export * as PgDirectSlots from "./PgDirectSlots.js"
export * as PgFusedInsert from "./PgFusedInsert.js"
export * as PgSession from "./PgSession.js"
