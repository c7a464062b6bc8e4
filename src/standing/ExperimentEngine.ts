/**
 * The running experiments of one store: a tally per experiment, kept per write from its table's
 * changes, and the readouts (with their listeners).
 */
import { Effect } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { Consumer } from "./BootScan.js"
import * as Experiment from "./Experiment.js"
import * as Listeners from "./Listeners.js"
import type * as Registries from "./Registries.js"

/** Builds the tallies of `definitions`; boot rows count as of `bootedAt`. */
export const make = (definitions: ReadonlyArray<Experiment.Any>, bootedAt: number) =>
  Effect.gen(function*() {
    const experimentListeners = yield* Listeners.make<Registries.ExperimentUpdate>()
    const tallies = new Map<string, Experiment.Tally>()
    const talliesByTable = new Map<string, Array<Experiment.Tally>>()
    for (const definition of definitions) {
      const tally = new Experiment.Tally(definition)
      tallies.set(definition.name, tally)
      const list = talliesByTable.get(definition.table.name) ?? []
      list.push(tally)
      talliesByTable.set(definition.table.name, list)
    }
    const applyExperiments = (event: ChangeEvent): Effect.Effect<void> => {
      const list = talliesByTable.get(event.table)
      if (list === undefined) return Effect.void
      for (const tally of list) tally.apply(event.before, event.after, event.at)
      if (!experimentListeners.any()) return Effect.void
      return experimentListeners.notify(list.map((tally) => ({ name: tally.experiment.name, readout: tally.readout() })))
    }

    const experimentRegistry: Registries.ExperimentRegistryShape = {
      snapshot: () => Effect.sync(() => [...tallies.values()].map((tally) => tally.readout())),
      get: (name) => Effect.sync(() => tallies.get(name)?.readout() ?? null),
      subscribe: experimentListeners.subscribe
    }

    /** Boot scan: every row of an experiment's table counts, as an insert. */
    const consumers: ReadonlyArray<Consumer> = [...talliesByTable.values()].map((list) => ({
      table: list[0]!.experiment.table,
      consume: (row) => {
        for (const tally of list) tally.apply(null, row, bootedAt)
      }
    }))

    return {
      /** The tables watched. */
      tables: [...talliesByTable.keys()],
      consumers,
      /** Counts a change of a watched table now; the effect tells the listeners (void without any). */
      apply: applyExperiments,
      registry: experimentRegistry
    }
  })
