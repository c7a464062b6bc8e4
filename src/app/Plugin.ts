/**
 * The plugin contract. A plugin declares its name, permissions, tables and what it contributes
 * (a background layer, a change listener, HTTP routes, inspect routes, procedures, rpc interceptors).
 * The framework hands a plugin only what its permissions allow: without `store:write` its Store is
 * read-only, without `network:outbound:<host>` its HttpClient refuses that host, without
 * `store:changes:read` it cannot listen to changes, and an unknown permission fails the boot.
 */
import type { HttpClient, HttpServerResponse } from "@effect/platform"
import { HttpServerRequest } from "@effect/platform"
import type { Cause, Layer, Queue, Scope } from "effect"
import { Context, Effect, Schema } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { PendingChange } from "../kernel/changes/ChangeTap.js"
import type { StoreError } from "../kernel/Errors.js"
import type * as FusedStage from "../kernel/store/FusedStage.js"
import type * as StageStatements from "../kernel/store/StageStatements.js"
import type { Store } from "../kernel/store/Store.js"
import type { CurrentSubject } from "../kernel/Subject.js"
import type * as Table from "../kernel/schema/Table.js"
import * as BodyRead from "./BodyRead.js"
import * as ByteStream from "./ByteStream.js"
import type { AreaErrorClass } from "./Errors.js"
import type * as Procedure from "./Procedure.js"

/** The permissions a plugin may declare. */
export type Permission =
  | "store:write"
  | "store:changes:read"
  | "inspect:read"
  | "inspect:write"
  | "rpc:intercept:query"
  | "rpc:intercept:mutation"
  | "rpc:intercept:action"
  | `network:outbound:${string}`

/** The services plugin code runs with, each narrowed to the plugin's permissions. */
export type Services = Store | HttpClient.HttpClient

/** What a plugin HTTP route handler may use: the request, its route params, the resolved caller, and the plugin services. */
export type RouteServices =
  | Services
  | HttpServerRequest.HttpServerRequest
  | HttpServerRequest.ParsedSearchParams
  | RouteParams
  | CurrentSubject
  | BodyLimit
  | BodyRead.BodyReader

/** The body cap of the route being served: its own `maxBodyBytes`, else the app's. */
export class BodyLimit extends Context.Tag("@fw/framework/Plugin/BodyLimit")<BodyLimit, number>() {}

/**
 * Reads the request body within the route's cap. A body over the cap fails `PayloadTooLarge`,
 * which the framework answers with 413 if the handler does not handle it.
 */
export const readBody: Effect.Effect<
  Uint8Array,
  BodyRead.PayloadTooLarge | BodyRead.BodyReadFailed,
  HttpServerRequest.HttpServerRequest | BodyLimit | BodyRead.BodyReader
> = Effect.flatMap(
  Effect.all([HttpServerRequest.HttpServerRequest, BodyLimit, BodyRead.BodyReader]),
  ([request, limit, read]) => read(request, limit)
)

/** Path parameters of the matched route (`:name` segments). */
export class RouteParams extends Context.Tag("@fw/framework/Plugin/RouteParams")<
  RouteParams,
  Readonly<Record<string, string>>
>() {}

/** An HTTP route contributed by a plugin. */
export interface Route {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  /**
   * Absolute path for `routes`. For `inspectRoutes`: relative to `/_fw/inspect/plugins/<name>`, or
   * absolute under the plugin's own inspect path `/_fw/inspect/<name>` (for paths a spec fixes,
   * e.g. `/_fw/inspect/aggregates`; see `inspectPath`).
   */
  readonly path: `/${string}`
  /** Body cap for this route, default the app's cap. */
  readonly maxBodyBytes?: number
  /**
   * Runs the route as the anonymous caller without consulting the app's strategies. For login
   * routes: a stale or forged session cookie (a failed verdict, 401 elsewhere) must not lock the
   * user out of the very route that replaces it.
   */
  readonly anonymous?: boolean
  /**
   * For inspect routes: the capability (a scope of the operator, see `Capabilities`) the route
   * needs beyond `fw:inspect`. Checked by the framework before the handler runs; without it the
   * operator gets 403 `Forbidden`. The inspect token holds every capability.
   */
  readonly capability?: string
  /**
   * The answer: a response, or a byte stream (`PluginHttpRouteResult.byteStream(...)`, the
   * `bytes(...)` of REST handlers), piped and never compressed, opened only once the request has
   * passed every check and never for `HEAD`.
   */
  readonly handler: Effect.Effect<RouteResult, unknown, RouteServices>
}

/** What a plugin route answers: a response or a byte stream. */
export type RouteResult = HttpServerResponse.HttpServerResponse | ByteStream.Bytes

