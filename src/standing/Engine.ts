/**
 * The running standing primitives of one store: the boot scans, the per-change maintenance, the
 * clock (freshness ageing, budget rollover) and the three registries.
 *
 * Who counts: every replica keeps its own counters and applies every change it receives (its own
 * writes and, under fleet scope, every other replica's), once each, so nothing is counted twice
 * and every counter is a function of the committed rows. Cost lives in an append-only ledger
 * table, so the totals are the same fold on every replica and after a restart. An expectation's
 * state row is written by the replica whose own write (or clock) caused the transition; replicas
 * adopt the earliest `since` among equal statuses, so they converge on one cause.
 */
import type { Scope } from "effect"
import { Clock, Context, Duration, Effect, Either } from "effect"
import type { LivePush } from "../app/Plugin.js"
import type { ChangeEvent } from "../kernel/ChangeEvent.js"
import * as Provenance from "../kernel/Provenance.js"
import * as RowCodec from "../kernel/RowCodec.js"
import type { StoreShape } from "../kernel/Store.js"
import * as Subject from "../kernel/Subject.js"
import type * as Table from "../kernel/Table.js"
import * as CostBudget from "./CostBudget.js"
import { CostInvalid } from "./Errors.js"
import * as Expectation from "./Expectation.js"
import * as Experiment from "./Experiment.js"
import * as Registries from "./Registries.js"
import { CostEvents, ExpectationState } from "./tables.js"

/** What the standing plugin runs. */
export interface Config {
  readonly expectations: ReadonlyArray<Expectation.Any>
  readonly budgets: ReadonlyArray<CostBudget.CostBudget>
  readonly experiments: ReadonlyArray<Experiment.Any>
}

/** The unit of recompute cost. */
export const recomputeUnit = "recompute"

interface ExpectationRuntime {
  readonly definition: Expectation.Any
  readonly counters: Expectation.Counters
  status: Expectation.Status
  metric: number | null
  threshold: Readonly<Record<string, number>>
  since: number | null
  /** When the status before the current one began: a recorded start at or before it is from an older episode. */
  previousSince: number | null
  lastEvaluatedAt: number | null
  lastCause: Registries.Cause | null
}

interface TenantCost {
  total: number
  readonly byUnit: Map<string, number>
  readonly bySubscription: Map<string, number>
}

interface BudgetTenant {
  start: number
  end: number
  spent: number
  status: CostBudget.Status
  since: number | null
}

const rank: Record<CostBudget.Status, number> = { ok: 0, warn: 1, exceeded: 2 }

/** Listeners kept in a plain array: the per-change path checks for them without running an effect. */
const listeners = <A>() =>
  Effect.sync(() => {
    let all: ReadonlyArray<(value: A) => Effect.Effect<void>> = []
    return {
      subscribe: (listener: (value: A) => Effect.Effect<void>): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => {
            all = [...all, listener]
          }),
          () =>
            Effect.sync(() => {
              all = all.filter((l) => l !== listener)
            })
        ),
      any: () => all.length > 0,
      notify: (values: ReadonlyArray<A>): Effect.Effect<void> =>
        values.length === 0 || all.length === 0 ? Effect.void : Effect.forEach(all, (listener) =>
          Effect.forEach(values, (value) =>
            listener(value).pipe(Effect.catchAllCause((cause) => Effect.logWarning("a standing listener failed", cause)))
          , { discard: true }), { discard: true })
    }
  })

const causeOf = (event: ChangeEvent): Registries.Cause => ({
  traceId: event.provenance.traceId,
  subjectId: event.provenance.subjectId,
  procedure: event.provenance.procedure,
  table: event.table,
  op: event.op,
  rowId: event.id,
  at: event.at
})

const causeKey = (cause: Registries.Cause | null) => cause === null ? "" : `${cause.traceId}\u0000${cause.table}\u0000${cause.rowId}`

const asCause = (value: Readonly<Record<string, unknown>> | null): Registries.Cause | null =>
  value === null ? null : value as unknown as Registries.Cause

const windowLabel = (window: CostBudget.Window | undefined): string | null =>
  window === undefined ? null : typeof window === "string" ? window : Duration.format(Duration.decode(window))

