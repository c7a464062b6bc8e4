/**
 * The inspect surface under `/_fw/inspect/`, gated by `operator`: the bearer of `FW_INSPECT_TOKEN`
 * or a Subject of the app's own strategies holding `fw:inspect`, with capabilities as further
 * scopes (see `Capabilities`). Core routes list the app's procedures and tables, tell the operator
 * what they may do (`GET /operator`) and invoke a procedure (`canInvokeProcedure`); plugins add
 * theirs under `/_fw/inspect/plugins/<name>`.
 */
import { Headers, HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Either, Option, Redacted, Schema } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import * as Subject from "../kernel/Subject.js"
import * as LogText from "../kernel/LogText.js"
import * as Provenance from "../kernel/changes/Provenance.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Capabilities from "../app/Capabilities.js"
import * as CrossSite from "../app/CrossSite.js"
import { Runtime, type RuntimeShape } from "../app/Runtime.js"
import * as BodyLimit from "../http/BodyLimit.js"

/** The operator the bearer of `FW_INSPECT_TOKEN` is: the system, recorded as `system` / `inspect-token`. */
export const inspectSubject = Subject.make({ type: "system", id: "inspect-token", tenantId: null, scopes: ["*"] })

/** The prefix of every inspect path. */
export const prefix = "/_fw/inspect"

const digest = (value: string) => createHash("sha256").update(value).digest()

/** Constant-time comparison (of digests, so lengths never leak). */
export const tokenMatches = (given: string, expected: string): boolean =>
  timingSafeEqual(digest(given), digest(expected))

/** The configured token: `FW_INSPECT_TOKEN`, redacted. */
export const token: Effect.Effect<Option.Option<Redacted.Redacted<string>>> = Config.option(
  Config.redacted("FW_INSPECT_TOKEN")
).pipe(Effect.map(Option.filter((t) => Redacted.value(t).length > 0)), Effect.orElseSucceed(() => Option.none()))

/** How the operator got in: the inspect token, or the app's own strategies (`fw:inspect` scope). */
export type Via = "token" | "subject"

/** The operator of one inspect request. */
export interface Operator {
  readonly subject: Subject.Subject
  readonly via: Via
}

const navigable: CrossSite.Options = { navigable: true }

const bearer = (headers: Headers.Headers) => /^Bearer\s+(.+)$/i.exec(headers["authorization"] ?? "")?.[1]?.trim()

/**
 * Who may use the inspect surface (spec 5.4 rule 4): the bearer of `FW_INSPECT_TOKEN` (compared in
 * constant time; every capability), else a Subject the app's own strategies resolve (the same
 * resolver as every transport, cookies screened by `CrossSite`) that holds the `fw:inspect` scope.
 * Left: the answer. 404 when no token is configured and the caller is no operator (the surface
 * does not exist for them), 401 for no credentials or a wrong token, 403 for a Subject without
 * `fw:inspect`.
 */
export const operator = (
  runtime: RuntimeShape
): Effect.Effect<Either.Either<Operator, HttpServerResponse.HttpServerResponse>, never, HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const configured = yield* token
    const request = yield* HttpServerRequest.HttpServerRequest
    const given = bearer(request.headers)
    if (Option.isSome(configured) && given !== undefined && tokenMatches(given, Redacted.value(configured.value))) {
      return Either.right({ subject: inspectSubject, via: "token" as const })
    }
    // Inspect pages may be opened from a link; every inspect route that acts is a POST.
    const screened = yield* CrossSite.screen(runtime, request.method, request.headers, navigable)
    if (Either.isLeft(screened)) return Either.left(screened.left)
    const resolved = yield* Effect.either(runtime.resolveSubject(screened.right))
    if (Either.isRight(resolved) && Subject.hasScope(resolved.right, Capabilities.inspectScope)) {
      return Either.right({ subject: resolved.right, via: "subject" as const })
    }
    if (Option.isNone(configured) && given === undefined && (Either.isLeft(resolved) || resolved.right.type === "anonymous")) {
      return Either.left(HttpResponses.error(404, "InspectDisabled", "the inspect surface is disabled: set FW_INSPECT_TOKEN or sign in as a subject with the fw:inspect scope"))
    }
    if (Either.isRight(resolved) && resolved.right.type !== "anonymous") {
      return Either.left(HttpResponses.error(403, "InspectForbidden", `the caller lacks the "${Capabilities.inspectScope}" scope`))
    }
    return Either.left(HttpResponses.error(401, "InspectUnauthorized", "a valid inspect token, or a subject with the fw:inspect scope, is required", {
      "www-authenticate": "Bearer"
    }))
  })

/** The refusal of an operator without `capability`, or undefined when they hold it. */
export const lacks = (subject: Subject.Subject, capability: string | undefined): HttpServerResponse.HttpServerResponse | undefined =>
  capability === undefined || Subject.hasScope(subject, capability)
    ? undefined
    : HttpResponses.error(403, "Forbidden", `the operator lacks the capability "${capability}"`)

/**
 * Logs an operator's action (`what`, e.g. `POST /_fw/inspect/invoke`) at info level, naming the
 * authenticated operator (type and id, quoted: `LogText`) and, when given, its detail.
 */
export const logAction = (operator: Subject.Subject, what: string, detail?: string): Effect.Effect<void> =>
  Effect.logInfo(`inspect: ${what} by ${LogText.quote(`${operator.type}:${operator.id}`)}${detail === undefined ? "" : ` ${detail}`}`)

