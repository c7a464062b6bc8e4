/**
 * `@fw/framework/search`: the search plugin (spec area A).
 */
export type { BackendFactory, BackendOption, EngineConfig } from "./Backend.js"
export {
  SearchBackendError,
  SearchBackendNotDurable,
  SearchConfigInvalid,
  SearchFieldRejected,
  SearchIndexNotFound,
  SearchQueryInvalid,
  SearchReindexBusy,
  searchErrors,
  SearchTenantMissing
} from "./Errors.js"
export * as Memory from "./Memory.js"
export { searchIndex } from "./Options.js"
export type { IndexOptions, Options, SyncOptions } from "./Options.js"
export type { Input as SearchQueryInput, Output as SearchQueryOutput } from "./Query.js"
export { SearchBackend } from "./SearchBackend.js"
export type {
  Document,
  FieldType,
  Filter,
  FilterOp,
  Fuzziness,
  Highlight,
  Hit,
  IndexSpec,
  Query,
  Rebuild,
  Result,
  Scalar,
  SearchBackendShape
} from "./SearchBackend.js"
export { reindexCommand, searchPlugin } from "./SearchPlugin.js"
export * as Sql from "./Sql.js"
export type { Running, SearchPlugin } from "./SearchPlugin.js"
export type { IndexView, ReindexProgress, ResyncReport } from "./Sync.js"
export { SearchDrift, SearchLease, SearchPending, SearchStats, searchTables } from "./tables.js"
