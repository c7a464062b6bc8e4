/**
 * The cost ledger and budgets of one store: per-tenant attribution (total, per unit, per
 * subscription) folded from the append-only ledger, each budget's tenants in their current window
 * with one notification per threshold per window, window rollover and ledger retention on the
 * Effect `Clock`, and recording cost (from handlers and live pushes).
 *
 * The ledger is a table, so the totals are the same fold on every replica and after a restart.
 */
import type { Scope } from "effect"
import { Clock, Duration, Effect } from "effect"
import type { LivePush } from "../app/Plugin.js"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { StoreError } from "../kernel/Errors.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as Sleep from "../kernel/Sleep.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import * as BootScan from "./BootScan.js"
import * as CostBudget from "./CostBudget.js"
import { CostInvalid } from "./Errors.js"
import * as Listeners from "./Listeners.js"
import type * as Registries from "./Registries.js"
import { CostEvents } from "./tables.js"

/** The unit of recompute cost. */
export const recomputeUnit = "recompute"

/** A tenant's attribution over the costs the ledger holds. */
interface TenantCost {
  total: number
  readonly byUnit: Map<string, number>
  readonly bySubscription: Map<string, number>
}

/** A tenant's state in one budget's current window. */
interface BudgetTenant {
  start: number
  end: number
  spent: number
  status: CostBudget.Status
  since: number | null
}

const rank: Record<CostBudget.Status, number> = { ok: 0, warn: 1, exceeded: 2 }

const windowLabel = (window: CostBudget.Window | undefined): string | null =>
  window === undefined ? null : typeof window === "string" ? window : Duration.format(Duration.decode(window))

/** Builds the ledger's attribution and the states of `budgets` over `store`; `bootedAt` is when the engine started. */
export const make = (budgets: ReadonlyArray<CostBudget.CostBudget>, store: StoreShape, bootedAt: number) =>
  Effect.gen(function*() {
    const costListeners = yield* Listeners.make<Registries.BudgetCrossing>()
    const tenants = new Map<string, TenantCost>()
    const budgetTenants = new Map<string, Map<string, BudgetTenant>>()
    for (const budget of budgets) budgetTenants.set(budget.name, new Map())

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
    const current = new Map(budgets.map((budget) => [budget.name, CostBudget.windowOf(budget, bootedAt)] as const))
    const bootCost = (row: typeof CostEvents.schema.Type) => {
      attribute(row)
      for (const budget of budgets) {
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
      for (const budget of budgets) {
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
        for (const budget of budgets) {
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
        // A month is longer than Effect's live clock can wait in one sleep: waited in steps.
        yield* Sleep.sleepUntil(end)
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
    const prunable = budgets.length > 0 && budgets.every((budget) => budget.window !== undefined)
    const retainedFrom = (now: number) => Math.min(...budgets.map((budget) => CostBudget.windowOf(budget, now).start))

    /** Deletes ledger rows older than the retention, a page at a time; returns how many. */
    const prune = Effect.gen(function*() {
      const cutoff = retainedFrom(yield* Clock.currentTimeMillis)
      let deleted = 0
      while (true) {
        const old = yield* store.find(CostEvents, { where: { at: { lt: cutoff } }, orderBy: "at", limit: BootScan.pageSize })
        // Another replica may prune the same rows: a row already gone is skipped.
        yield* Effect.forEach(old, (row) => store.delete(CostEvents, row.id).pipe(Effect.catchTag("RowNotFound", () => Effect.void)), { discard: true })
        deleted += old.length
        if (old.length < BootScan.pageSize) return deleted
      }
    }).pipe(Subject.asSystem)

    /**
     * Prunes now, then whenever a window ends (the retention can only move then). The next end is
     * the one after the time the prune started: a window end passed while it ran (a large ledger,
     * a slow database) is pruned for at once rather than skipped until the following one.
     */
    const pruneLoop = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      yield* prune.pipe(Effect.catchAllCause((cause) => Effect.logWarning("cost ledger: pruning failed; retried at the next window end", cause)))
      const next = Math.min(...budgets.map((budget) => CostBudget.windowOf(budget, now).end))
      yield* Sleep.sleepUntil(next)
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

    const record = (cost: Registries.Cost): Effect.Effect<void, CostInvalid | StoreError> =>
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
      if (budgets.length === 0 || push.tenantId === null || push.tables.has(CostEvents.name)) return Effect.void
      return record({
        tenantId: push.tenantId,
        unit: recomputeUnit,
        amount: 1,
        subscription: `${push.procedure}:${push.subscriptionId}`
      })
    }

    const costRegistry: Registries.CostRegistryShape = {
      record,
      metered: budgets.length > 0,
      attribution: () => Effect.sync(() => [...tenants].map(([id, tenant]) => attributionOf(id, tenant))),
      tenant: (tenantId) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const tenant = tenants.get(tenantId)
          if (tenant === undefined) return null
          return { ...attributionOf(tenantId, tenant), budgets: budgets.map((budget) => budgetObservation(budget, tenantId, now)) }
        }),
      budgets: () =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          budgets.map((budget) => ({
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
          const budget = budgets.find((b) => b.name === name)
          return budget === undefined ? null : budgetObservation(budget, tenantId, now)
        }),
      breaches: () =>
        Effect.map(Clock.currentTimeMillis, (now) =>
          budgets.flatMap((budget) =>
            [...budgetTenants.get(budget.name)!.keys()]
              .map((tenantId) => budgetObservation(budget, tenantId, now))
              .filter((observed) => observed.status !== "ok")
          )),
      subscribe: costListeners.subscribe
    }

    /** Rollover of every windowed budget and, when every budget has a window, ledger retention; forked for the lifetime of the scope. */
    const background: Effect.Effect<void, never, Scope.Scope> = Effect.gen(function*() {
      for (const budget of budgets) {
        if (budget.window !== undefined) yield* Effect.forkScoped(rolloverLoop(budget))
      }
      if (prunable) yield* Effect.forkScoped(pruneLoop)
    })

    return {
      /** Boot scan: the whole ledger. */
      consumers: [{ table: CostEvents, consume: (row) => bootCost(row as typeof CostEvents.schema.Type) }] as ReadonlyArray<BootScan.Consumer>,
      /** After the boot scan: each tenant's status in its budgets' current windows. */
      boot: bootBudgets,
      /** Applies a change of the ledger; the effect notifies the crossings. */
      apply: applyCost,
      prune,
      onLivePush,
      background,
      registry: costRegistry
    }
  })
