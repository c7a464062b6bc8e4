/**
 * The registries of the standing primitives (spec 2.14, 6.3) as services, and the handler sugar
 * that reads them. Inside a procedure of an app served with `standingPlugin`, the registries are
 * in the handler's context; elsewhere the sugar answers null (and `recordCost` records nothing).
 */
import type { Scope } from "effect"
import { Context, Effect, Option } from "effect"
import type { StoreError } from "../kernel/Errors.js"
import type * as CostBudget from "./CostBudget.js"
import type { CostInvalid } from "./Errors.js"
import type * as Expectation from "./Expectation.js"
import type * as Experiment from "./Experiment.js"

/** The write that caused a transition. */
export interface Cause {
  readonly traceId: string
  readonly subjectId: string | null
  readonly procedure: string | null
  readonly table: string
  readonly op: "insert" | "update" | "delete"
  readonly rowId: string
  readonly at: number
}

/** An expectation's observation (spec 2.14). */
export interface ExpectationObservation {
  readonly name: string
  readonly table: string
  readonly kind: Expectation.Invariant["kind"]
  readonly severity: Expectation.Severity
  readonly status: Expectation.Status
  readonly metric: number | null
  readonly threshold: Readonly<Record<string, number>>
  /** When the current status began (epoch ms), null before the first evaluation. */
  readonly since: number | null
  readonly lastEvaluatedAt: number | null
  /** The write behind the last transition; null for an SLA that aged out, or a state found at boot. */
  readonly lastCause: Cause | null
}

/** A transition delivered to `ExpectationRegistry.subscribe`. */
export interface ExpectationTransition {
  readonly name: string
  readonly transition: "violated" | "recovered"
  readonly at: number
  readonly cause: Cause | null
  readonly metric: number | null
  readonly threshold: Readonly<Record<string, number>>
  readonly severity: Expectation.Severity
}