/**
 * The results a plugin route may return besides a plain response (spec 4.5 rule 6):
 * `byteStream(source, {contentType, contentLength, contentDisposition})`, the same shape and rules
 * as `bytes(...)` on a REST route.
 */
export const PluginHttpRouteResult = { byteStream: ByteStream.bytes } as const

/** Wraps one procedure call; requires `rpc:intercept:<kind>`. */
export interface Interceptor {
  readonly kind: Procedure.Kind
  readonly intercept: (
    call: Procedure.Call,
    next: Effect.Effect<unknown, unknown>
  ) => Effect.Effect<unknown, unknown, Services>
  /**
   * Also wrap the handler of a live query's shared re-run (one handler run for every identical
   * subscription, around which each member's interceptors then run). For interceptors that provide
   * services to handlers (a registry, a scheduler): without it a re-run's handler would not find
   * them. Such an interceptor runs once more per re-run, so it must do nothing but provide.
   */
  readonly sharedRuns?: boolean
}

/**
 * State a plugin keeps outside the store, watched by live queries: a handler that read it calls
 * `ReadTracking.noteRead(name)`, and its live query re-runs whenever `changes` yields.
 */
export interface LiveSource {
  readonly name: string
  /** A queue that yields once per change, subscribed for the lifetime of the scope. */
  readonly changes: Effect.Effect<Queue.Dequeue<unknown>, never, Scope.Scope>
}

/**
 * A live-query result pushed to a subscriber (over rpc or SSE) after its first one: a re-run,
 * caused by a committed change, whose result differed and was sent.
 */
export interface LivePush {
  /** The query's tag. */
  readonly procedure: string
  /** A random id, one per subscription. */
  readonly subscriptionId: string
  readonly subjectId: string
  /** The subscriber's tenant (null for a tenant-less caller). */
  readonly tenantId: string | null
  /** The subscription's trace id. */
  readonly traceId: string
  /** The tables the re-run read. */
  readonly tables: ReadonlySet<string>
}

/**
 * A plugin's panel on the inspect dashboard (`/_fw/dashboard`), shown only while the plugin is
 * installed. `module` is the source of an ES module whose default export renders the panel:
 * `(root: HTMLElement, ctx: PanelContext) => void | (() => void)` (see docs/dashboard.md).
 */
export interface DashboardPanel {
  readonly title: string
  readonly module: string
}

