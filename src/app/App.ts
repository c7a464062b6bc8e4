/**
 * `defineApp`: the description of an app — its tables, procedures, REST routes, plugins, auth and
 * HTTP options. It is inert: serving it is `Server.layer(app)` composed with a store and an HTTP server.
 */
import type * as AuthStrategy from "./AuthStrategy.js"
import * as Errors from "./Errors.js"
import type * as Table from "../kernel/schema/Table.js"
import type * as Plugin from "./Plugin.js"
import type * as Procedure from "./Procedure.js"
import type * as RateLimit from "./RateLimit.js"
import * as Settings from "./Settings.js"
import { IdempotencyRecords, RateLimitCounters } from "./tables.js"

/** Idempotency of mutating REST requests (spec 3.6): `true` or `{header, ttlMs}`. */
export type IdempotencyOption = boolean | {
  readonly header?: string
  /** How long a completed answer is kept for replay (default 24 h). */
  readonly ttlMs?: number
  /** How long a claim outlives its process: renewed while the handler runs (default 10 s). */
  readonly leaseMs?: number
}

/**
 * A REST route as the app holds it. `defineRestRoute` (`@fw/framework/http`) makes them and the
 * REST area serves them; the app only carries them to the server.
 */
export interface RestRouteDeclaration {
  readonly _tag: "RestRoute"
  readonly method: string
  readonly path: `/${string}`
  /** The route's checked rate limit, if it declares one. */
  readonly rateLimit?: RateLimit.Declared | undefined
}

/** The options of `defineApp`. */
export interface Options {
  readonly name?: string
  readonly tables?: ReadonlyArray<Table.Any>
  readonly procedures?: ReadonlyArray<Procedure.Any>
  /** REST route descriptors (`defineRestRoute`), one per file, listed explicitly. */
  readonly restRoutes?: ReadonlyArray<RestRouteDeclaration>
  readonly plugins?: ReadonlyArray<Plugin.Plugin>
  /** Strategies tried in order (see `composeAuthStrategies`); none means every caller is anonymous. */
  readonly auth?: AuthStrategy.AuthStrategy | ReadonlyArray<AuthStrategy.AuthStrategy>
  readonly http?: {
    readonly maxBodyBytes?: number
    /**
     * Origins (`https://app.example.com`) besides the app's own that may send cookie-authenticated
     * requests; default none (same-origin only). Bearer-token requests are not concerned. See
     * `CrossSite` and docs/security.md.
     */
    readonly trustedOrigins?: ReadonlyArray<string>
    /**
     * CORS for browser pages on other origins (off by default): REST routes, projections,
     * `POST /rpc` and SSE answer them with `Access-Control-*` headers and preflights with 204.
     * See `Cors` and docs/security.md.
     */
    readonly cors?: CorsOptions
  }
  readonly idempotency?: IdempotencyOption
  /** What the OpenAPI documents say, and whether the procedures' document is published (see `OpenApiOptions`). */
  readonly openApi?: OpenApiOptions
}

/**
 * `openApi`: the app's OpenAPI documents. `/openapi.json` (the public REST routes and projections)
 * is always served; `/rpc/openapi.json` (every procedure as `POST /rpc/<tag>`) shows the app's
 * private API, so it is served only where `procedures` allows, and `/docs` renders both.
 */
export interface OpenApiOptions {
  /**
   * When the procedures' document is served: `"development"` (the default) unless the environment
   * variable `NODE_ENV` is `production`; `"always"`, in production too; `"never"`.
   */
  readonly procedures?: "development" | "always" | "never"
  /**
   * The API's licence: an SPDX `identifier` (`"MIT"`) or a `url`. Default: proprietary, no licence
   * granted (`{name: "Proprietary", identifier: "LicenseRef-Proprietary"}`).
   */
  readonly license?: License
  /**
   * Where the API is served (`https://api.example.com`). Default `/`: the origin the document was
   * fetched from, right behind any proxy that keeps the path.
   */
  readonly servers?: ReadonlyArray<{ readonly url: string; readonly description?: string }>
  /** The documents' `info.version` (default `1.0.0`). */
  readonly version?: string
}

/** An API licence: its name, and an SPDX identifier or a URL. */
export type License =
  | { readonly name: string; readonly identifier: string; readonly url?: undefined }
  | { readonly name: string; readonly url: string; readonly identifier?: undefined }

/** Normalised `openApi`. */
export interface OpenApi {
  readonly procedures: "development" | "always" | "never"
  readonly license: License
  readonly servers: ReadonlyArray<{ readonly url: string; readonly description?: string }>
  readonly version: string
}

