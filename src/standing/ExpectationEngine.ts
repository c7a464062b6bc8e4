/**
 * The running expectations of one store: counters kept per write, the status and its transitions
 * with the causing write's provenance, the state row that keeps `since` and the cause across
 * restarts and replicas, and freshness ageing out on the Effect `Clock`.
 *
 * An expectation's state row is the one record of when its status began and why, settled after
 * every change of status and adopted from the change tap (see ExpectationStateRow): replicas that
 * heard the same changes in different orders end on the same `since` and cause.
 */
import type { Scope } from "effect"
import { Clock, Effect } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import * as Sleep from "../kernel/Sleep.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type { Consumer } from "./BootScan.js"
import * as Expectation from "./Expectation.js"
import * as ExpectationStateRow from "./ExpectationStateRow.js"
import * as Listeners from "./Listeners.js"
import type * as Registries from "./Registries.js"
import { ExpectationState } from "./tables.js"

/**
 * One expectation as it runs: its counters and the status they were last evaluated to. The metric is
 * not kept: every change of the counters is followed by an evaluation, so the metric of the last
 * evaluation is the counters' metric at `lastEvaluatedAt` (computed when read, not per write).
 */
interface ExpectationRuntime extends ExpectationStateRow.Tracked {
  readonly definition: Expectation.Any
  readonly counters: Expectation.Counters
  lastEvaluatedAt: number | null
}

/** The provenance of the write a change comes from, as a transition's cause. */
const causeOf = (event: ChangeEvent): Registries.Cause => ({
  traceId: event.provenance.traceId,
  subjectId: event.provenance.subjectId,
  procedure: event.provenance.procedure,
  table: event.table,
  op: event.op,
  rowId: event.id,
  at: event.at
})

const noThreshold: Readonly<Record<string, number>> = Object.freeze({})

