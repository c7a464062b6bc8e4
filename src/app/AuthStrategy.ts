/**
 * The AuthStrategy contract: every transport resolves the caller's Subject by running the app's
 * composed strategies over the request's headers (and cookies, which ride in the `cookie` header).
 */
import type { HttpClient } from "@effect/platform"
import type { Headers } from "@effect/platform"
import { Data, Effect } from "effect"
import * as Now from "../kernel/Now.js"
import type { Subject } from "../kernel/Subject.js"

/** What a strategy concluded about a request. */
export type Verdict = Data.TaggedEnum<{
  /** The strategy does not apply (no token of its kind): the next strategy is tried. */
  NoMatch: {}
  /** The request is authenticated as `subject`. */
  Authenticated: { readonly subject: Subject }
  /** A token of this strategy's kind was present but is not acceptable: the chain stops here. */
  Failed: { readonly reason: string }
}>

/** Constructors and matchers of `Verdict`. */
export const Verdict = Data.taggedEnum<Verdict>()

/** The parts of a request a strategy may look at. Header names are lower-case. */
export interface AuthRequest {
  readonly headers: Headers.Headers
}

/** Services a strategy may need while authenticating (JWKS and discovery fetches). */
export type Requirements = HttpClient.HttpClient

/**
 * How a credential rides in a request, as an OpenAPI security scheme: a cookie or header
 * (`apiKey`), or an `Authorization` scheme (`http`, e.g. bearer JWTs).
 */
export type SecurityScheme =
  | {
    readonly type: "apiKey"
    readonly in: "cookie" | "header" | "query"
    readonly name: string
    readonly description?: string
  }
  | {
    readonly type: "http"
    readonly scheme: "bearer" | "basic"
    readonly bearerFormat?: string
    readonly description?: string
  }

/** A way of authenticating requests. */
export interface AuthStrategy {
  /** Strategy id, e.g. `password-session`, `idp_a`; carried as `metadata.provider` on JWT subjects. */
  readonly id: string
  /** Hosts this strategy contacts (JWKS, discovery), declared as `network:outbound:<host>`. */
  readonly outboundHosts: ReadonlyArray<string>
  readonly authenticate: (request: AuthRequest) => Effect.Effect<Verdict, never, Requirements>
  /**
   * The ways this strategy reads a credential, by scheme name (e.g. `{"password-session": cookie
   * fw:session}`): the OpenAPI documents list them as the app's security schemes, any one of which
   * a guarded operation accepts. A strategy without them is not documented.
   */
  readonly securitySchemes?: Readonly<Record<string, SecurityScheme>>
}

/**
 * Composes strategies: the first `Authenticated` wins, a `Failed` verdict stops the chain
 * (it never falls through to a weaker strategy), and when none matches the verdict is `NoMatch`.
 */
export const composeAuthStrategies = (strategies: ReadonlyArray<AuthStrategy>): AuthStrategy =>
  strategies.length === 1 ? strategies[0]! : ({
  id: strategies.map((s) => s.id).join("|"),
  outboundHosts: [...new Set(strategies.flatMap((s) => s.outboundHosts))],
  securitySchemes: Object.assign({}, ...strategies.map((s) => s.securitySchemes ?? {})),
  authenticate: (request) => {
    // Eager (`Now`): a chain of synchronous strategies answers without a fiber step.
    const from = (i: number): Effect.Effect<Verdict, never, Requirements> =>
      i === strategies.length
        ? Effect.succeed(Verdict.NoMatch())
        : Now.flatMap(strategies[i]!.authenticate(request), (verdict) => verdict._tag !== "NoMatch" ? Effect.succeed(verdict) : from(i + 1))
    return from(0)
  }
})

/** Reads one cookie from a request's `cookie` header. */
export const readCookie = (headers: Headers.Headers, name: string): string | undefined => {
  const header = headers["cookie"]
  if (header === undefined) return undefined
  for (const part of header.split(";")) {
    const eq = part.indexOf("=")
    if (eq === -1) continue
    if (part.slice(0, eq).trim() === name) {
      const value = part.slice(eq + 1).trim()
      // RFC 6265 allows a value in double quotes; the quotes are not part of it.
      const raw = value.length >= 2 && value.startsWith("\"") && value.endsWith("\"") ? value.slice(1, -1) : value
      try {
        return decodeURIComponent(raw)
      } catch {
        return raw
      }
    }
  }
  return undefined
}

/** Reads a `Bearer` token from the `authorization` header. */
export const readBearer = (headers: Headers.Headers): string | undefined => {
  const header = headers["authorization"]
  if (header === undefined) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match?.[1]
}
