/**
 * The running standing primitives of one store: the boot scan, the per-change maintenance, the
 * clock (freshness ageing, budget rollover, ledger retention) and the three registries, composed
 * from the expectations, the cost ledger and the experiments of the config.
 *
 * Who counts: every replica keeps its own counters and applies every change it receives (its own
 * writes and, under fleet scope, every other replica's), once each, so nothing is counted twice
 * and every counter is a function of the committed rows. Cost lives in an append-only ledger
 * table, so the totals are the same fold on every replica and after a restart. An expectation's
 * state row carries a revision written under its lock: a replica records its start after a change
 * of status unless the row already holds that status, and adopts the latest revision of the status
 * it is in, so every replica ends on one `since` and cause (see ExpectationStateRow).
 */
import type { Scope } from "effect"
import { Clock, Context, Effect } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { StoreShape } from "../kernel/store/Store.js"
import type * as Table from "../kernel/schema/Table.js"
import * as BootScan from "./BootScan.js"
import type * as CostBudget from "./CostBudget.js"
import * as CostEngine from "./CostEngine.js"
import type * as Expectation from "./Expectation.js"
import * as ExpectationEngine from "./ExpectationEngine.js"
import type * as Experiment from "./Experiment.js"
import * as ExperimentEngine from "./ExperimentEngine.js"
import * as Registries from "./Registries.js"
import { CostEvents, ExpectationState } from "./tables.js"

/** What the standing plugin runs. */
export interface Config {
  readonly expectations: ReadonlyArray<Expectation.Any>
  readonly budgets: ReadonlyArray<CostBudget.CostBudget>
  readonly experiments: ReadonlyArray<Experiment.Any>
}

export { compareIds } from "./BootScan.js"
export { recomputeUnit } from "./CostEngine.js"

/**
 * Builds the engine over `store`, ready to hold changes at once; `boot` scans the tables and
 * replays what arrived meanwhile.
 */
export const make = (config: Config, store: StoreShape) =>
  Effect.gen(function*() {
    const bootedAt = yield* Clock.currentTimeMillis
    const expectations = yield* ExpectationEngine.make(config.expectations, store, bootedAt)
    const costs = yield* CostEngine.make(config.budgets, store, bootedAt)
    const experiments = yield* ExperimentEngine.make(config.experiments, bootedAt)
    const bootScan = BootScan.make(store)

    /**
     * What a committed change of each watched table does, composed once here rather than tested per
     * write: the ledger's attribution, a state row to adopt, then the expectations and experiments
     * on the table. The counting is done when a handler is called, synchronously (it may throw: a
     * `where` or `subject` function is the app's code); the effect returned persists and notifies
     * what the change caused, and is `Effect.void` when there is nothing to run (most writes).
     */
    const handlers = new Map<string, (event: ChangeEvent) => Effect.Effect<void>>()
    for (const table of new Set([CostEvents.name, ExpectationState.name, ...expectations.tables, ...experiments.tables])) {
      const parts: Array<(event: ChangeEvent) => Effect.Effect<void>> = []
      if (table === CostEvents.name) parts.push(costs.apply)
      if (table === ExpectationState.name) parts.push(expectations.hearState)
      if (expectations.tables.includes(table)) parts.push(expectations.apply)
      if (experiments.tables.includes(table)) parts.push(experiments.apply)
      handlers.set(table, parts.length === 1 ? parts[0]! : (event) => {
        let effect: Effect.Effect<void> = Effect.void
        for (const part of parts) {
          const next = part(event)
          if (next !== Effect.void) effect = effect === Effect.void ? next : Effect.zipRight(effect, next)
        }
        return effect
      })
    }

    /** Applies one committed change (see `handlers`). */
    const applyChange = (event: ChangeEvent): Effect.Effect<void> => {
      const handler = handlers.get(event.table)
      return handler === undefined ? Effect.void : handler(event)
    }

    /** Scans every watched table once, then replays the changes that arrived meanwhile and the scan missed. */
    const boot = Effect.gen(function*() {
      const scans = new Map<string, { table: Table.Any; consumers: Array<(row: Readonly<Record<string, unknown>>) => void> }>()
      for (const { consume, table } of [...expectations.consumers, ...costs.consumers, ...experiments.consumers]) {
        const entry = scans.get(table.name) ?? { table, consumers: [] }
        entry.consumers.push(consume)
        scans.set(table.name, entry)
      }
      for (const [tableName, { consumers, table }] of scans) {
        yield* bootScan.scan(table, (row) => {
          for (const consume of consumers) consume(row)
        }).pipe(Effect.catchAllCause((cause) =>
          tableName === CostEvents.name
            ? Effect.failCause(cause)
            : Effect.logWarning(`standing primitives on "${tableName}": boot scan failed`, cause)
        ))
      }
      yield* expectations.boot
      yield* costs.boot
      yield* bootScan.replay(applyChange)
    })

    /**
     * Handles a committed change on the writer's fiber: counted at once (or held while the boot
     * runs); the effect returned is what is left to run, `Effect.void` when nothing is. A throw from
     * the app's code (`where`, `subject`) fails that effect instead, as a defect.
     */
    const onChange = (event: ChangeEvent): Effect.Effect<void> => {
      const handler = handlers.get(event.table)
      if (handler === undefined || bootScan.hold(event)) return Effect.void
      try {
        return handler(event)
      } catch (defect) {
        return Effect.die(defect)
      }
    }

    const background: Effect.Effect<void, never, Scope.Scope> = Effect.zipRight(expectations.background, costs.background)

    const context = Context.make(Registries.ExpectationRegistry, expectations.registry).pipe(
      Context.add(Registries.CostRegistry, costs.registry),
      Context.add(Registries.ExperimentRegistry, experiments.registry)
    )

    return {
      boot,
      prune: costs.prune,
      onChange,
      onLivePush: costs.onLivePush,
      background,
      context,
      expectations: expectations.registry,
      costs: costs.registry,
      experiments: experiments.registry
    }
  })

/** A running engine. */
export type Engine = Effect.Effect.Success<ReturnType<typeof make>>
