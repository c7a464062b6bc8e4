/**
 * The inspect surface under `/_fw/inspect/`: the gate, the core routes (procedures, tables, live
 * subscriptions, invoke), and the mounting of every plugin's inspect routes; and the dashboard
 * page over it at `/_fw/dashboard`.
 */
export * as Dashboard from "./Dashboard.js"
export * as DataBrowser from "./DataBrowser.js"
export * as Inspect from "./Inspect.js"
