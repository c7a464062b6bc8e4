/**
 * The idempotency binding (spec 3.6, 4.5 rule 3): with the app option `idempotency` on, a mutating
 * request (POST, PUT, PATCH, DELETE) carrying the key header is run once per scope
 * (tenant, method, path, key). A second request with the key gets 409 while the first runs, the
 * first response verbatim with `Idempotency-Replayed: true` once it completed (every header but
 * `Set-Cookie` and per-request ones), and 422 when its method, path, query or body differ from the
 * first. Failures before the handler (decode, guards, 413) do not consume the key. Once the handler
 * ran, its answer is kept whatever its status, unless it is a 5xx and nothing was committed (then
 * the claim is released and a retry runs again). A claim is a lease renewed while the handler
 * runs: a claim left by a dead process lapses after `leaseMs`, not after the record's TTL.
 */
import { HttpServerResponse } from "@effect/platform"
import { Duration, Effect, Exit, Fiber, Schedule } from "effect"
import { createHash } from "node:crypto"
import type { IdempotencyOption } from "../app/App.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as LogText from "../kernel/LogText.js"
import * as CommitWitness from "../kernel/store/CommitWitness.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import type { IdempotencyStoreShape, Scope, StoredResponse } from "./IdempotencyStore.js"

/** The binding's settings: the header (lower case), the record lifetime and the claim's lease. */
export interface Settings {
  readonly header: string
  readonly ttlMs: number
  readonly leaseMs: number
}

/** The default header. */
export const defaultHeader = "Idempotency-Key"

/** The default record lifetime: 24 hours. */
export const defaultTtlMs = 86_400_000

/**
 * The default lease of a claim: 10 seconds. A running handler renews it (every third of it); a
 * claim whose process died lapses after it, and the next retry runs.
 */
export const defaultLeaseMs = 10_000

/** The settings of the app option, or `undefined` when idempotency is off. */
export const settingsOf = (option: IdempotencyOption): Settings | undefined => {
  if (option === false) return undefined
  const given = option === true ? {} : option
  const ttlMs = given.ttlMs ?? defaultTtlMs
  if (!(Number.isFinite(ttlMs) && ttlMs > 0)) throw new Error(`idempotency: ttlMs must be a positive number, got ${ttlMs}`)
  const leaseMs = given.leaseMs ?? defaultLeaseMs
  if (!(Number.isFinite(leaseMs) && leaseMs > 0)) throw new Error(`idempotency: leaseMs must be a positive number, got ${leaseMs}`)
  return { header: (given.header ?? defaultHeader).toLowerCase(), ttlMs, leaseMs }
}

/** The header marking a replayed response. */
export const replayedHeader = "idempotency-replayed"

const keyPattern = /^[\x21-\x7e][\x20-\x7e]{0,254}$/

/**
 * The key of a request: `undefined` without the header, `null` for a malformed one (empty, over
 * 255 characters, or not printable ASCII). A Structured Field string (`"…"`) is unquoted.
 */
export const keyOf = (headers: Readonly<Record<string, string | undefined>>, settings: Settings): string | null | undefined => {
  const raw = headers[settings.header]
  if (raw === undefined) return undefined
  const trimmed = raw.trim()
  const key = trimmed.length >= 2 && trimmed.startsWith(`"`) && trimmed.endsWith(`"`) ? trimmed.slice(1, -1) : trimmed
  return keyPattern.test(key) ? key : null
}

/** The 400 answer to a malformed key. */
export const keyInvalid = (settings: Settings) =>
  HttpResponses.error(400, "IdempotencyKeyInvalid", `the ${settings.header} header must be 1 to 255 printable ASCII characters`)

/** A digest of what makes two requests "the same": method, path, query string and body. */
export const fingerprint = (method: string, path: string, query: string, body: Uint8Array | undefined): string => {
  const hash = createHash("sha256").update(`${method}\n${path}\n${query}\n`)
  if (body !== undefined) hash.update(body)
  return hash.digest("hex")
}

/**
 * Response headers never replayed: cookies (a session must not be handed to whoever retries), and
 * those that belong to one request or one connection (date, framing, trace ids).
 */
const notReplayed: ReadonlySet<string> = new Set([
  "set-cookie",
  "set-cookie2",
  "date",
  "age",
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "content-length",
  "trailer",
  "upgrade",
  "server-timing",
  "traceparent",
  "tracestate",
  "x-request-id",
  Provenance.traceHeader,
  replayedHeader
])

