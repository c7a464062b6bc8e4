/**
 * The standing primitives' files (spec 2.14): `*.expectation.ts`, `*.budget.ts` and
 * `*.experiment.ts` under a folder (the app entry's), each default-exporting its definition,
 * found by suffix as `*.aggregate.ts` files are. A file whose default export is not the definition
 * its suffix promises is refused (`DiscoveryFailed`, naming the file): a typo must not leave an
 * expectation silently never running.
 */
import { Effect } from "effect"
import * as Discovery from "../aggregates/Discovery.js"
import type * as CostBudget from "./CostBudget.js"
import type * as Expectation from "./Expectation.js"
import type * as Experiment from "./Experiment.js"

/** The definitions found, with the file of each. */
export interface Discovered {
  readonly expectations: ReadonlyArray<{ readonly file: string; readonly value: Expectation.Any }>
  readonly budgets: ReadonlyArray<{ readonly file: string; readonly value: CostBudget.CostBudget }>
  readonly experiments: ReadonlyArray<{ readonly file: string; readonly value: Experiment.Any }>
}

const tagged = <A>(tag: string) => (value: unknown): value is A =>
  typeof value === "object" && value !== null && (value as { readonly _tag?: unknown })._tag === tag

/** The `*.expectation.ts`, `*.budget.ts` and `*.experiment.ts` files under `root`: their definitions. */
export const discoverStanding = (root: string): Effect.Effect<Discovered, Discovery.DiscoveryFailed> =>
  Effect.all({
    expectations: Discovery.discover(root, ".expectation.ts", tagged<Expectation.Any>("Expectation"), "defineExpectation"),
    budgets: Discovery.discover(root, ".budget.ts", tagged<CostBudget.CostBudget>("CostBudget"), "defineCostBudget"),
    experiments: Discovery.discover(root, ".experiment.ts", tagged<Experiment.Any>("Experiment"), "defineExperiment")
  })