/** The expectation registry. */
export interface ExpectationRegistryShape {
  readonly snapshot: () => Effect.Effect<ReadonlyArray<ExpectationObservation>>
  readonly get: (name: string) => Effect.Effect<ExpectationObservation | null>
  /** Expectations now violated. */
  readonly violations: () => Effect.Effect<ReadonlyArray<ExpectationObservation>>
  /** Delivers violated and recovered transitions for the lifetime of the scope. */
  readonly subscribe: (listener: (transition: ExpectationTransition) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
}

/** The expectation registry service. */
export class ExpectationRegistry extends Context.Tag("@fw/framework/standing/ExpectationRegistry")<
  ExpectationRegistry,
  ExpectationRegistryShape
>() {}

/** A cost to record. */
export interface Cost {
  readonly tenantId: string
  readonly unit: string
  readonly amount: number
  /** Attribute it to a subscription too (the runtime does for recompute cost). */
  readonly subscription?: string
}

/** A tenant's cost, over everything recorded. */
export interface Attribution {
  readonly tenantId: string
  readonly total: number
  readonly byUnit: Readonly<Record<string, number>>
  readonly bySubscription: Readonly<Record<string, number>>
}

/** A tenant under a budget, in the current window (spec 2.14). */
export interface BudgetObservation {
  readonly budget: string
  readonly tenantId: string
  readonly status: CostBudget.Status
  readonly spent: number
  readonly limit: number
  /** `warnAt × limit`, null when warning is disabled. */
  readonly warnThreshold: number | null
  readonly unit: string | null
  /** The current window, null for a cumulative budget. */
  readonly window: { readonly start: number; readonly end: number } | null
  readonly severity: Expectation.Severity
  /** When the current status began (epoch ms), null while `ok` from the window's start. */
  readonly since: number | null
}

/** A threshold crossing delivered to `CostRegistry.subscribe` (once per threshold per window), or a reset at rollover. */
export interface BudgetCrossing {
  readonly budget: string
  readonly tenantId: string
  readonly from: CostBudget.Status
  readonly to: CostBudget.Status
  readonly spent: number
  readonly limit: number
  readonly at: number
  readonly windowStart: number | null
  /** The trace of the cost that crossed; null for a rollover. */
  readonly traceId: string | null
  readonly severity: Expectation.Severity
}

/** A declared budget with its tenants. */
export interface BudgetSummary {
  readonly name: string
  readonly limit: number
  readonly unit: string | null
  readonly warnAt: number
  readonly window: string | null
  readonly severity: Expectation.Severity
  readonly tenants: ReadonlyArray<BudgetObservation>
}

/** The cost registry. Budgets observe: nothing here refuses a call. */
export interface CostRegistryShape {
  /** Records a cost (in the caller's transaction, if any). */
  readonly record: (cost: Cost) => Effect.Effect<void, CostInvalid | StoreError>
  readonly attribution: () => Effect.Effect<ReadonlyArray<Attribution>>
  /** A tenant's attribution and its budgets, or null when nothing was recorded for it. */
  readonly tenant: (tenantId: string) => Effect.Effect<(Attribution & { readonly budgets: ReadonlyArray<BudgetObservation> }) | null>
  readonly budgets: () => Effect.Effect<ReadonlyArray<BudgetSummary>>
  /** A tenant under a budget; null for an unknown budget. */
  readonly budget: (name: string, tenantId: string) => Effect.Effect<BudgetObservation | null>
  /** Tenants in `warn` or `exceeded` in the current window. */
  readonly breaches: () => Effect.Effect<ReadonlyArray<BudgetObservation>>
  readonly subscribe: (listener: (crossing: BudgetCrossing) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
  /** True when at least one budget is declared (recompute cost is metered only then). */
  readonly metered: boolean
}

/** The cost registry service. */
export class CostRegistry extends Context.Tag("@fw/framework/standing/CostRegistry")<CostRegistry, CostRegistryShape>() {}

/** A live update delivered to `ExperimentRegistry.subscribe`. */
export interface ExperimentUpdate {
  readonly name: string
  readonly readout: Experiment.Readout
}

/** The experiment registry. */
export interface ExperimentRegistryShape {
  readonly snapshot: () => Effect.Effect<ReadonlyArray<Experiment.Readout>>
  readonly get: (name: string) => Effect.Effect<Experiment.Readout | null>
  readonly subscribe: (listener: (update: ExperimentUpdate) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
}

/** The experiment registry service. */
export class ExperimentRegistry extends Context.Tag("@fw/framework/standing/ExperimentRegistry")<
  ExperimentRegistry,
  ExperimentRegistryShape
>() {}

/** The observation of `definition`, or null when it is not registered (or no standing plugin serves the caller). */
export const useExpectation = (definition: Expectation.Any): Effect.Effect<ExpectationObservation | null> =>
  Effect.flatMap(Effect.serviceOption(ExpectationRegistry), Option.match({
    onNone: () => Effect.succeed(null),
    onSome: (registry) => registry.get(definition.name)
  }))

/** `tenantId` under `definition` in the current window, or null. */
export const useCostBudget = (definition: CostBudget.CostBudget, tenantId: string): Effect.Effect<BudgetObservation | null> =>
  Effect.flatMap(Effect.serviceOption(CostRegistry), Option.match({
    onNone: () => Effect.succeed(null),
    onSome: (registry) => registry.budget(definition.name, tenantId)
  }))

/** The readout of `definition`, or null. */
export const useExperiment = (definition: Experiment.Any): Effect.Effect<Experiment.Readout | null> =>
  Effect.flatMap(Effect.serviceOption(ExperimentRegistry), Option.match({
    onNone: () => Effect.succeed(null),
    onSome: (registry) => registry.get(definition.name)
  }))

/**
 * Records a cost from a handler: `{tenantId, unit, amount}`, attributed to the current trace. Without
 * a standing plugin serving the caller it records nothing.
 */
export const recordCost = (cost: Cost): Effect.Effect<void, CostInvalid | StoreError> =>
  Effect.flatMap(Effect.serviceOption(CostRegistry), Option.match({
    onNone: () => Effect.void,
    onSome: (registry) => registry.record(cost)
  }))