/** The replayable form of a response (every header but those above), or `undefined` when its body is a stream. */
const toStored = (response: HttpServerResponse.HttpServerResponse): StoredResponse | undefined => {
  const body = response.body
  if (body._tag !== "Uint8Array" && body._tag !== "Empty") return undefined
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) if (!notReplayed.has(name)) headers[name] = value
  if (body._tag === "Uint8Array") headers["content-type"] = body.contentType
  return { status: response.status, headers, body: body._tag === "Uint8Array" ? body.body : new Uint8Array(0) }
}

/** What a guarded run produced: the answer, and whether the handler ran (only then is a response kept). */
export interface Outcome {
  readonly response: HttpServerResponse.HttpServerResponse
  readonly handlerRan: boolean
}

const replay = (stored: StoredResponse) => {
  const { "content-type": contentType, ...headers } = stored.headers
  return HttpServerResponse.uint8Array(stored.body, {
    status: stored.status,
    headers: { ...headers, [replayedHeader]: "true" },
    ...(contentType === undefined ? {} : { contentType })
  })
}

/** What a run that failed as a defect (no response to keep) leaves for its retries, once it committed. */
const failedAfterCommit = HttpResponses.error(500, "InternalError", "the request failed after its changes were committed")

/**
 * Runs `run` under the key: answers 422, 409 or the replay without running it, or claims the key,
 * runs it to the end (in its own fiber: a client that disconnects does not interrupt it) while
 * renewing the claim's lease, and then settles the record. Once the handler ran, its answer is
 * kept and replayed whatever its status (a mutation that committed and then failed must not run
 * twice); the key is released only when nothing was committed and the answer is a 5xx (for
 * example `StoreUnavailable` before commit), or when the answer is a stream that cannot be kept.
 */
export const guarded = <R>(
  store: IdempotencyStoreShape,
  scope: Scope,
  requestFingerprint: string,
  settings: Settings,
  run: Effect.Effect<Outcome, never, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> =>
  Effect.flatMap(Effect.either(store.claim(scope, requestFingerprint, settings.leaseMs)), (claimed) => {
    if (claimed._tag === "Left") {
      return Effect.as(
        Effect.logError(`idempotency claim failed: ${LogText.quote(claimed.left.message)}`),
        HttpResponses.error(503, "IdempotencyUnavailable", "idempotency records are unavailable; retry later")
      )
    }
    const claim = claimed.right
    switch (claim._tag) {
      case "Mismatch":
        return Effect.succeed(HttpResponses.error(
          422,
          "IdempotencyKeyReused",
          `this ${settings.header} was used for a different request; use a new key`
        ))
      case "InFlight":
        return Effect.succeed(HttpResponses.error(
          409,
          "IdempotencyInFlight",
          `a request with this ${settings.header} is still being processed`,
          { "retry-after": "1" }
        ))
      case "Completed":
        return Effect.succeed(replay(claim.response))
      case "Claimed": {
        const witness = CommitWitness.make()
        // The lease is renewed while the handler runs, so a live owner keeps the key however long
        // it takes, and a dead one (kill -9, a lost machine) lets it lapse after `leaseMs`.
        const renewing = store.renew(scope, claim.owner, settings.leaseMs).pipe(
          Effect.flatMap((held) => held ? Effect.void : Effect.logWarning(`idempotency lease lost while its handler ran: ${LogText.quote(scope.path)}`)),
          Effect.catchAll((error) => Effect.logWarning(`idempotency lease not renewed: ${LogText.quote(error.message)}`)),
          Effect.repeat(Schedule.spaced(Duration.millis(Math.max(1, Math.floor(settings.leaseMs / 3))))),
          Effect.delay(Duration.millis(Math.max(1, Math.floor(settings.leaseMs / 3))))
        )
        const leased = Effect.scoped(Effect.zipRight(Effect.forkScoped(renewing), CommitWitness.watched(witness)(run)))
        // Once claimed, the handler runs to the end and the record is settled even if the client
        // goes away: a retry after a dropped connection must get the replay, not a second run.
        const settled = Effect.flatMap(Effect.exit(leased), (exit) => {
          const kept = Exit.isSuccess(exit)
            ? exit.value.handlerRan && (exit.value.response.status < 500 || witness.committed)
              ? toStored(exit.value.response)
              : undefined
            : witness.committed
            ? toStored(failedAfterCommit)
            : undefined
          const settle = kept === undefined
            ? store.release(scope, claim.owner)
            : store.complete(scope, claim.owner, kept, settings.ttlMs)
          return Effect.zipRight(
            Effect.catchAll(settle, (error) => Effect.logWarning(`idempotency record not settled: ${LogText.quote(error.message)}`)),
            Effect.map(exit, (outcome) => outcome.response)
          )
        })
        return Effect.flatMap(Effect.forkDaemon(settled), Fiber.join)
      }
    }
  })
