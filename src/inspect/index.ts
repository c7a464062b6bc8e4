/**
 * The inspect surface under `/_fw/inspect/`: the gate, the core routes (procedures, tables, live
 * subscriptions, invoke), and the mounting of every plugin's inspect routes.
 */
export * as Inspect from "./Inspect.js"
