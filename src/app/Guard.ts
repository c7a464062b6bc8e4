/**
 * Guards: checks that run after input decode and subject resolution, before the handler.
 * A guard returns nothing to proceed, or `{status, message}` to refuse.
 */
import { Effect, Schema } from "effect"
import type { Headers } from "@effect/platform"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"

/** The context a guard (and a handler) sees. */
export interface Context {
  readonly subject: Subject.Subject
  readonly headers: Headers.Headers
  readonly store: StoreShape
}

/** A refusal: the HTTP status and a message safe to show the client. */
export interface Refusal {
  readonly status: number
  readonly message: string
}

/**
 * A guard: sync or effectful, returning a refusal or nothing. An effectful guard may also fail
 * with `FlagDisabled` (the `requireFlag` guard of the flags plugin), which reaches the client as is.
 */
export type Guard = (ctx: Context) => Refusal | void | undefined | Effect.Effect<Refusal | void | undefined, FlagDisabled>

/** The typed failure a refused guard produces (carried over rpc and mapped to its status over HTTP). */
export class GuardRefused extends Schema.TaggedError<GuardRefused>()("GuardRefused", {
  status: Schema.Number,
  message: Schema.String
}) {}

/**
 * A feature flag is off for the caller: a procedure gated by it (`gatedBy`) or a `requireFlag` guard
 * refused before the handler ran. Part of every procedure's wire-error union (status 403).
 */
export class FlagDisabled extends Schema.TaggedError<FlagDisabled>()("FlagDisabled", {
  flag: Schema.String
}) {
  override get message() {
    return `the feature "${this.flag}" is not enabled for this caller`
  }
}

/**
 * What a guard asks of the caller, as the OpenAPI documents state it: whether it admits only an
 * authenticated caller, and the scopes it requires (listed as the operation's security roles).
 */
export interface Requirement {
  readonly authenticated: boolean
  readonly scopes: ReadonlyArray<string>
}

// A side table rather than a field: a guard is a plain function, and app guards stay one.
const requirements = new WeakMap<Guard, Requirement>()

/**
 * `guard`, recorded as requiring `requirement` (for the OpenAPI documents: an operation behind it
 * names the app's security schemes and its 401/403). Returns the same guard.
 */
export const describe = <G extends Guard>(guard: G, requirement: Requirement): G => {
  requirements.set(guard, requirement)
  return guard
}

/** What `guard` was described as requiring (`describe`); undefined for an undescribed guard. */
export const requirementOf = (guard: Guard): Requirement | undefined => requirements.get(guard)

/** Refuses with 403 unless the subject carries `scope` (the scope `*` bypasses). */
export const requireScope = (scope: string): Guard =>
  describe(
    (ctx) => Subject.hasScope(ctx.subject, scope) ? undefined : { status: 403, message: `missing scope "${scope}"` },
    // An anonymous caller has no scopes: only a credential can pass.
    { authenticated: true, scopes: [scope] }
  )

/** Refuses with 401 when the caller is anonymous. */
export const requireAuthenticated: Guard = describe(
  (ctx) => ctx.subject.type === "anonymous" ? { status: 401, message: "authentication required" } : undefined,
  { authenticated: true, scopes: [] }
)

/** Runs guards in order; the first refusal fails with `GuardRefused`. */
export const runGuards = (guards: ReadonlyArray<Guard>, ctx: Context): Effect.Effect<void, GuardRefused | FlagDisabled> =>
  guards.length === 0 ? Effect.void : Effect.gen(function*() {
    for (const guard of guards) {
      const result = guard(ctx)
      const refusal = Effect.isEffect(result) ? yield* result : result
      if (refusal) return yield* new GuardRefused({ status: refusal.status, message: refusal.message })
    }
  })
