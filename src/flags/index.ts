/**
 * `@fw/framework/flags`: feature flags (spec area E) — targeting, deterministic rollout, variants,
 * schedules and ramps, kill-switch, rpc gating, audit trail and the dead-flag report.
 */
export * as Bucket from "./Bucket.js"
export type { Flag, FlagObject, Instant, Json, MetadataValue, Ramp, Resolved, Rule, Schedule, Variant } from "./Definition.js"
export { FlagDefinitionError, FlagDisabled, FlagNotFound, FlagStoreFailed, OverrideRefused } from "./Errors.js"
export type { Reason, VariantResolution } from "./Evaluate.js"
export type { ExperimentLike } from "./Experiments.js"
export { evaluateVariant, flagValue, flagVariant, isFlagEnabled, requireFlag } from "./Flags.js"
export type { HasSubject } from "./Flags.js"
export { FlagRegistry, layerMemory, layerSql } from "./FlagRegistry.js"
export type { AuditEntry, Change, Config, FlagRegistryShape, ListEntry, Refusal } from "./FlagRegistry.js"
export { evaluateTag, flagsEvaluate, flagsPlugin } from "./FlagsPlugin.js"
export { variantsTag } from "./ClientVariants.js"
export type { FlagsPlugin, Options } from "./FlagsPlugin.js"
export { canToggleFlag } from "./inspect.js"
export type { Report, Shape, UsageState } from "./Lifecycle.js"
export { FlagAudit, FlagState, FlagUsage } from "./tables.js"
export { defineFlag } from "./TypedFlag.js"
export type { ExperimentLink, TypedFlag } from "./TypedFlag.js"
export type { Source } from "./Usage.js"
