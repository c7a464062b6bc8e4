/**
 * One-time message ids: the ids the SP issued (AuthnRequest, LogoutRequest), each consumed at most
 * once by the answer that names it, and the ids it has seen (assertions, IdP LogoutRequests),
 * each accepted once until it expires. `inProcess` serves one replica; `stored` keeps them in an
 * app table through the Store, so every replica on the same database agrees.
 */
import { Effect, Option } from "effect"
import type { StoreError } from "../kernel/Errors.js"
import { Store } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type { SamlLogout, SamlReplay } from "./tables.js"

/** The id families. */
export type Kind = "request" | "assertion" | "logout" | "idp-logout"

/** The one-time id operations. */
export interface OneTimeIds {
  /** Remembers an id the SP issued, until `expiresAt`. */
  readonly issue: (kind: Kind, id: string, expiresAt: number) => Effect.Effect<void, StoreError, Store>
  /** Consumes an issued id: true once for a live id, false when unknown, expired or already consumed. */
  readonly consume: (kind: Kind, id: string, now: number) => Effect.Effect<boolean, StoreError, Store>
  /** Records an id a message carried: true the first time, false while an earlier sighting is live. */
  readonly firstSight: (kind: Kind, id: string, expiresAt: number, now: number) => Effect.Effect<boolean, StoreError, Store>
  /** Forgets expired ids. */
  readonly sweep: (now: number) => Effect.Effect<void, StoreError, Store>
}

const key = (kind: Kind, id: string) => `${kind}:${id}`

/** Ids in this process only (one replica). */
export const inProcess = (): OneTimeIds => {
  const live = new Map<string, number>()
  const alive = (name: string, now: number) => (live.get(name) ?? Number.NEGATIVE_INFINITY) > now
  return {
    issue: (kind, id, expiresAt) => Effect.sync(() => void live.set(key(kind, id), expiresAt)),
    consume: (kind, id, now) =>
      Effect.sync(() => {
        const name = key(kind, id)
        const wasAlive = alive(name, now)
        live.delete(name)
        return wasAlive
      }),
    firstSight: (kind, id, expiresAt, now) =>
      Effect.sync(() => {
        const name = key(kind, id)
        if (alive(name, now)) return false
        live.set(name, expiresAt)
        return true
      }),
    sweep: (now) =>
      Effect.sync(() => {
        for (const [name, expiresAt] of live) if (expiresAt <= now) live.delete(name)
      })
  }
}

/** Ids in `table`, shared by every replica on the app's database. */
export const stored = (table: typeof SamlReplay | typeof SamlLogout): OneTimeIds => {
  const system = <A, E>(effect: Effect.Effect<A, E, Store>) => Subject.asSystem(effect)
  return {
    issue: (kind, id, expiresAt) =>
      system(Effect.flatMap(Store, (store) => store.insert(table, { id: key(kind, id), kind, expiresAt }))).pipe(Effect.asVoid),
    consume: (kind, id, now) =>
      system(Effect.flatMap(Store, (store) =>
        store.transaction(Effect.gen(function*() {
          const row = yield* store.get(table, key(kind, id))
          if (Option.isNone(row)) return false
          // Of two replicas consuming at once, the second delete finds no row: consumed once.
          const deleted = yield* store.delete(table, row.value.id).pipe(
            Effect.as(true),
            Effect.catchTag("RowNotFound", () => Effect.succeed(false))
          )
          return deleted && row.value.expiresAt > now
        })))),
    firstSight: (kind, id, expiresAt, now) =>
      system(Effect.flatMap(Store, (store) =>
        store.insert(table, { id: key(kind, id), kind, expiresAt }).pipe(
          Effect.as(true),
          Effect.catchTag("DuplicateRow", () =>
            store.transaction(Effect.gen(function*() {
              const earlier = yield* store.get(table, key(kind, id))
              if (Option.isSome(earlier) && earlier.value.expiresAt > now) return false
              yield* store.upsert(table, { id: key(kind, id), kind, expiresAt })
              return true
            })))
        ))),
    sweep: (now) =>
      system(Effect.flatMap(Store, (store) =>
        store.find(table, { where: { expiresAt: { lte: now } }, limit: 500 }).pipe(
          Effect.flatMap(Effect.forEach((row) => store.delete(table, row.id).pipe(Effect.catchTag("RowNotFound", () => Effect.void)))),
          Effect.asVoid
        )))
  }
}
