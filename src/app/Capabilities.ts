/**
 * Operator capabilities on the inspect surface (spec 4.1, 5.4 rule 4). An operator is the bearer
 * of `FW_INSPECT_TOKEN`, who holds every capability, or a Subject resolved by the app's own
 * strategies that holds the `fw:inspect` scope; each capability is a further scope of that
 * Subject. Reading the surface needs only `fw:inspect`; each action below needs its capability,
 * checked on the server before the route runs (a plugin declares it with `Route.capability`).
 */

/** The scope that makes a Subject an operator of the inspect surface. */
export const inspectScope = "fw:inspect"

/** Invoke any procedure from the inspect surface (`POST /_fw/inspect/invoke`), as the system. */
export const canInvokeProcedure = "canInvokeProcedure"
/** Rebuild a search index (`POST /_fw/inspect/plugins/search/reindex`). */
export const canReindexSearch = "canReindexSearch"
/** Repair the search drift (`POST /_fw/inspect/plugins/search/resync`). */
export const canResyncSearch = "canResyncSearch"
/** Toggle or override a flag (`POST /_fw/inspect/plugins/flags/toggle`, `/override`). */
export const canToggleFlag = "canToggleFlag"
/** Refresh an aggregate by hand (`POST /_fw/inspect/aggregates/<name>/refresh`). */
export const canRefreshAggregate = "canRefreshAggregate"

/** The framework's capabilities; plugins may declare others on their routes. */
export const known: ReadonlyArray<string> = [
  canInvokeProcedure,
  canReindexSearch,
  canResyncSearch,
  canToggleFlag,
  canRefreshAggregate
]