/** The licence of an app that declares none: all rights reserved, the one claim true of any app. */
export const defaultLicense: License = { name: "Proprietary", identifier: "LicenseRef-Proprietary" }

/** `http.cors`: which origins may call the app from a browser, and how. */
export interface CorsOptions {
  /** Origins (`https://app.example.com`) allowed to read answers, or `"*"` for any (then no credentials). */
  readonly origins: ReadonlyArray<string> | "*"
  /**
   * Whether those pages may send cookies (`fetch(..., {credentials: "include"})`). The origins are
   * then trusted for cookie-authenticated requests too (as if listed in `http.trustedOrigins`).
   */
  readonly credentials?: boolean
  /** Request headers a page may send besides `content-type`, `authorization` and `idempotency-key`. */
  readonly headers?: ReadonlyArray<string>
}

/** Normalised `http.cors`. */
export interface Cors {
  /** Normalised origins, or `"*"`. */
  readonly origins: ReadonlySet<string> | "*"
  readonly credentials: boolean
  /** Lower-cased allowed request headers, the defaults included. */
  readonly headers: ReadonlyArray<string>
}

/** A defined app: its options, normalised and checked. */
export interface App {
  readonly _tag: "App"
  readonly name: string
  /** App tables followed by every plugin's tables. */
  readonly tables: ReadonlyArray<Table.Any>
  /** App procedures followed by every plugin's procedures, keyed by tag. */
  readonly procedures: ReadonlyMap<string, Procedure.Any>
  readonly restRoutes: ReadonlyArray<RestRouteDeclaration>
  readonly plugins: ReadonlyArray<Plugin.Plugin>
  readonly auth: ReadonlyArray<AuthStrategy.AuthStrategy>
  readonly maxBodyBytes: number | undefined
  /** Normalised `http.trustedOrigins` (with the CORS origins when `http.cors.credentials`). */
  readonly trustedOrigins: ReadonlySet<string>
  /** Normalised `http.cors`; undefined when off. */
  readonly cors: Cors | undefined
  readonly idempotency: IdempotencyOption
  /** The plugins' area error classes (`Plugin.errors`), each once: the wire carries them typed. */
  readonly errors: ReadonlyArray<Errors.AreaErrorClass>
  /** Normalised `openApi`. */
  readonly openApi: OpenApi
}

/** An app declaration the framework refuses (duplicate tags or tables). */
export class AppDefinitionError extends Error {
  override readonly name = "AppDefinitionError"
}

/** `origin` normalised as browsers send it (`https://app.example.com`), or undefined when it is not an http(s) origin. */
export const normalizeOrigin = (origin: string): string | undefined => {
  if (!URL.canParse(origin)) return undefined
  const url = new URL(origin)
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : undefined
}

/** Suffix of the streaming rpc that serves a query live over the socket. */
export const liveSuffix = ".live"

/**
 * Describes an app. Throws `AppDefinitionError` on duplicate table names or procedure tags, or an
 * area error tag taken twice (or taking a framework error's tag).
 */
