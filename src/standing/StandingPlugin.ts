/**
 * The standing plugin: runs the declared expectations, cost budgets and experiments of an app.
 *
 * ```ts
 * defineApp({ tables, procedures, plugins: [standingPlugin({ expectations, budgets, experiments })] })
 * ```
 *
 * It boots each primitive from the tables (so a restart remembers a violation and the spent cost),
 * maintains them from the change tap, meters recompute cost on live pushes when a budget exists,
 * puts the registries in every procedure's context (for `useExpectation`, `useCostBudget`,
 * `useExperiment`, `recordCost`), and shows read-only snapshots on the inspect surface.
 */
import type { Scope } from "effect"
import { Context, Deferred, Effect, FiberId, Layer } from "effect"
import * as Plugin from "../app/Plugin.js"
import type * as Procedure from "../app/Procedure.js"
import type { StoreShape } from "../kernel/store/Store.js"
import { Store } from "../kernel/store/Store.js"
import type * as CostBudget from "./CostBudget.js"
import * as Engine from "./Engine.js"
import { StandingDefinitionError } from "./Errors.js"
import type * as Expectation from "./Expectation.js"
import type * as Experiment from "./Experiment.js"
import * as Dashboard from "./dashboard.js"
import * as Inspect from "./inspect.js"
import * as Registries from "./Registries.js"
import { CostEvents, ExpectationState } from "./tables.js"

/** The options of `standingPlugin`. */
export interface Options {
  readonly expectations?: ReadonlyArray<Expectation.Any>
  readonly budgets?: ReadonlyArray<CostBudget.CostBudget>
  readonly experiments?: ReadonlyArray<Experiment.Any>
}

/** The standing plugin, with a layer of its registries for code outside procedures. */
export interface StandingPlugin extends Plugin.Plugin {
  /** The three registries of the engine running over the provided store (waits for its boot). */
  readonly registries: Layer.Layer<
    Registries.ExpectationRegistry | Registries.CostRegistry | Registries.ExperimentRegistry,
    never,
    Store
  >
  /** What it runs (the CLI checks discovered `*.expectation.ts`, … files against it). */
  readonly definitions: Engine.Config
}

const unique = (what: string, names: ReadonlyArray<string>) => {
  const seen = new Set<string>()
  for (const name of names) {
    if (seen.has(name)) throw new StandingDefinitionError(`${what} "${name}" is declared twice`)
    seen.add(name)
  }
}

/**
 * The standing plugin. Throws `StandingDefinitionError` when two definitions of one kind share a
 * name. One plugin value may serve several stores (each gets its own engine).
 */
export const standingPlugin = (options: Options = {}): StandingPlugin => {
  const config: Engine.Config = {
    expectations: options.expectations ?? [],
    budgets: options.budgets ?? [],
    experiments: options.experiments ?? []
  }
  unique("expectation", config.expectations.map((e) => e.name))
  unique("cost budget", config.budgets.map((b) => b.name))
  unique("experiment", config.experiments.map((e) => e.name))

  // One engine per store: a plugin value may be shared by several apps in one process (tests).
  const slots = new WeakMap<StoreShape, { readonly ready: Deferred.Deferred<Engine.Engine>; engine: Engine.Engine | undefined }>()
  const slotOf = (store: StoreShape) => {
    let slot = slots.get(store)
    if (slot === undefined) slots.set(store, slot = { ready: Deferred.unsafeMake(FiberId.none), engine: undefined })
    return slot
  }
  const engineOf = Effect.map(Store, (store) => slots.get(store)?.engine)
  /** The services `onChangeEvent` was last called with, and their store's slot. */
  let lastServices: Context.Context<Plugin.Services> | undefined
  let lastSlot: { engine: Engine.Engine | undefined } | undefined
  const watchedTables: ReadonlySet<string> = new Set([
    CostEvents.name,
    ExpectationState.name,
    ...config.expectations.map((expectation) => expectation.table.name),
    ...config.experiments.map((experiment) => experiment.table.name)
  ])

  const background = Layer.scopedDiscard(Effect.gen(function*() {
    const store = yield* Store
    const engine = yield* Engine.make(config, store)
    const slot = slotOf(store)
    // Installed before the boot scan: changes committed meanwhile are held and replayed, not lost.
    slot.engine = engine
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        slots.delete(store)
        // A change still arriving for this store finds no engine (the slot may be cached by onChangeEvent).
        slot.engine = undefined
      })
    )
    yield* engine.boot
    yield* Deferred.succeed(slot.ready, engine)
    yield* engine.background
  }))

  const intercept = (kind: Procedure.Kind): Plugin.Interceptor => ({
    kind,
    // A live query's shared re-run finds the registries too (`useExpectation` in a live query).
    sharedRuns: true,
    intercept: (_call, next) =>
      Effect.flatMap(engineOf, (engine) => engine === undefined ? next : Effect.provide(next, engine.context))
  })

  const registries: StandingPlugin["registries"] = Layer.effectContext(
    Effect.flatMap(Store, (store) => Effect.map(Deferred.await(slotOf(store).ready), (engine) => engine.context))
  )

  return {
    ...Plugin.definePlugin({
      name: "standing",
      permissions: [
        "store:write",
        "store:changes:read",
        "inspect:read",
        "rpc:intercept:query",
        "rpc:intercept:mutation",
        "rpc:intercept:action"
      ],
      tables: [CostEvents, ExpectationState],
      usesTables: [...config.expectations.map((expectation) => expectation.table), ...config.experiments.map((experiment) => experiment.table)],
      layer: background as Layer.Layer<never, unknown, Plugin.Services | Scope.Scope>,
      // Counts are read right after the write that moved them: handled before the write returns.
      inlineChangeEvents: true,
      // Counted synchronously, on the engine of the store the change was made in: a change to another
      // table, or one that moves no status and has no listener to tell, costs the writer no effect.
      onChangeEvent: (event, services) => {
        if (!watchedTables.has(event.table)) return Effect.void
        // The services are the same object for every change of one running host: its store's slot
        // is looked up once, not per write.
        if (services !== lastServices) {
          const slot = slots.get(Context.get(services, Store))
          if (slot === undefined) return Effect.void
          lastServices = services
          lastSlot = slot
        }
        const engine = lastSlot!.engine
        return engine === undefined ? Effect.void : engine.onChange(event)
      },
      onLivePush: (push) => Effect.flatMap(engineOf, (engine) => engine === undefined ? Effect.void : engine.onLivePush(push)),
      interceptors: [intercept("query"), intercept("mutation"), intercept("action")],
      inspectRoutes: Inspect.routes(engineOf, config),
      dashboardPanel: Dashboard.panel
    }),
    registries,
    definitions: config
  }
}
