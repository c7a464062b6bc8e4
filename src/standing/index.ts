/**
 * `@fw/framework/standing`: data-quality expectations, per-tenant cost budgets and live experiments
 * (spec 2.14, 3.8). Declare them in `*.expectation.ts`, `*.budget.ts` and `*.experiment.ts` files
 * (the default export is the definition; the CLI discovers them) and serve them with
 * `standingPlugin`, or run them without an app with `layerSql` / `layerMemory`.
 */
export { defineCostBudget, statusOf, windowOf } from "./CostBudget.js"
export type { Bounds, CostBudget, Options as CostBudgetOptions, Status as BudgetStatus, Window } from "./CostBudget.js"
export { recomputeUnit } from "./Engine.js"
export { CostInvalid, StandingDefinitionError } from "./Errors.js"
export { defineExpectation } from "./Expectation.js"
export type {
  Expectation,
  Invariant,
  Options as ExpectationOptions,
  Severity,
  Status as ExpectationStatus
} from "./Expectation.js"
export { assignVariant, defineExperiment, expectedShares, holdoutArm } from "./Experiment.js"
export type { ArmReadout, Experiment, Metric, Options as ExperimentOptions, Readout, Variant } from "./Experiment.js"
export { armOf, variantFrom } from "./FlagLink.js"
export {
  CostRegistry,
  ExpectationRegistry,
  ExperimentRegistry,
  recordCost,
  useCostBudget,
  useExpectation,
  useExperiment
} from "./Registries.js"
export type {
  Attribution,
  BudgetCrossing,
  BudgetObservation,
  BudgetSummary,
  Cause,
  Cost,
  CostRegistryShape,
  ExpectationObservation,
  ExpectationRegistryShape,
  ExpectationTransition,
  ExperimentRegistryShape,
  ExperimentUpdate
} from "./Registries.js"
export { chiSquaredSurvival, threshold as srmThreshold } from "./Srm.js"
export type { Result as SrmResult } from "./Srm.js"
export { standingPlugin } from "./StandingPlugin.js"
export type { Options as StandingOptions, StandingPlugin } from "./StandingPlugin.js"
export { CostEvents, ExpectationState, tables } from "./tables.js"
export { layerMemory, layerSql } from "./StandingLayer.js"
export type { Provided as StandingRegistries } from "./StandingLayer.js"
export { discoverStanding } from "./Discovery.js"
export type { Discovered as DiscoveredStanding } from "./Discovery.js"
