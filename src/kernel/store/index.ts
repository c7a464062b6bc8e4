/**
 * The Store service, implemented once over the tier contract (`Driver`): point reads, queries, tenant
 * scoping, transactions, and the staging of a write's side effects (stagers, fused stages) with it.
 */
export * as CommitWitness from "./CommitWitness.js"
export * as Driver from "./Driver.js"
export * as FusedStage from "./FusedStage.js"
export * as StageStatements from "./StageStatements.js"
export * as StagedInsert from "./StagedInsert.js"
export * as Store from "./Store.js"
export * as StorePointRead from "./StorePointRead.js"
export * as StoreQuery from "./StoreQuery.js"
export * as StoreRuntime from "./StoreRuntime.js"
export * as StoreShape from "./StoreShape.js"
export * as StoreSpan from "./StoreSpan.js"
export * as TenantScope from "./TenantScope.js"
