/**
 * The inspect surface under `/_fw/inspect/`: gated by a bearer token (env `FW_INSPECT_TOKEN`,
 * compared in constant time; the surface is closed while it is unset). Core routes list the app's
 * procedures and tables and invoke a procedure; plugins add theirs under `/_fw/inspect/plugins/<name>`.
 */
import { Headers, HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Config, Effect, Option, Redacted, Schema } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import * as Subject from "../kernel/Subject.js"
import * as HttpResponses from "../app/HttpResponses.js"
import { Runtime } from "../app/Runtime.js"
import * as BodyLimit from "../http/BodyLimit.js"

/** The subject inspect routes run as. */
export const inspectSubject = Subject.make({ type: "system", id: "inspect", tenantId: null, scopes: ["*"] })

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

/**
 * Checks the inspect token on the current request; `undefined` when allowed, otherwise the answer:
 * 404 while no token is configured (the surface does not exist), 401 for a missing or wrong token.
 */
export const gate: Effect.Effect<HttpServerResponse.HttpServerResponse | undefined, never, HttpServerRequest.HttpServerRequest> =
  Effect.gen(function*() {
    const configured = yield* token
    if (Option.isNone(configured)) return HttpResponses.error(404, "InspectDisabled", "the inspect surface is disabled: set FW_INSPECT_TOKEN")
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers["authorization"] ?? ""
    const given = /^Bearer\s+(.+)$/i.exec(header)?.[1]?.trim()
    if (given === undefined || !tokenMatches(given, Redacted.value(configured.value))) {
      return HttpResponses.error(401, "InspectUnauthorized", "a valid inspect token is required", {
        "www-authenticate": "Bearer"
      })
    }
    return undefined
  })

/** Wraps a route handler in the token gate. */
export const gated = <E, R>(
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(gate, (refusal) => refusal === undefined ? handler : Effect.succeed(refusal))

const InvokeBody = Schema.parseJson(Schema.Struct({
  tag: Schema.String,
  input: Schema.optionalWith(Schema.Unknown, { default: () => ({}) }),
  /** Run as a member of this tenant (default: the system, across tenants). */
  tenantId: Schema.optional(Schema.NullOr(Schema.String))
}))

/** The core inspect routes: `POST /invoke`, `GET /procedures`, `GET /tables`, `GET /live`. */
export const routes = (maxBodyBytes: number) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const runtime = yield* Runtime
      yield* router.add(
        "POST",
        `${prefix}/invoke`,
        gated(Effect.gen(function*() {
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
          const headers = Headers.remove(request.headers, ["authorization", "cookie"])
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
        `${prefix}/procedures`,
        gated(Effect.sync(() =>
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
        gated(Effect.map(runtime.liveSubscriptions, (subscriptions) => HttpServerResponse.unsafeJson({ subscriptions })))
      )
      yield* router.add(
        "GET",
        `${prefix}/tables`,
        gated(Effect.sync(() =>
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
