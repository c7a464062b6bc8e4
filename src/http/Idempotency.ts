/**
 * Idempotent mutating requests (spec 3.6): the first request with a key runs; a request with the
 * same key while it runs gets 409; after it completed, the first response is replayed verbatim
 * (without `Set-Cookie`) with `Idempotency-Replayed: true` until the TTL lapses. The scope is
 * (tenant, method, path, key) plus a fingerprint of the body: the same key with another body is 422.
 * The claim is an atomic insert, so it holds across replicas sharing a database.
 */
import { Clock, Effect, Option } from "effect"
import { createHash } from "node:crypto"
import type { StoreShape } from "../kernel/Store.js"
import * as Subject from "../kernel/Subject.js"
import { IdempotencyRecords } from "./tables.js"

/** Resolved idempotency settings. */
export interface Settings {
  /** Lower-case header name. */
  readonly header: string
  readonly ttlMs: number
}

/** `idempotency: true | {header, ttlMs}` → settings, or undefined when off. */
export const settingsOf = (option: boolean | { readonly header?: string; readonly ttlMs?: number }): Settings | undefined =>
  option === false
    ? undefined
    : {
      header: (option === true ? undefined : option.header)?.toLowerCase() ?? "idempotency-key",
      ttlMs: (option === true ? undefined : option.ttlMs) ?? 86_400_000
    }

/** The outcome of a claim. */
export type Claim =
  | { readonly _tag: "Claimed"; readonly id: string }
  | { readonly _tag: "InFlight" }
  | { readonly _tag: "Mismatch" }
  | {
    readonly _tag: "Replay"
    readonly status: number
    readonly headers: Readonly<Record<string, string>>
    readonly body: string
  }

const digest = (value: string | Uint8Array) => createHash("sha256").update(value).digest("hex")

/** The record id of a key in its scope. */
export const recordId = (tenantId: string | null, method: string, path: string, key: string) =>
  digest(JSON.stringify([tenantId, method, path, key]))

/** Claims `id` for a request whose body has `fingerprint` (as the system: the scope is in the id). */
export const claim = (store: StoreShape, id: string, body: Uint8Array, ttlMs: number): Effect.Effect<Claim> =>
  Effect.gen(function*() {
    const fingerprint = digest(body)
    const now = yield* Clock.currentTimeMillis
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = yield* Effect.either(store.insert(IdempotencyRecords, {
        id,
        state: "inFlight",
        fingerprint,
        expiresAt: now + ttlMs,
        status: null,
        headers: null,
        body: null
      }))
      if (inserted._tag === "Right") return { _tag: "Claimed", id } as const
      const existing = yield* store.get(IdempotencyRecords, id)
      if (Option.isNone(existing)) continue
      const record = existing.value
      if (record.expiresAt <= now) {
        // Lapsed (for example after a crash between commit and completion): the key may run again.
        yield* Effect.ignore(store.delete(IdempotencyRecords, id))
        continue
      }
      if (record.fingerprint !== fingerprint) return { _tag: "Mismatch" } as const
      if (record.state === "inFlight") return { _tag: "InFlight" } as const
      return { _tag: "Replay", status: record.status ?? 200, headers: record.headers ?? {}, body: record.body ?? "" } as const
    }
    return { _tag: "InFlight" } as const
  }).pipe(Effect.orDie, Subject.asSystem)

/** Stores the response of a claimed request for replay. */
export const complete = (
  store: StoreShape,
  id: string,
  response: { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string }
) =>
  store.update(IdempotencyRecords, id, {
    state: "completed",
    status: response.status,
    headers: Object.fromEntries(Object.entries(response.headers).filter(([name]) => name.toLowerCase() !== "set-cookie")),
    body: response.body
  }).pipe(Effect.ignore, Subject.asSystem)

/** Gives a claimed key back (the request failed before or in a way that must not be replayed). */
export const release = (store: StoreShape, id: string) =>
  store.delete(IdempotencyRecords, id).pipe(Effect.ignore, Subject.asSystem)
