/**
 * The caller of a request: who they are, which tenant they act in, and what they may do.
 * The resolved Subject of a request is the only source of the tenant.
 */
import { Context, Effect, FiberRef, Option } from "effect"
import { dual } from "effect/Function"

/** A resolved caller. `tenantId` is null for tenant-less subjects (system jobs, anonymous callers). */
export interface Subject {
  readonly type: string
  readonly id: string
  readonly tenantId: string | null
  readonly metadata: Readonly<Record<string, unknown>>
  readonly scopes: ReadonlyArray<string>
}

/** Builds a Subject, defaulting `metadata` and `scopes` to empty. */
export const make = (input: {
  readonly type: string
  readonly id: string
  readonly tenantId: string | null
  readonly metadata?: Readonly<Record<string, unknown>>
  readonly scopes?: ReadonlyArray<string>
}): Subject => ({
  type: input.type,
  id: input.id,
  tenantId: input.tenantId,
  metadata: input.metadata ?? {},
  scopes: input.scopes ?? []
})

/** The anonymous caller: no identity, no tenant, no scopes. */
export const anonymous: Subject = make({ type: "anonymous", id: "anonymous", tenantId: null })

/** True when the subject carries `scope`, or the wildcard scope `*`. */
export const hasScope = (subject: Subject, scope: string): boolean =>
  subject.scopes.includes("*") || subject.scopes.includes(scope)

/**
 * The subject the current fiber acts for. `None` means system code, which may read and write
 * across tenants; `Some` scopes every store operation on tenant tables to the subject's tenant.
 */
export const currentSubject: FiberRef.FiberRef<Option.Option<Subject>> = FiberRef.unsafeMake<Option.Option<Subject>>(
  Option.none()
)

/** Runs `effect` acting for `subject` (tenant-scoped store access). */
export const actingAs: {
  (subject: Subject): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(effect: Effect.Effect<A, E, R>, subject: Subject): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(effect: Effect.Effect<A, E, R>, subject: Subject): Effect.Effect<A, E, R> =>
    Effect.locally(effect, currentSubject, Option.some(subject))
)

/** Runs `effect` as the system: no tenant scoping. */
export const asSystem = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(effect, currentSubject, Option.none())

/** The Subject resolved for the current request, provided by the transports to handlers. */
export class CurrentSubject extends Context.Tag("@fw/framework/Subject/CurrentSubject")<CurrentSubject, Subject>() {}
