/**
 * `@fw/framework/history`: row history (spec 2.12).
 */
export { rowAsOf, rowHistory, rowHistoryPlugin, sweep } from "./RowHistory.js"
export type { Options, RowHistoryPlugin, Version } from "./RowHistory.js"
export { RowHistory } from "./tables.js"
