/**
 * Tenant scoping of store operations. A fiber acting for a Subject (see `Subject.actingAs`) sees and
 * writes only its own tenant's rows in tables with a `tenantField`; system code (no Subject) is
 * unscoped; a Subject without a tenant sees nothing there and cannot write there.
 */
import type { Fiber } from "effect"
import { Effect, FiberRef, Option } from "effect"
import type * as Driver from "./Driver.js"
import { TenantViolation } from "../Errors.js"
import * as Subject from "../Subject.js"
import type * as Table from "../schema/Table.js"

/** The scope of the current fiber on one table: unscoped, or confined to a tenant (null: to none). */
export type Scope =
  | { readonly _tag: "Unscoped" }
  | { readonly _tag: "Confined"; readonly field: string; readonly tenantId: string | null }

const unscoped: Scope = { _tag: "Unscoped" }

/** The scope of the current fiber on `table`. */
export const of = (table: Table.Any): Effect.Effect<Scope> => {
  const field = table.tenantField
  if (field === undefined) return Effect.succeed(unscoped)
  return Effect.map(FiberRef.get(Subject.currentSubject), (subject): Scope =>
    Option.isNone(subject) ? unscoped : { _tag: "Confined", field, tenantId: subject.value.tenantId })
}

/** The scope on `table` of the computation running in `fiber` (synchronously, inside a fiber step). */
export const ofFiber = (fiber: Fiber.RuntimeFiber<unknown, unknown>, table: Table.Any): Scope => {
  const field = table.tenantField
  if (field === undefined) return unscoped
  const subject = fiber.getFiberRef(Subject.currentSubject)
  return Option.isNone(subject) ? unscoped : { _tag: "Confined", field, tenantId: subject.value.tenantId }
}

/** The condition a scoped read adds, if any. A tenant-less Subject matches no row (`id in []`). */
export const clause = (scope: Scope): Driver.Clause | undefined =>
  scope._tag === "Unscoped"
    ? undefined
    : scope.tenantId === null
    ? { field: "id", op: "in", value: [] }
    : { field: scope.field, op: "eq", value: scope.tenantId }

/** True when a stored row is visible in `scope`. */
export const sees = (scope: Scope, row: Driver.Encoded): boolean =>
  scope._tag === "Unscoped" || (scope.tenantId !== null && row[scope.field] === scope.tenantId)

/** Why a write of `row` is refused in `scope` (its row names another tenant), if it is. */
export const violation = (table: Table.Any, scope: Scope, row: Driver.Encoded): TenantViolation | undefined => {
  if (scope._tag === "Unscoped") return undefined
  if (scope.tenantId === null) {
    return new TenantViolation({ table: table.name, message: "a caller without a tenant cannot write a tenant table" })
  }
  if (row[scope.field] === scope.tenantId) return undefined
  return new TenantViolation({
    table: table.name,
    message: `the row names another tenant in "${scope.field}" than the caller's ("${scope.tenantId}")`
  })
}

/** Refuses a write whose row names a tenant other than the scope's. */
export const checkWrite = (table: Table.Any, scope: Scope, row: Driver.Encoded): Effect.Effect<void, TenantViolation> => {
  const refused = violation(table, scope, row)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

/** The tenant a row belongs to, for change events (null for tables without a tenant field). */
export const tenantOf = (table: Table.Any, row: Driver.Encoded | null): string | null => {
  if (table.tenantField === undefined || row === null) return null
  const value = row[table.tenantField]
  return typeof value === "string" ? value : null
}