/** Two encoded rows (or absences) with the same fields and values. */
const sameRow = (a: Readonly<Record<string, unknown>> | null, b: Readonly<Record<string, unknown>> | null): boolean => {
  if (a === null || b === null) return a === b
  const keys = Object.keys(a)
  if (keys.length !== Object.keys(b).length) return false
  return keys.every((key) => key in b && JSON.stringify(a[key]) === JSON.stringify(b[key]))
}

/** Rows per page of the boot scan. */
const bootPageSize = 1000

/**
 * Orders ids as the stores do (PostgreSQL `COLLATE "C"` and SQLite compare UTF-8 bytes, the memory
 * tier sorts strings): by code point, which UTF-16 order matches except around surrogates.
 */
export const compareIds = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x - y
    if (x > 0xffff) i++
  }
  return a.length - b.length
}

/**
 * Builds the engine over `store`, ready to hold changes at once; `boot` scans the tables and
 * replays what arrived meanwhile.
 */
export const make = (config: Config, store: StoreShape) =>
  Effect.gen(function*() {
    const expectationListeners = yield* listeners<Registries.ExpectationTransition>()
    const costListeners = yield* listeners<Registries.BudgetCrossing>()
    const experimentListeners = yield* listeners<Registries.ExperimentUpdate>()
    const bootedAt = yield* Clock.currentTimeMillis

    // ---- expectations ------------------------------------------------------------------------
    const expectations = new Map<string, ExpectationRuntime>()
    const expectationsByTable = new Map<string, Array<ExpectationRuntime>>()
    for (const definition of config.expectations) {
      const runtime: ExpectationRuntime = {
        definition,
        counters: new Expectation.Counters(definition),
        status: "unknown",
        metric: null,
        threshold: {},
        since: null,
        previousSince: null,
        lastEvaluatedAt: null,
        lastCause: null
      }
      expectations.set(definition.name, runtime)
      const list = expectationsByTable.get(definition.table.name) ?? []
      list.push(runtime)
      expectationsByTable.set(definition.table.name, list)
    }

    /**
     * Evaluates (synchronously) at `now`: `undefined` when the status stayed (most writes), else the
     * transition the change of status makes, or null for a move into or out of `unknown`. The cause
     * is `event`'s provenance (null without one), built only for a transition.
     */
    const evaluate = (runtime: ExpectationRuntime, now: number, event: ChangeEvent | null): Registries.ExpectationTransition | null | undefined => {
      const evaluation = runtime.counters.evaluate(now)
      runtime.metric = evaluation.metric
      runtime.threshold = evaluation.threshold
      runtime.lastEvaluatedAt = now
      const previous = runtime.status
      if (evaluation.status === previous) return undefined
      runtime.status = evaluation.status
      runtime.previousSince = runtime.since
      runtime.since = now
      if (evaluation.status !== "violated" && !(previous === "violated" && evaluation.status === "holding")) return null
      const cause = event === null ? null : causeOf(event)
      runtime.lastCause = cause
      return {
        name: runtime.definition.name,
        transition: evaluation.status === "violated" ? "violated" : "recovered",
        at: now,
        cause,
        metric: evaluation.metric,
        threshold: evaluation.threshold,
        severity: runtime.definition.severity
      }
    }

    /** `a` began before `b` (ties broken by the cause), so replicas that saw different paths converge on one. */
    const earlier = (a: { readonly since: number | null; readonly cause: Registries.Cause | null }, b: { readonly since: number | null; readonly cause: Registries.Cause | null }) =>
      a.since !== null && (b.since === null || a.since < b.since || (a.since === b.since && causeKey(a.cause) < causeKey(b.cause)))

    /** A recorded start belongs to the current episode of the status (not to an earlier one this replica saw end). */
    const sameEpisode = (runtime: ExpectationRuntime, since: number | null) =>
      since !== null && (runtime.previousSince === null || since > runtime.previousSince)

    /** Records the state unless the row already holds this status from an earlier (or the same) start. */
    const persist = (runtime: ExpectationRuntime) =>
      store.transaction(Effect.gen(function*() {
        const existing = yield* store.get(ExpectationState, runtime.definition.name)
        const mine = { since: runtime.since, cause: runtime.lastCause }
        if (existing._tag === "Some" && existing.value.status === runtime.status && sameEpisode(runtime, existing.value.since)) {
          const theirs = { since: existing.value.since, cause: asCause(existing.value.cause) }
          if (!earlier(mine, theirs)) {
            // An earlier start is recorded (another replica saw this status first): adopt it.
            if (earlier(theirs, mine)) {
              runtime.since = theirs.since
              runtime.lastCause = theirs.cause
            }
            return
          }
        }
        yield* store.upsert(ExpectationState, {
          id: runtime.definition.name,
          status: runtime.status,
          since: runtime.since,
          cause: runtime.lastCause as unknown as Record<string, unknown> | null,
          updatedAt: yield* Clock.currentTimeMillis
        })
      })).pipe(
        Subject.asSystem,
        Effect.catchAllCause((cause) => Effect.logWarning(`expectation "${runtime.definition.name}": state not persisted`, cause))
      )

    const observation = (runtime: ExpectationRuntime): Registries.ExpectationObservation => ({
      name: runtime.definition.name,
      table: runtime.definition.table.name,
      kind: runtime.definition.invariant.kind,
      severity: runtime.definition.severity,
      status: runtime.status,
      metric: runtime.metric,
      threshold: runtime.threshold,
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
        if (row !== undefined && row.status === runtime.status) {
          runtime.since = row.since
          runtime.lastCause = asCause(row.cause)
        } else {
          // Recorded even while holding, so a replica booting later adopts the same `since`.
          yield* persist(runtime)
        }
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
      // Every replica that saw a transition records it (unless an earlier start is recorded); the
      // others adopt the earliest start from the change tap, so all converge on one `since` and cause.
      return Effect.zipRight(expectationListeners.notify(transitions ?? []), Effect.forEach(changed, persist, { discard: true }))
    }

    const adoptState = (event: ChangeEvent) =>
      Effect.sync(() => {
        const row = event.after
        const runtime = expectations.get(event.id)
        if (row === null || runtime === undefined) return
        const since = typeof row["since"] === "number" ? row["since"] : null
        const cause = asCause((row["cause"] ?? null) as Readonly<Record<string, unknown>> | null)
        if (row["status"] !== runtime.status || since === null || !sameEpisode(runtime, since)) return
        if (earlier({ since, cause }, { since: runtime.since, cause: runtime.lastCause })) {
          runtime.since = since
          runtime.lastCause = cause
        }
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
        yield* Effect.sleep(Duration.millis(wait))
        yield* tick(runtime)
      }).pipe(Effect.forever)
    }

    // ---- cost --------------------------------------------------------------------------------
    const tenants = new Map<string, TenantCost>()
    const budgetTenants = new Map<string, Map<string, BudgetTenant>>()
    for (const budget of config.budgets) budgetTenants.set(budget.name, new Map())

    /** Adds a ledger row to its tenant's attribution (`sign` -1: a pruned row leaves it). */
    const attribute = (row: { readonly tenantId: string; readonly unit: string; readonly amount: number; readonly subscription: string | null }, sign: 1 | -1 = 1) => {
      let tenant = tenants.get(row.tenantId)
      if (tenant === undefined) tenants.set(row.tenantId, tenant = { total: 0, byUnit: new Map(), bySubscription: new Map() })
      const amount = sign * row.amount
      tenant.total += amount
      const adjust = (map: Map<string, number>, key: string) => {
        const next = (map.get(key) ?? 0) + amount
        // A key whose rows were all pruned leaves the attribution (sums of floats may leave dust).
        if (sign < 0 && Math.abs(next) < 1e-9) map.delete(key)
        else map.set(key, next)
      }
      adjust(tenant.byUnit, row.unit)
      if (row.subscription !== null) adjust(tenant.bySubscription, row.subscription)
      if (sign < 0 && tenant.byUnit.size === 0) tenants.delete(row.tenantId)
    }

    // Boot: attribution from the whole ledger; each budget's current window from the rows inside it.
    const current = new Map(config.budgets.map((budget) => [budget.name, CostBudget.windowOf(budget, bootedAt)] as const))
    const bootCost = (row: typeof CostEvents.schema.Type) => {
      attribute(row)
      for (const budget of config.budgets) {
        if (!CostBudget.counts(budget, row.unit)) continue
        const bounds = current.get(budget.name)!
        if (row.at < bounds.start || row.at >= bounds.end) continue
        const states = budgetTenants.get(budget.name)!
        const state = states.get(row.tenantId) ?? { ...bounds, spent: 0, status: "ok" as const, since: null }
        state.spent += row.amount
        states.set(row.tenantId, state)
      }
    }
    const bootBudgets = Effect.sync(() => {
      for (const budget of config.budgets) {
        for (const state of budgetTenants.get(budget.name)!.values()) {
          state.status = CostBudget.statusOf(budget, state.spent)
          if (state.status !== "ok") state.since = bootedAt
        }
      }
    })

    const applyCost = (event: ChangeEvent) =>
      Effect.gen(function*() {
        // A pruned row (older than every budget's current window) leaves the attribution only.
        if (event.op === "delete" && event.before !== null) return attribute(event.before as unknown as typeof CostEvents.schema.Type, -1)
        if (event.op !== "insert" || event.after === null) return
        const row = event.after as unknown as typeof CostEvents.schema.Type
        attribute(row)
        const crossings: Array<Registries.BudgetCrossing> = []
        for (const budget of config.budgets) {
          if (!CostBudget.counts(budget, row.unit)) continue
          const bounds = CostBudget.windowOf(budget, row.at)
          const states = budgetTenants.get(budget.name)!
          let state = states.get(row.tenantId)
          if (state === undefined || bounds.start > state.start) {
            if (state !== undefined && state.status !== "ok") {
              crossings.push(crossing(budget, row.tenantId, state.status, "ok", 0, row.at, bounds.start, null))
            }
            state = { ...bounds, spent: 0, status: "ok", since: null }
            states.set(row.tenantId, state)
          }
          // A cost from a window already rolled over counts in attribution only.
          if (bounds.start < state.start) continue
          state.spent += row.amount
          const next = CostBudget.statusOf(budget, state.spent)
          if (rank[next] <= rank[state.status]) continue
          // One notification per threshold crossed: a jump from ok to exceeded crosses both.
          if (state.status === "ok" && next === "exceeded" && CostBudget.warnThreshold(budget) !== null) {
            crossings.push(crossing(budget, row.tenantId, "ok", "warn", state.spent, row.at, budget.window === undefined ? null : state.start, row.traceId))
            state.status = "warn"
          }
          crossings.push(crossing(budget, row.tenantId, state.status, next, state.spent, row.at, budget.window === undefined ? null : state.start, row.traceId))
          state.status = next
          state.since = row.at
        }
        yield* costListeners.notify(crossings)
      })

    const crossing = (
      budget: CostBudget.CostBudget,
      tenantId: string,
      from: CostBudget.Status,
      to: CostBudget.Status,
      spent: number,
      at: number,
      windowStart: number | null,
      traceId: string | null
    ): Registries.BudgetCrossing => ({
      budget: budget.name,
      tenantId,
      from,
      to,
      spent,
      limit: budget.limit,
      at,
      windowStart,
      traceId,
      severity: budget.severity
    })

    /** At each window's end every tenant starts the next window at `ok`. */
    const rolloverLoop = (budget: CostBudget.CostBudget) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const { end } = CostBudget.windowOf(budget, now)
        yield* Effect.sleep(Duration.millis(Math.max(0, end - now)))
        const at = yield* Clock.currentTimeMillis
        const bounds = CostBudget.windowOf(budget, at)
        const resets: Array<Registries.BudgetCrossing> = []
        for (const [tenantId, state] of budgetTenants.get(budget.name)!) {
          if (state.start >= bounds.start) continue
          if (state.status !== "ok") resets.push(crossing(budget, tenantId, state.status, "ok", 0, at, bounds.start, null))
          Object.assign(state, { ...bounds, spent: 0, status: "ok", since: null })
        }
        yield* costListeners.notify(resets)
      }).pipe(Effect.forever)

    /**
     * Ledger retention: when every budget has a window, a cost older than the start of every
     * budget's current window (so older than the longest window) can no longer count towards any
     * budget, and is deleted. With a cumulative budget (no window) the whole ledger is kept.
     */
    const prunable = config.budgets.length > 0 && config.budgets.every((budget) => budget.window !== undefined)
    const retainedFrom = (now: number) => Math.min(...config.budgets.map((budget) => CostBudget.windowOf(budget, now).start))

    /** Deletes ledger rows older than the retention, a page at a time; returns how many. */
    const prune = Effect.gen(function*() {
      const cutoff = retainedFrom(yield* Clock.currentTimeMillis)
      let deleted = 0
      while (true) {
        const old = yield* store.find(CostEvents, { where: { at: { lt: cutoff } }, orderBy: "at", limit: bootPageSize })
        // Another replica may prune the same rows: a row already gone is skipped.
        yield* Effect.forEach(old, (row) => store.delete(CostEvents, row.id).pipe(Effect.catchTag("RowNotFound", () => Effect.void)), { discard: true })
        deleted += old.length
        if (old.length < bootPageSize) return deleted
      }
    }).pipe(Subject.asSystem)

    /** Prunes now, then whenever a window ends (the retention can only move then). */
    const pruneLoop = Effect.gen(function*() {
      yield* prune.pipe(Effect.catchAllCause((cause) => Effect.logWarning("cost ledger: pruning failed; retried at the next window end", cause)))
      const now = yield* Clock.currentTimeMillis
      const next = Math.min(...config.budgets.map((budget) => CostBudget.windowOf(budget, now).end))
      yield* Effect.sleep(Duration.millis(Math.max(0, next - now)))
    }).pipe(Effect.forever)

    const budgetObservation = (budget: CostBudget.CostBudget, tenantId: string, now: number): Registries.BudgetObservation => {
      const bounds = CostBudget.windowOf(budget, now)
      const state = budgetTenants.get(budget.name)!.get(tenantId)
      const live = state !== undefined && state.start === bounds.start ? state : undefined
      return {
        budget: budget.name,
        tenantId,
        status: live?.status ?? "ok",
        spent: live?.spent ?? 0,
        limit: budget.limit,
        warnThreshold: CostBudget.warnThreshold(budget),
        unit: budget.unit ?? null,
        window: budget.window === undefined ? null : bounds,
        severity: budget.severity,
        since: live?.since ?? null
      }
    }

    const attributionOf = (tenantId: string, tenant: TenantCost): Registries.Attribution => ({
      tenantId,
      total: tenant.total,
      byUnit: Object.fromEntries(tenant.byUnit),
      bySubscription: Object.fromEntries(tenant.bySubscription)
    })

    const record = (cost: Registries.Cost): Effect.Effect<void, CostInvalid | import("../kernel/Errors.js").StoreError> =>
      Effect.gen(function*() {
        if (typeof cost.tenantId !== "string" || cost.tenantId.length === 0) {
          return yield* new CostInvalid({ message: "a cost needs a tenantId" })
        }
        if (typeof cost.unit !== "string" || cost.unit.length === 0) return yield* new CostInvalid({ message: "a cost needs a unit" })
        if (typeof cost.amount !== "number" || !Number.isFinite(cost.amount) || cost.amount < 0) {
          return yield* new CostInvalid({ message: `a cost amount must be a finite number ≥ 0, got ${String(cost.amount)}` })
        }
        const provenance = yield* Provenance.current
        yield* store.insert(CostEvents, {
          tenantId: cost.tenantId,
          unit: cost.unit,
          amount: cost.amount,
          subscription: cost.subscription ?? null,
          traceId: provenance.traceId,
          at: yield* Clock.currentTimeMillis
        }).pipe(Subject.asSystem)
      })

    const onLivePush = (push: LivePush) => {
      // Only when a budget exists; never for a query over the ledger itself (its own cost would re-run it).
      if (config.budgets.length === 0 || push.tenantId === null || push.tables.has(CostEvents.name)) return Effect.void
      return record({
        tenantId: push.tenantId,
        unit: recomputeUnit,
        amount: 1,
        subscription: `${push.procedure}:${push.subscriptionId}`
      })
    }

    // ---- experiments -------------------------------------------------------------------------
    const tallies = new Map<string, Experiment.Tally>()
    const talliesByTable = new Map<string, Array<Experiment.Tally>>()
    for (const definition of config.experiments) {
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

    // ---- wiring ------------------------------------------------------------------------------
    const watched = new Set([CostEvents.name, ExpectationState.name, ...expectationsByTable.keys(), ...talliesByTable.keys()])

    /**
     * Applies one committed change: the counting is done now, synchronously (it may throw: a
     * `where` or `subject` function is the app's code); the effect returned persists and notifies
     * what the change caused, and is `Effect.void` when there is nothing to run (most writes).
     */
    const applyChange = (event: ChangeEvent): Effect.Effect<void> => {
      const first = event.table === CostEvents.name
        ? applyCost(event)
        : event.table === ExpectationState.name
        ? adoptState(event)
        : Effect.void
      const second = applyExpectations(event)
      const third = applyExperiments(event)
      return first === Effect.void && second === Effect.void && third === Effect.void
        ? Effect.void
        : Effect.zipRight(first, Effect.zipRight(second, third))
    }

    // ---- boot ----------------------------------------------------------------------------------
    // The change listener is registered before the boot scan (the plugin host subscribes first),
    // so no write is missed between the scan and the listener. Changes arriving during the boot
    // are held, then replayed after it, skipping those the scan already read: a table is read in
    // id-ordered pages, and a change that arrived before the page covering its row was read is in
    // that page.
    /** Changes that arrived during the boot, in order; null once the boot replayed them. */
    let arrivals: Array<ChangeEvent> | null = []
    interface PageRead {
      /** The page's last id; null for the last page (it covers every id after the previous one). */
      readonly lastId: string | null
      /** Changes that had arrived when the read was sent: all in the page. */
      readonly sent: number
      /** Changes that had arrived when the page came back: the ones after are not in it. */
      readonly received: number
      /** Rows of the page changed by a change that arrived during the read (encoded), to tell. */
      readonly racing: ReadonlyMap<string, Readonly<Record<string, unknown>>>
    }
    /** Per scanned table: the pages read, in id order. */
    const pagesRead = new Map<string, Array<PageRead>>()

    /** Reads `table` page by page (as the system), feeding each row to `consume`. */
    const scan = (table: Table.Any, consume: (row: Readonly<Record<string, unknown>>) => void) =>
      Effect.gen(function*() {
        const pages: Array<PageRead> = []
        pagesRead.set(table.name, pages)
        const codec = RowCodec.of(table)
        let after: string | null = null
        while (true) {
          const options = { orderBy: "id", limit: bootPageSize, ...(after === null ? {} : { where: { id: { gt: after } } }) }
          const sent = arrivals!.length
          const rows = (yield* store.find(table, options as never)) as ReadonlyArray<Readonly<Record<string, unknown>>>
          const received = arrivals!.length
          const racing = new Map<string, Readonly<Record<string, unknown>>>()
          if (received > sent) {
            const ids = new Set(arrivals!.slice(sent, received).filter((event) => event.table === table.name).map((event) => event.id))
            for (const row of rows) {
              const encoded = ids.has(row.id as string) ? codec.encode(row) : undefined
              if (encoded !== undefined && Either.isRight(encoded)) racing.set(row.id as string, encoded.right)
            }
          }
          for (const row of rows) consume(row)
          const last = rows.length < bootPageSize
          if (!last) after = rows[rows.length - 1]!.id as string
          pages.push({ lastId: last ? null : after, sent, received, racing })
          if (last) return
        }
      }).pipe(Subject.asSystem)

    /**
     * Whether the boot scan already read the change that arrived `index`-th: it arrived before the
     * read of its row's page was sent, or during that read and the page holds its result (or a later one).
     */
    const scanned = (event: ChangeEvent, index: number) => {
      const pages = pagesRead.get(event.table)
      if (pages === undefined) return false
      const page = pages.find((page) => page.lastId === null || compareIds(event.id, page.lastId) <= 0)
      if (page === undefined || index >= page.received) return false
      if (index < page.sent) return true
      const read = page.racing.get(event.id) ?? null
      for (let i = index; i < page.received; i++) {
        const later = arrivals![i]!
        if (later.table === event.table && later.id === event.id && sameRow(later.after, read)) return true
      }
      return false
    }

    /** Scans every watched table once, then replays the changes that arrived meanwhile and the scan missed. */
    const boot = Effect.gen(function*() {
      const scans = new Map<string, { table: Table.Any; consumers: Array<(row: Readonly<Record<string, unknown>>) => void> }>()
      const consumer = (table: Table.Any, consume: (row: Readonly<Record<string, unknown>>) => void) => {
        const entry = scans.get(table.name) ?? { table, consumers: [] }
        entry.consumers.push(consume)
        scans.set(table.name, entry)
      }
      for (const runtimes of expectationsByTable.values()) {
        consumer(runtimes[0]!.definition.table, (row) => {
          for (const runtime of runtimes) runtime.counters.apply(null, row)
        })
      }
      consumer(CostEvents, (row) => bootCost(row as typeof CostEvents.schema.Type))
      for (const list of talliesByTable.values()) {
        consumer(list[0]!.experiment.table, (row) => {
          for (const tally of list) tally.apply(null, row, bootedAt)
        })
      }
      for (const [tableName, { consumers, table }] of scans) {
        yield* scan(table, (row) => {
          for (const consume of consumers) consume(row)
        }).pipe(Effect.catchAllCause((cause) =>
          tableName === CostEvents.name
            ? Effect.failCause(cause)
            : Effect.logWarning(`standing primitives on "${tableName}": boot scan failed`, cause)
        ))
      }
      yield* bootExpectations
      yield* bootBudgets
      // Replayed in arrival order; changes arriving during the replay join its end.
      for (let index = 0; index < arrivals!.length; index++) {
        const event = arrivals![index]!
        if (!scanned(event, index)) yield* applyChange(event)
      }
      arrivals = null
      pagesRead.clear()
    })

    /**
     * Handles a committed change on the writer's fiber: counted at once (or held while the boot
     * runs); the effect returned is what is left to run, `Effect.void` when nothing is. A throw from
     * the app's code (`where`, `subject`) fails that effect instead, as a defect.
     */
    const onChange = (event: ChangeEvent): Effect.Effect<void> => {
      if (!watched.has(event.table)) return Effect.void
      if (arrivals !== null) {
        arrivals.push(event)
        return Effect.void
      }
      try {
        return applyChange(event)
      } catch (defect) {
        return Effect.die(defect)
      }
    }

    const background: Effect.Effect<void, never, Scope.Scope> = Effect.gen(function*() {
      for (const runtime of expectations.values()) {
        if (runtime.definition.invariant.kind === "freshness") yield* Effect.forkScoped(freshnessLoop(runtime))
      }
      for (const budget of config.budgets) {
        if (budget.window !== undefined) yield* Effect.forkScoped(rolloverLoop(budget))
      }
      if (prunable) yield* Effect.forkScoped(pruneLoop)
    })

    const expectationRegistry: Registries.ExpectationRegistryShape = {
      snapshot: () => Effect.sync(() => [...expectations.values()].map(observation)),
      get: (name) => Effect.sync(() => {
        const runtime = expectations.get(name)
        return runtime === undefined ? null : observation(runtime)
      }),
      violations: () => Effect.sync(() => [...expectations.values()].filter((r) => r.status === "violated").map(observation)),
      subscribe: expectationListeners.subscribe
    }

    const costRegistry: Registries.CostRegistryShape = {
      record,
      metered: config.budgets.length > 0,
      attribution: () => Effect.sync(() => [...tenants].map(([id, tenant]) => attributionOf(id, tenant))),
      tenant: (tenantId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const tenant = tenants.get(tenantId)
          if (tenant === undefined) return null
          return { ...attributionOf(tenantId, tenant), budgets: config.budgets.map((budget) => budgetObservation(budget, tenantId, now)) }
        }),
      budgets: () =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          config.budgets.map((budget) => ({
            name: budget.name,
            limit: budget.limit,
            unit: budget.unit ?? null,
            warnAt: budget.warnAt,
            window: windowLabel(budget.window),
            severity: budget.severity,
            tenants: [...budgetTenants.get(budget.name)!.keys()].map((tenantId) => budgetObservation(budget, tenantId, now))
          }))),
      budget: (name, tenantId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const budget = config.budgets.find((b) => b.name === name)
          return budget === undefined ? null : budgetObservation(budget, tenantId, now)
        }),
      breaches: () =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          config.budgets.flatMap((budget) =>
            [...budgetTenants.get(budget.name)!.keys()]
              .map((tenantId) => budgetObservation(budget, tenantId, now))
              .filter((observed) => observed.status !== "ok")
          )),
      subscribe: costListeners.subscribe
    }

    const experimentRegistry: Registries.ExperimentRegistryShape = {
      snapshot: () => Effect.sync(() => [...tallies.values()].map((tally) => tally.readout())),
      get: (name) => Effect.sync(() => tallies.get(name)?.readout() ?? null),
      subscribe: experimentListeners.subscribe
    }

    const context = Context.make(Registries.ExpectationRegistry, expectationRegistry).pipe(
      Context.add(Registries.CostRegistry, costRegistry),
      Context.add(Registries.ExperimentRegistry, experimentRegistry)
    )

    return { boot, prune, onChange, onLivePush, background, context, expectations: expectationRegistry, costs: costRegistry, experiments: experimentRegistry }
  })

/** A running engine. */
export type Engine = Effect.Effect.Success<ReturnType<typeof make>>