export const defineApp = (options: Options): App => {
  Settings.checkPositiveInteger("http.maxBodyBytes", options.http?.maxBodyBytes)
  if (typeof options.idempotency === "object") {
    Settings.checkPositiveInteger("idempotency.ttlMs", options.idempotency.ttlMs)
    Settings.checkPositiveInteger("idempotency.leaseMs", options.idempotency.leaseMs)
  }
  for (const plugin of options.plugins ?? []) {
    for (const route of [...plugin.routes ?? [], ...plugin.inspectRoutes ?? []]) {
      Settings.checkPositiveInteger(`plugin "${plugin.name}" route ${route.method} ${route.path}: maxBodyBytes`, route.maxBodyBytes)
    }
  }
  const plugins = options.plugins ?? []
  const allProcedures = [...(options.procedures ?? []), ...plugins.flatMap((plugin) => plugin.procedures ?? [])]
  // The counters' table is the app's when anything is rate limited, so `fw db apply` creates it.
  const rateLimited = (options.restRoutes ?? []).some((route) => route.rateLimit !== undefined) ||
    allProcedures.some((procedure) => procedure.publicApi?.rateLimit !== undefined)
  const tables = [
    ...(options.tables ?? []),
    ...plugins.flatMap((plugin) => plugin.tables ?? []),
    ...(options.idempotency === undefined || options.idempotency === false ? [] : [IdempotencyRecords]),
    ...(rateLimited ? [RateLimitCounters] : [])
  ]
  const tableNames = new Set<string>()
  for (const table of tables) {
    if (tableNames.has(table.name)) throw new AppDefinitionError(`table "${table.name}" is declared twice`)
    tableNames.add(table.name)
  }
  const procedures = new Map<string, Procedure.Any>()
  for (const procedure of allProcedures) {
    if (procedures.has(procedure.tag)) throw new AppDefinitionError(`procedure "${procedure.tag}" is declared twice`)
    if (procedure.tag.endsWith(liveSuffix)) {
      throw new AppDefinitionError(`procedure "${procedure.tag}": the suffix "${liveSuffix}" is reserved for live queries`)
    }
    procedures.set(procedure.tag, procedure)
  }
  let errors: ReadonlyArray<Errors.AreaErrorClass>
  try {
    errors = Errors.checkAreaErrors(plugins.flatMap((plugin) => plugin.errors ?? []))
  } catch (error) {
    throw new AppDefinitionError(error instanceof Error ? error.message : String(error))
  }
  const auth = options.auth === undefined ? [] : Array.isArray(options.auth) ? options.auth : [options.auth]
  const originOf = (setting: string, origin: string) => {
    const normalized = normalizeOrigin(origin)
    if (normalized === undefined || normalized !== origin.replace(/\/$/, "")) {
      throw new AppDefinitionError(`${setting}: "${origin}" is not an origin (scheme://host[:port], no path)`)
    }
    return normalized
  }
  const trustedOrigins = new Set<string>()
  for (const origin of options.http?.trustedOrigins ?? []) trustedOrigins.add(originOf("http.trustedOrigins", origin))
  const cors = corsOf(options.http?.cors, originOf)
  if (cors !== undefined && cors.credentials && cors.origins !== "*") for (const origin of cors.origins) trustedOrigins.add(origin)
  return {
    _tag: "App",
    name: options.name ?? "app",
    tables,
    procedures,
    restRoutes: options.restRoutes ?? [],
    plugins,
    auth: auth as ReadonlyArray<AuthStrategy.AuthStrategy>,
    maxBodyBytes: options.http?.maxBodyBytes,
    trustedOrigins,
    cors,
    idempotency: options.idempotency ?? false,
    errors,
    openApi: openApiOf(options.openApi)
  }
}

const isText = (value: unknown): value is string => typeof value === "string" && value.trim().length > 0

const openApiOf = (options: OpenApiOptions | undefined): OpenApi => {
  const procedures = options?.procedures ?? "development"
  if (!["development", "always", "never"].includes(procedures)) {
    throw new AppDefinitionError(`openApi.procedures: "${String(procedures)}" is not one of "development", "always", "never"`)
  }
  const license = options?.license ?? defaultLicense
  if (!isText(license.name) || !(isText(license.identifier) || isText(license.url))) {
    throw new AppDefinitionError("openApi.license: give a name and an SPDX identifier or a URL")
  }
  if (isText(license.url) && !URL.canParse(license.url)) throw new AppDefinitionError(`openApi.license.url: "${license.url}" is not a URL`)
  const servers = (options?.servers ?? [{ url: "/" }]).map((server) => {
    if (!isText(server.url)) throw new AppDefinitionError("openApi.servers: every server needs a url")
    // A trailing slash doubles the one every path starts with.
    return { ...server, url: server.url === "/" ? "/" : server.url.replace(/\/+$/, "") }
  })
  if (servers.length === 0) throw new AppDefinitionError("openApi.servers: list at least one server (or leave it out for `/`)")
  const version = options?.version ?? "1.0.0"
  if (!isText(version)) throw new AppDefinitionError("openApi.version: give a non-empty version")
  return { procedures, license, servers, version }
}

/** Headers every CORS caller may send: JSON bodies, bearer tokens, idempotency keys. */
const corsDefaultHeaders = ["content-type", "authorization", "idempotency-key"]

const corsOf = (options: CorsOptions | undefined, originOf: (setting: string, origin: string) => string): Cors | undefined => {
  if (options === undefined) return undefined
  const credentials = options.credentials === true
  if (options.origins === "*" && credentials) {
    // Browsers refuse credentials with a wildcard origin: fail here rather than in every page.
    throw new AppDefinitionError(`http.cors: origins "*" cannot be combined with credentials: true (list the origins)`)
  }
  const headers = new Set(corsDefaultHeaders)
  for (const header of options.headers ?? []) {
    if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(header)) throw new AppDefinitionError(`http.cors.headers: "${header}" is not a header name`)
    headers.add(header.toLowerCase())
  }
  return {
    origins: options.origins === "*" ? "*" : new Set(options.origins.map((origin) => originOf("http.cors.origins", origin))),
    credentials,
    headers: [...headers]
  }
}
