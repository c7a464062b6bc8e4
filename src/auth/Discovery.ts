/**
 * OpenID Connect discovery: `${issuer}/.well-known/openid-configuration` (or a configured document
 * URL) is fetched on first use, checked, and its `jwks_uri` cached for the process lifetime.
 * Concurrent first requests share one fetch; a failing document is asked again at most once a
 * second (Effect `Clock` time). The document must name the configured issuer (OpenID Connect
 * Discovery 1.0, section 4.3), so a document cannot redirect verification to another issuer's keys.
 */
import type { HttpClient } from "@effect/platform"
import { Clock, Effect, Schema } from "effect"
import * as Jwks from "./Jwks.js"
import { DiscoveryUnavailable } from "./Errors.js"
import * as Settings from "../app/Settings.js"

/** The standard document URL of `issuer`, unless `discoveryUrl` overrides it. */
export const documentUrl = (issuer: string, discoveryUrl?: string): string =>
  discoveryUrl ?? `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`

const Document = Schema.Struct({ issuer: Schema.String, jwks_uri: Schema.String })

interface Entry {
  jwksUri: string | undefined
  attemptedAt: number
  lastFailure: DiscoveryUnavailable | undefined
  fetches: number
  readonly lock: Effect.Semaphore
}

const entries = new Map<string, Entry>()

/** The `jwks_uri` already discovered for this document, if any: the hot path, no effect. */
export const cachedJwksUri = (issuer: string, discoveryUrl?: string): string | undefined =>
  entries.get(documentUrl(issuer, discoveryUrl))?.jwksUri

/** The `jwks_uri` of `issuer`, discovered on first use and cached for the process lifetime. */
export const jwksUri = (
  issuer: string,
  options: { readonly discoveryUrl?: string; readonly timeoutMs?: number } = {}
): Effect.Effect<string, DiscoveryUnavailable, HttpClient.HttpClient> =>
  Effect.suspend(() => {
    const url = documentUrl(issuer, options.discoveryUrl)
    let entry = entries.get(url)
    if (entry?.jwksUri !== undefined) return Effect.succeed(entry.jwksUri)
    if (entry === undefined) {
      entry = { jwksUri: undefined, attemptedAt: Number.NEGATIVE_INFINITY, lastFailure: undefined, fetches: 0, lock: Effect.unsafeMakeSemaphore(1) }
      entries.set(url, entry)
    }
    const current = entry
    return current.lock.withPermits(1)(Effect.gen(function*() {
      if (current.jwksUri !== undefined) return current.jwksUri
      const now = yield* Clock.currentTimeMillis
      if (now - current.attemptedAt < Jwks.minimumCooldownMs && current.lastFailure !== undefined) {
        return yield* current.lastFailure
      }
      current.attemptedAt = now
      current.fetches++
      Settings.checkPositiveInteger("discovery.timeoutMs", options.timeoutMs)
      const document = yield* Jwks.fetchJson(url, Document, options.timeoutMs ?? 5_000).pipe(
        Effect.mapError((error) => new DiscoveryUnavailable({ url, reason: error.reason })),
        Effect.filterOrFail(
          (document) => document.issuer === issuer,
          // The issuer the document names is attacker-chosen text and a URL: log it, never answer it.
          (document) => new DiscoveryUnavailable({ url, reason: "the document names another issuer", detail: `it names ${JSON.stringify(document.issuer)}` })
        ),
        Effect.tapError((error) => Effect.sync(() => (current.lastFailure = error)))
      )
      current.jwksUri = document.jwks_uri
      current.lastFailure = undefined
      return document.jwks_uri
    }))
  })

/** How many times this document was fetched by this process (tests and metrics). */
export const fetchCount = (issuer: string, discoveryUrl?: string): number =>
  entries.get(documentUrl(issuer, discoveryUrl))?.fetches ?? 0

export { DiscoveryUnavailable } from "./Errors.js"
