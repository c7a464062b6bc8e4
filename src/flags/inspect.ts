/**
 * The flags inspect routes (spec 4.1), under `/_fw/inspect/plugins/flags`: `GET /list` (every flag
 * with its rollout and lifecycle report, plus refused overrides), `POST /toggle` `{flag, actor?}`,
 * `POST /override` `{flag, actor?, override}` (or `override: null` to clear) and `GET /audit?flag=`.
 * Writes need the operator's `canToggleFlag` capability.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import * as Capabilities from "../app/Capabilities.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Plugin from "../app/Plugin.js"
import type { FlagRegistryShape } from "./FlagRegistry.js"

/** The capability scope that allows toggling and overriding flags. */
export const canToggleFlag = Capabilities.canToggleFlag

const ToggleBody = Schema.parseJson(Schema.Struct({
  flag: Schema.String,
  actor: Schema.optional(Schema.NullOr(Schema.String))
}))

const OverrideBody = Schema.parseJson(Schema.Struct({
  flag: Schema.String,
  actor: Schema.optional(Schema.NullOr(Schema.String)),
  override: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}))

const memoryNote = "the audit trail is kept on the SQL tier only (flagsPlugin({store: 'sql'})); this registry keeps its state in memory"

const readJson = <A, I>(schema: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const bytes = yield* Plugin.readBody
    return Schema.decodeUnknownEither(schema)(new TextDecoder().decode(bytes))
  })


const answerError = (error: { readonly _tag: string; readonly message: string }) =>
  HttpResponses.error(
    error._tag === "FlagNotFound" ? 404 : error._tag === "OverrideRefused" ? 422 : 503,
    error._tag,
    error.message
  )

/** The inspect routes over `registry`. */
export const routes = (registry: FlagRegistryShape): ReadonlyArray<Plugin.Route> => [
  {
    method: "GET",
    path: "/list",
    handler: Effect.gen(function*() {
      const flags = yield* registry.list
      const refusals = yield* registry.refusals
      return HttpServerResponse.unsafeJson({ store: registry.store, usage: registry.usageOptions, flags, refusals })
    })
  },
  {
    method: "POST",
    path: "/toggle",
    capability: canToggleFlag,
    handler: Effect.gen(function*() {
      const body = yield* readJson(ToggleBody)
      if (Either.isLeft(body)) return HttpResponses.error(400, "InputInvalid", "expected JSON {flag, actor?}")
      const result = yield* Effect.either(registry.toggle(body.right.flag, body.right.actor ?? null))
      return Either.isLeft(result) ? answerError(result.left) : HttpServerResponse.unsafeJson(result.right)
    })
  },
  {
    method: "POST",
    path: "/override",
    capability: canToggleFlag,
    handler: Effect.gen(function*() {
      const body = yield* readJson(OverrideBody)
      if (Either.isLeft(body)) return HttpResponses.error(400, "InputInvalid", "expected JSON {flag, actor?, override: object or null}")
      const { actor, flag, override } = body.right
      const result = yield* Effect.either(
        override === null ? registry.clearOverride(flag, actor ?? null) : registry.override(flag, override, actor ?? null)
      )
      return Either.isLeft(result) ? answerError(result.left) : HttpServerResponse.unsafeJson(result.right)
    })
  },
  {
    method: "GET",
    path: "/audit",
    handler: Effect.gen(function*() {
      const params = yield* HttpServerRequest.ParsedSearchParams
      const flag = typeof params.flag === "string" && params.flag.length > 0 ? params.flag : undefined
      const entries = yield* registry.audit(flag)
      return HttpServerResponse.unsafeJson(registry.store === "sql" ? { entries } : { entries, note: memoryNote })
    })
  }
]
