/**
 * The standing primitives without serving an app: a layer running the engine over the provided
 * store, like the other areas' registries (`FlagRegistry.layerSql`, `Aggregates.layerSql`), for
 * background jobs, scripts and tests. It follows the store's change tap (inline, as the plugin
 * does: counts move before the write returns) and provides the three registries once the boot scan
 * is done. `layerSql` first applies the area's tables (`tables`), so nothing is applied by hand.
 *
 * ```ts
 * const standing = Standing.layerSql({ expectations: [ordersFresh] }) // needs Store, ChangeTap, SqlClient
 * ```
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Effect, Layer } from "effect"
import { ChangeTap } from "../kernel/changes/ChangeTap.js"
import type { StoreError } from "../kernel/Errors.js"
import * as SchemaDiffer from "../kernel/schema/SchemaDiffer.js"
import { Store } from "../kernel/store/Store.js"
import * as Engine from "./Engine.js"
import { StandingDefinitionError } from "./Errors.js"
import type * as Registries from "./Registries.js"
import type { Options } from "./StandingPlugin.js"
import { CostEvents, ExpectationState, tables } from "./tables.js"

/** The registries the layers provide. */
export type Provided = Registries.ExpectationRegistry | Registries.CostRegistry | Registries.ExperimentRegistry

const configOf = (options: Options): Engine.Config => {
  const config = { expectations: options.expectations ?? [], budgets: options.budgets ?? [], experiments: options.experiments ?? [] }
  for (const [what, names] of [
    ["expectation", config.expectations.map((e) => e.name)],
    ["cost budget", config.budgets.map((b) => b.name)],
    ["experiment", config.experiments.map((e) => e.name)]
  ] as const) {
    const seen = new Set<string>()
    for (const name of names) {
      if (seen.has(name)) throw new StandingDefinitionError(`${what} "${name}" is declared twice`)
      seen.add(name)
    }
  }
  return config
}

/**
 * The engine over the provided store (its tables must exist on a SQL store: see `layerSql`); fails
 * with the store's error when the boot scan cannot read.
 * Throws `StandingDefinitionError` when two definitions of one kind share a name.
 */
export const layerMemory = (options: Options): Layer.Layer<Provided, StoreError, Store | ChangeTap> => {
  const config = configOf(options)
  const watched: ReadonlySet<string> = new Set([
    CostEvents.name,
    ExpectationState.name,
    ...config.expectations.map((expectation) => expectation.table.name),
    ...config.experiments.map((experiment) => experiment.table.name)
  ])
  return Layer.scopedContext(Effect.gen(function*() {
    const store = yield* Store
    const tap = yield* ChangeTap
    const engine = yield* Engine.make(config, store)
    // Subscribed before the boot scan: changes committed meanwhile are held and replayed, not lost.
    yield* tap.subscribe({
      name: "standing",
      inline: true,
      onEvent: (event) => watched.has(event.table) ? engine.onChange(event) : Effect.void
    })
    yield* engine.boot
    yield* engine.background
    return engine.context
  }))
}

/** The engine on a SQL store, after applying the area's tables (`_fw_cost_events`, `_fw_expectation_state`). */
export const layerSql = (options: Options): Layer.Layer<Provided, StoreError | SqlError.SqlError, Store | ChangeTap | SqlClient.SqlClient> =>
  layerMemory(options).pipe(Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables))))

export { tables }