/** Runs `f` with the operator's Subject when they hold `capability` (when given); answers the gate's refusal otherwise. */
export const gatedWith = <E, R>(
  runtime: RuntimeShape,
  capability: string | undefined,
  f: (operator: Subject.Subject) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(operator(runtime), (gate) => {
    if (Either.isLeft(gate)) return Effect.succeed(gate.left)
    const refused = lacks(gate.right.subject, capability)
    if (refused !== undefined) return Effect.succeed(refused)
    // Every acting inspect route (a POST: invoke, toggle, override, reindex, resync, refresh) is logged as its operator.
    return Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      request.method === "GET" || request.method === "HEAD"
        ? f(gate.right.subject)
        : Effect.zipRight(logAction(gate.right.subject, `${request.method} ${LogText.quote(request.url)}`), f(gate.right.subject)))
  })

/** Runs `handler` for an operator holding `capability` (when given); answers the gate's refusal otherwise. */
export const gated = <E, R>(
  runtime: RuntimeShape,
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  capability?: string
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  gatedWith(runtime, capability, () => handler)

const InvokeBody = Schema.parseJson(Schema.Struct({
  tag: Schema.String,
  input: Schema.optionalWith(Schema.Unknown, { default: () => ({}) }),
  /** Run as a member of this tenant (default: the system, across tenants). */
  tenantId: Schema.optional(Schema.NullOr(Schema.String))
}))

/** Every capability the app knows: the framework's and those its plugins' inspect routes declare. */
export const capabilities = (runtime: RuntimeShape): ReadonlyArray<string> => [
  ...new Set([
    ...Capabilities.known,
    ...runtime.app.plugins.flatMap((plugin) => (plugin.inspectRoutes ?? []).flatMap((route) => route.capability === undefined ? [] : [route.capability]))
  ])
]

/** The core inspect routes: `POST /invoke`, `GET /operator`, `GET /procedures`, `GET /tables`, `GET /live`. */
export const routes = (maxBodyBytes: number) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const runtime = yield* Runtime
      yield* router.add(
        "POST",
        `${prefix}/invoke`,
        gatedWith(runtime, Capabilities.canInvokeProcedure, (operator) => Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const raw = yield* BodyLimit.readCapped(request, maxBodyBytes)
          const body = yield* Schema.decodeUnknown(InvokeBody)(new TextDecoder().decode(raw))
          const procedure = runtime.app.procedures.get(body.tag)
          if (procedure === undefined) return HttpResponses.error(404, "ProcedureNotFound", `no procedure "${body.tag}"`)
          const subject = Subject.make({
            type: "system",
            id: "inspect",
            tenantId: body.tenantId ?? null,
            scopes: ["*"]
          })
          const crossTenant = subject.tenantId === null
          // The operator's credentials stay here: procedure code and plugin interceptors never see them.
          // The call's trace id (its writes' provenance) is logged with the operator who ran it.
          const traceId = Provenance.newTraceId()
          const headers = Headers.set(Headers.remove(request.headers, ["authorization", "cookie"]), "x-fw-trace-id", traceId)
          yield* Effect.annotateLogs(
            logAction(operator, "invoke", `of ${LogText.quote(procedure.tag)} as tenant ${LogText.quote(subject.tenantId)}`),
            { traceId }
          )
          return yield* runtime.call(procedure, { input: body.input, headers, subject, crossTenant }).pipe(
            Effect.flatMap((output) => Schema.encodeUnknown(procedure.output)(output)),
            Effect.map((result) => HttpServerResponse.unsafeJson({ result })),
            Effect.catchTag("ParseError", () =>
              Effect.succeed(HttpResponses.error(500, "InternalError", "the output failed its schema"))),
            Effect.catchAll((failure) => Effect.succeed(HttpResponses.procedureError(failure)))
          )
        }).pipe(
          Effect.catchTags({
            PayloadTooLarge: (error) => Effect.succeed(BodyLimit.payloadTooLargeResponse(error)),
            BodyReadFailed: (error) => Effect.succeed(HttpResponses.error(400, "BodyReadFailed", error.message)),
            ParseError: () => Effect.succeed(HttpResponses.error(400, "InputInvalid", "expected JSON {tag, input, tenantId?}"))
          })
        ))
      )
      yield* router.add(
        "GET",
        `${prefix}/operator`,
        Effect.flatMap(operator(runtime), (gate) =>
          Effect.succeed(Either.isLeft(gate) ? gate.left : HttpServerResponse.unsafeJson({
            via: gate.right.via,
            subject: { type: gate.right.subject.type, id: gate.right.subject.id, tenantId: gate.right.subject.tenantId },
            capabilities: Object.fromEntries(capabilities(runtime).map((name) => [name, Subject.hasScope(gate.right.subject, name)]))
          })))
      )
      yield* router.add(
        "GET",
        `${prefix}/procedures`,
        gated(runtime, Effect.sync(() =>
          HttpServerResponse.unsafeJson({
            procedures: [...runtime.app.procedures.values()].map((p) => ({
              tag: p.tag,
              kind: p.kind,
              guards: p.guards.length,
              publicApi: p.publicApi ?? null
            }))
          })
        ))
      )
      yield* router.add(
        "GET",
        `${prefix}/live`,
        gated(runtime, Effect.map(runtime.liveSubscriptions, (subscriptions) => HttpServerResponse.unsafeJson({ subscriptions })))
      )
      yield* router.add(
        "GET",
        `${prefix}/tables`,
        gated(runtime, Effect.sync(() =>
          HttpServerResponse.unsafeJson({
            tables: runtime.app.tables.map((t) => ({
              name: t.name,
              fields: Object.keys(t.fields),
              tenantField: t.tenantField ?? null,
              indexes: t.indexes
            }))
          })
        ))
      )
    })
  )