/** Builds the expectations of `definitions` over `store`, unknown until `boot`; `bootedAt` is when the engine started. */
export const make = (definitions: ReadonlyArray<Expectation.Any>, store: StoreShape, bootedAt: number) =>
  Effect.gen(function*() {
    const expectationListeners = yield* Listeners.make<Registries.ExpectationTransition>()
    // Names this engine's writes of the state rows: a replica (or a restart) is another instance.
    const stateRow = ExpectationStateRow.make(store, crypto.randomUUID())
    const expectations = new Map<string, ExpectationRuntime>()
    const expectationsByTable = new Map<string, Array<ExpectationRuntime>>()
    for (const definition of definitions) {
      const runtime: ExpectationRuntime = {
        definition,
        counters: new Expectation.Counters(definition),
        status: "unknown",
        since: null,
        lastEvaluatedAt: null,
        lastCause: null,
        ...ExpectationStateRow.initial
      }
      expectations.set(definition.name, runtime)
      const list = expectationsByTable.get(definition.table.name) ?? []
      list.push(runtime)
      expectationsByTable.set(definition.table.name, list)
    }

    /**
     * Evaluates (synchronously) at `now`: `undefined` when the status stayed (most writes: a status
     * check, nothing built), else the transition the change of status makes, or null for a move
     * into or out of `unknown`. The cause is `event`'s provenance (null without one).
     */
    const evaluate = (runtime: ExpectationRuntime, now: number, event: ChangeEvent | null): Registries.ExpectationTransition | null | undefined => {
      runtime.lastEvaluatedAt = now
      const status = runtime.counters.statusAt(now)
      const previous = runtime.status
      if (status === previous) return undefined
      runtime.status = status
      runtime.since = now
      if (status !== "violated" && !(previous === "violated" && status === "holding")) {
        stateRow.began(runtime)
        return null
      }
      const cause = event === null ? null : causeOf(event)
      runtime.lastCause = cause
      stateRow.began(runtime)
      return {
        name: runtime.definition.name,
        transition: status === "violated" ? "violated" : "recovered",
        at: now,
        cause,
        metric: runtime.counters.metricAt(now),
        threshold: runtime.counters.threshold,
        severity: runtime.definition.severity
      }
    }

    const persist = (runtime: ExpectationRuntime) => stateRow.persist(runtime, runtime.definition.name)

    const observation = (runtime: ExpectationRuntime): Registries.ExpectationObservation => ({
      name: runtime.definition.name,
      table: runtime.definition.table.name,
      kind: runtime.definition.invariant.kind,
      severity: runtime.definition.severity,
      status: runtime.status,
      // Before the first evaluation: no metric, and no threshold reported yet.
      metric: runtime.lastEvaluatedAt === null ? null : runtime.counters.metricAt(runtime.lastEvaluatedAt),
      threshold: runtime.lastEvaluatedAt === null ? noThreshold : runtime.counters.threshold,
      since: runtime.since,
      lastEvaluatedAt: runtime.lastEvaluatedAt,
      lastCause: runtime.lastCause
    })

    /** After the boot scan: status from the counters, `since` and cause from the state row when it agrees. */
    const bootExpectations = Effect.gen(function*() {
      const persisted = new Map(
        (yield* store.find(ExpectationState).pipe(Subject.asSystem)).map((row) => [row.id, row] as const)
      )
      for (const runtime of expectations.values()) {
        evaluate(runtime, bootedAt, null)
        const row = persisted.get(runtime.definition.name)
        if (row !== undefined) stateRow.boot(runtime, row)
        // Recorded even while holding, so a replica booting later adopts the same `since`.
        if (!stateRow.settled(runtime)) yield* persist(runtime)
      }
    })

    /** Applies a change to the expectations on its table; the effect persists and notifies transitions (void when none). */
    const applyExpectations = (event: ChangeEvent): Effect.Effect<void> => {
      const runtimes = expectationsByTable.get(event.table)
      if (runtimes === undefined) return Effect.void
      // Allocated only when a status moves (rarely): most writes build nothing here.
      let transitions: Array<Registries.ExpectationTransition> | undefined
      let changed: Array<ExpectationRuntime> | undefined
      for (const runtime of runtimes) {
        runtime.counters.apply(event.before, event.after)
        const outcome = evaluate(runtime, event.at, event)
        if (outcome === undefined) continue
        ;(changed ??= []).push(runtime)
        if (outcome !== null) (transitions ??= []).push(outcome)
      }
      if (changed === undefined) return Effect.void
      // The state row is settled by every replica that saw a change of status: it records its start
      // unless the row already holds the status (then adopts it); the others hear the row's changes.
      return Effect.zipRight(expectationListeners.notify(transitions ?? []), Effect.forEach(changed, persist, { discard: true }))
    }

    /** Hears a change of the state table (this replica's own or, under fleet scope, another's). */
    const hearState = (event: ChangeEvent) =>
      Effect.sync(() => {
        const runtime = expectations.get(event.id)
        if (runtime !== undefined) stateRow.heard(runtime, event.after)
      })

    /** Re-evaluates freshness on the clock; an SLA that ages out has no cause. */
    const tick = (runtime: ExpectationRuntime) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const outcome = evaluate(runtime, now, null)
        // Subscribers hear transitions in the order they happen: before the (slower) state write.
        if (outcome !== undefined && outcome !== null) yield* expectationListeners.notify([outcome])
        if (outcome !== undefined) yield* persist(runtime)
      })

    const freshnessLoop = (runtime: ExpectationRuntime) => {
      const invariant = runtime.definition.invariant
      const idle = invariant.kind === "freshness" ? Math.min(invariant.maxAgeMs, 60_000) : 60_000
      return Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const due = runtime.counters.agesOutAt()
        const wait = runtime.status === "holding" && due !== null ? Math.max(0, due - now) : idle
        // maxAgeMs may be longer than Effect's live clock can wait in one sleep: waited in steps.
        yield* Sleep.sleepUntil(now + wait)
        yield* tick(runtime)
      }).pipe(Effect.forever)
    }

    const expectationRegistry: Registries.ExpectationRegistryShape = {
      snapshot: () => Effect.sync(() => [...expectations.values()].map(observation)),
      get: (name) => Effect.sync(() => {
        const runtime = expectations.get(name)
        return runtime === undefined ? null : observation(runtime)
      }),
      violations: () => Effect.sync(() => [...expectations.values()].filter((r) => r.status === "violated").map(observation)),
      subscribe: expectationListeners.subscribe
    }

    /** Boot scan: every row of an expectation's table counts, as an insert. */
    const consumers: ReadonlyArray<Consumer> = [...expectationsByTable.values()].map((runtimes) => ({
      table: runtimes[0]!.definition.table,
      consume: (row) => {
        for (const runtime of runtimes) runtime.counters.apply(null, row)
      }
    }))

    /** The freshness loops, forked for the lifetime of the scope. */
    const background: Effect.Effect<void, never, Scope.Scope> = Effect.gen(function*() {
      for (const runtime of expectations.values()) {
        if (runtime.definition.invariant.kind === "freshness") yield* Effect.forkScoped(freshnessLoop(runtime))
      }
    })

    return {
      /** The tables watched. */
      tables: [...expectationsByTable.keys()],
      consumers,
      /** After the boot scan: evaluates every expectation and takes over (or records) its state row. */
      boot: bootExpectations,
      /** Counts a change of a watched table now; the effect persists and notifies what it moved. */
      apply: applyExpectations,
      /** Hears a change of the state table: a later revision of the current status is adopted. */
      hearState,
      background,
      registry: expectationRegistry
    }
  })