/** A plugin. */
export interface Plugin {
  readonly name: string
  readonly permissions: ReadonlyArray<Permission>
  /** Tables the plugin owns (usually `_fw_*`), applied by the schema differ with the app's. */
  readonly tables?: ReadonlyArray<Table.Any>
  /**
   * The app's tables the plugin reads or watches (a search index's source, an expectation's table,
   * the tables row history records), as declarations or names: the boot fails with
   * `TableNotDeclared` when the app does not declare one.
   */
  readonly usesTables?: ReadonlyArray<Table.Any | string>
  /** Background work (sweeps, refreshes), started with the server and stopped with it. */
  readonly layer?: Layer.Layer<never, unknown, Services | Scope.Scope>
  /**
   * Called for every committed change; requires `store:changes:read`. `services` are the plugin's
   * own (narrowed) services for the store the change was made in, the same the returned effect is
   * provided with: a plugin that keeps per-store state can handle a change synchronously and return
   * `Effect.void`, which the host then runs nothing for (no span, no services to provide).
   */
  readonly onChangeEvent?: (event: ChangeEvent, services: Context.Context<Services>) => Effect.Effect<void, unknown, Services>
  /**
   * `onChangeEvent` runs on the writer's fiber before the write returns (see `ChangeTap.Listener`
   * `inline`): only for cheap bookkeeping that callers read right after their write.
   */
  readonly inlineChangeEvents?: boolean
  /** Declares the listener durable (see `ChangeTap.Listener`): how to record a failed delivery. */
  readonly recordChangeFailure?: (event: ChangeEvent, cause: Cause.Cause<unknown>) => Effect.Effect<void, unknown, Services>
  /**
   * Called inside every writing transaction, just before commit, with its changes (see
   * `ChangeTap.Stager`): its store writes commit atomically with the write, and a failure rolls
   * the write back. Requires `store:changes:read` and `store:write`.
   */
  readonly onStage?: (changes: ReadonlyArray<PendingChange>) => Effect.Effect<void, StoreError, Services>
  /**
   * `onStage` written as store statements (see `StageStatements`), for a stager that only finds and
   * inserts rows: on SQLite a one-row write and its staging then commit in one synchronous step,
   * several times cheaper than the client's transaction. Given with `onStage`, `onStage` is what
   * runs inside the client's transaction and must do the same work (a tier-specific statement,
   * say); alone, the statements also run there, through the store.
   */
  readonly onStageStatements?: (changes: ReadonlyArray<PendingChange>) => StageStatements.Plan<void>
  /**
   * For one inserted row, the same work as a part of one PostgreSQL statement (see `FusedStage`):
   * when every stager gives one, a one-row insert outside a transaction commits with its staging
   * in one round trip (no tracer, no statement transformer). `null`: nothing to write for this
   * change; `undefined`: take the transaction. Only with `onStage` or `onStageStatements`, which do
   * the work everywhere else (updates, deletes, transactions, several rows, other tiers). Inserts
   * sent together are one statement (group commit): a part is written once per row there, unless it
   * gives a set form (`FusedStage.Part.statementForRows`), written once for all the rows — about half
   * the server's CPU per row.
   */
  readonly onStageFused?: (change: PendingChange) => FusedStage.Part | null | undefined
  /**
   * The store tiers `onStage` (or `onStageStatements`) is registered on (default every tier). A stager makes every write a
   * transaction, so one that guards nothing on a tier (durability on the memory tier) leaves it out.
   */
  readonly onStageTiers?: ReadonlyArray<"memory" | "sqlite" | "pg">
  readonly routes?: ReadonlyArray<Route>
  /**
   * Mounted under `/_fw/inspect/plugins/<name>`, or at `/_fw/inspect/<name>…` when the path is
   * written absolute (see `inspectPath`); gated like every inspect route. GET needs `inspect:read`,
   * other methods `inspect:write`.
   */
  readonly inspectRoutes?: ReadonlyArray<Route>
  /** Its panel on the inspect dashboard; needs `inspect:read`. */
  readonly dashboardPanel?: DashboardPanel
  readonly procedures?: ReadonlyArray<Procedure.Any>
  /**
   * The typed errors the plugin's procedures fail with (`Schema.TaggedError` classes whose
   * instances carry a `status`): they reach clients with their own tag. A client decodes them
   * when connected with the same classes (`Client.make(procedures, {errors})`, `mount({errors})`).
   */
  readonly errors?: ReadonlyArray<AreaErrorClass>
  readonly interceptors?: ReadonlyArray<Interceptor>
  /**
   * Services the plugin offers to every guard and handler of the app (for example the flag
   * registry). Handlers read them with `Effect.serviceOption`, so their types stay requirement-free.
   */
  readonly handlerContext?: Context.Context<never>
  /** State outside the store that live queries may watch (see `LiveSource`). */
  readonly liveSources?: ReadonlyArray<LiveSource>
  /**
   * Observes every live push (metering, auditing). Runs before the push is sent, as the system; a
   * failure is logged and never affects the subscription.
   */
  readonly onLivePush?: (push: LivePush) => Effect.Effect<void, unknown, Services>
}

/** Declares a plugin (identity function that checks the shape at compile time). */
export const definePlugin = (plugin: Plugin): Plugin => plugin

/** The prefix of every inspect path. */
const inspectPrefix = "/_fw/inspect"

/** Inspect path segments the framework's own routes use: no plugin may take them as its own. */
export const reservedInspectSegments: ReadonlySet<string> = new Set(["plugins", "invoke", "procedures", "live", "tables", "dashboard", "operator"])

/**
 * Where an inspect route of `plugin` is mounted: a path written absolute under the plugin's own
 * inspect path (`/_fw/inspect/<name>` or below) as written, any other path under
 * `/_fw/inspect/plugins/<name>`. Undefined for an absolute inspect path the plugin may not take
 * (another plugin's, or one of the framework's own segments).
 */
export const inspectPath = (plugin: string, path: `/${string}`): `/${string}` | undefined => {
  if (!path.startsWith(`${inspectPrefix}/`)) return `${inspectPrefix}/plugins/${plugin}${path}`
  const own = `${inspectPrefix}/${plugin}`
  if (reservedInspectSegments.has(plugin) || !(path === own || path.startsWith(`${own}/`))) return undefined
  return path
}

/** Every permission a plugin may declare, except the `network:outbound:<host>` family. */
export const knownPermissions: ReadonlyArray<Permission> = [
  "store:write",
  "store:changes:read",
  "inspect:read",
  "inspect:write",
  "rpc:intercept:query",
  "rpc:intercept:mutation",
  "rpc:intercept:action"
]

/** A permission the plugin used without declaring it. */
export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  plugin: Schema.String,
  permission: Schema.String
}) {
  override get message() {
    return `plugin "${this.plugin}" did not declare the permission "${this.permission}"`
  }
}

/** A plugin declaration the framework refuses at boot. */
export class PluginInvalid extends Schema.TaggedError<PluginInvalid>()("PluginInvalid", {
  plugin: Schema.String,
  message: Schema.String
}) {}
