/**
 * Shared live-query groups: identical live subscriptions (same procedure, input and subject: hence
 * tenant and scopes) share one change subscription and one handler re-run per relevant change.
 * Each member still re-resolves its caller and re-runs the guards and interceptors before every
 * push (the runtime's `live` does that around the group's `latest` result).
 */
import { Chunk, Effect, Exit, Queue, Schema, Scope } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type * as Subject from "../kernel/Subject.js"
import type * as Procedure from "./Procedure.js"

/** A plugin's live source changed (see `Plugin.LiveSource`). */
export interface SourceSignal {
  readonly _tag: "SourceSignal"
  readonly name: string
}

/**
 * One shared re-run of a live query's handler: its outcome, and its encoded result (and that
 * result's JSON) once a member needed it. Its identity is what members share work by.
 */
export interface SharedRun {
  readonly exit: Exit.Exit<unknown, unknown>
  readonly tables: ReadonlySet<string>
  encoded: { readonly value: unknown; readonly json: string } | undefined
}

/**
 * Identical live subscriptions share one change subscription and one handler re-run per relevant
 * change; each member still re-resolves its caller and re-runs the guards and interceptors before
 * every push.
 */
export interface LiveGroup {
  members: number
  readonly scope: Scope.CloseableScope
  /** Tables read by the handler, or by any member's guards: a change to one of them is relevant. */
  readonly tables: Set<string>
  /** False until the first member's first run told which tables matter: every change counts till then. */
  known: boolean
  latest: SharedRun | undefined
  /** Each member's wake-up, opened when `latest` changes. */
  readonly waiting: Set<Effect.Latch>
  /**
   * Members' wake-up calls, called synchronously (after the latches opened) when `latest` changes:
   * a member that can push without running an effect does it in this pass.
   */
  readonly wakers: Set<() => void>
}

/**
 * The input's part of a share key: the procedure and the decoded input encoded back (so excess
 * properties and spellings do not split groups). `undefined` when the input cannot be encoded.
 */
export const inputKey = (procedure: Procedure.Any, input: unknown): string | undefined => {
  try {
    return JSON.stringify([procedure.tag, Schema.encodeUnknownSync(procedure.input)(input)])
  } catch {
    return undefined
  }
}

/**
 * What makes two live subscriptions identical: the procedure and input (`inputKey`) and the whole
 * subject the handler sees. `undefined` when the input or subject cannot be keyed (the
 * subscription runs on its own).
 */
export const shareKey = (inputKey: string | undefined, subject: Subject.Subject): string | undefined => {
  if (inputKey === undefined) return undefined
  try {
    return JSON.stringify([inputKey, subject.type, subject.id, subject.tenantId, [...subject.scopes].sort(), subject.metadata])
  } catch {
    return undefined
  }
}

/** A group's shared handler re-run: its result and the tables it read, as an exit. */
export type Rerun = Effect.Effect<Exit.Exit<[unknown, ReadonlySet<string>], unknown>>

/** The registry of a runtime's live groups. */
export interface LiveGroups {
  /**
   * Joins (or starts) the group of identical subscriptions under `key`: one change subscription
   * and one `rerun` per relevant change, shared by every member. Released with the scope; the last
   * member out closes the group.
   */
  readonly join: (key: string, tenantId: string | null, rerun: Rerun) => Effect.Effect<LiveGroup, never, Scope.Scope>
}

/**
 * The live groups of a runtime, over its committed changes (merged with the plugins' live sources)
 * and the tenant field of each table.
 */
export const make = (
  subscribeChanges: Effect.Effect<Queue.Dequeue<ChangeEvent | SourceSignal>, never, Scope.Scope>,
  tenantFields: ReadonlyMap<string, string | undefined>
): LiveGroups => {
  const groups = new Map<string, LiveGroup>()

  /** Starts a group: its change subscription and the fiber that re-runs the handler, both in the group's scope. */
  const start = (group: LiveGroup, scope: Scope.CloseableScope, tenant: string | null, rerun: Rerun) =>
    Effect.gen(function*() {
      // Subscribe before any member's first run, so a change committed during it is not missed.
      const changes = yield* Scope.extend(subscribeChanges, scope)
      // A change concerns the group's tenant when the row belongs to it after the write, or
      // did before (a row moved to another tenant must leave this tenant's result).
      const relevant = (event: ChangeEvent | SourceSignal) => {
        if (!group.known) return true
        if ("_tag" in event) return group.tables.has(event.name)
        if (!group.tables.has(event.table)) return false
        if (event.tenantId === null || event.tenantId === tenant) return true
        const field = tenantFields.get(event.table)
        return field !== undefined && event.before !== null && event.before[field] === tenant
      }
      // Changes are drained as they come, whether or not the members take their pushes: they
      // only mark the result stale, so a slow member holds one flag, never a queue of events.
      const stale = yield* Effect.makeLatch(false)
      yield* Queue.takeBetween(changes, 1, Number.MAX_SAFE_INTEGER).pipe(
        Effect.flatMap((batch) => Chunk.some(batch, relevant) ? stale.open : Effect.void),
        Effect.forever,
        Effect.forkIn(scope)
      )
      yield* Effect.gen(function*() {
        yield* stale.await
        yield* stale.close
        const exit = yield* rerun
        const tables = Exit.isSuccess(exit) ? exit.value[1] : new Set<string>()
        for (const table of tables) group.tables.add(table)
        group.latest = { exit: Exit.map(exit, ([result]) => result), tables, encoded: undefined }
        // Woken in one synchronous pass: a thousand members cost a thousand latch flips, not effects.
        for (const wake of group.waiting) wake.unsafeOpen()
        for (const wake of group.wakers) wake()
      }).pipe(Effect.forever, Effect.forkIn(scope))
    })

  const join = (key: string, tenantId: string | null, rerun: Rerun): Effect.Effect<LiveGroup, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.gen(function*() {
        const existing = groups.get(key)
        if (existing !== undefined) {
          existing.members += 1
          return existing
        }
        const scope = yield* Scope.make()
        const group: LiveGroup = {
          members: 1,
          scope,
          tables: new Set(),
          known: false,
          latest: undefined,
          waiting: new Set(),
          wakers: new Set()
        }
        groups.set(key, group)
        yield* Effect.interruptible(start(group, scope, tenantId, rerun)).pipe(
          // An interrupted start leaves nothing behind.
          Effect.onInterrupt(() => Effect.suspend(() => {
            groups.delete(key)
            return Scope.close(scope, Exit.void)
          }))
        )
        return group
      }),
      (group) =>
        Effect.suspend(() => {
          group.members -= 1
          if (group.members > 0) return Effect.void
          groups.delete(key)
          return Scope.close(group.scope, Exit.void)
        })
    )

  return { join }
}
