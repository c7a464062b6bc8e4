/**
 * The flags inspect routes (spec 4.1), under `/_fw/inspect/plugins/flags`: `GET /list` (every flag
 * with its rollout, targeting rules and lifecycle report, each also in words, plus refused overrides), `POST /toggle` `{flag, note?}`,
 * `POST /override` `{flag, note?, override}` (or `override: null` to clear) and `GET /audit?flag=`.
 * Writes need the operator's `canToggleFlag` capability and are audited as that operator (the gate's
 * Subject, or `system` / `inspect-token`); `note` (formerly `actor`) is free text kept beside it.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Either, Schema } from "effect"
import * as Capabilities from "../app/Capabilities.js"
import * as HttpResponses from "../app/HttpResponses.js"
import * as Plugin from "../app/Plugin.js"
import * as Subject from "../kernel/Subject.js"
import type { Operator } from "./Commit.js"
import type { FlagRegistryShape } from "./FlagRegistry.js"
import * as FlagWords from "./FlagWords.js"

/** The capability scope that allows toggling and overriding flags. */
export const canToggleFlag = Capabilities.canToggleFlag

const Note = Schema.optional(Schema.NullOr(Schema.String))

const ToggleBody = Schema.parseJson(Schema.Struct({
  flag: Schema.String,
  note: Note,
  /** The former name of `note`: text the caller typed, recorded as a note. */
  actor: Note
}))

const OverrideBody = Schema.parseJson(Schema.Struct({
  flag: Schema.String,
  note: Note,
  actor: Note,
  override: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}))

const memoryNote = "the audit trail is kept on the SQL tier only (flagsPlugin({store: 'sql'})); this registry keeps its state in memory"

const readJson = <A, I>(schema: Schema.Schema<A, I>) =>
  Effect.gen(function*() {
    const bytes = yield* Plugin.readBody
    return Schema.decodeUnknownEither(schema)(new TextDecoder().decode(bytes))
  })


/** The operator the inspect gate admitted (`Subject.CurrentSubject` on an inspect route), with the typed note. */
const operator = (body: { readonly note?: string | null | undefined; readonly actor?: string | null | undefined }) =>
  Effect.map(Subject.CurrentSubject, (subject): Operator => ({ type: subject.type, id: subject.id, note: body.note ?? body.actor ?? null }))

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
      const listed = yield* registry.list
      const refusals = yield* registry.refusals
      const now = yield* Clock.currentTimeMillis
      // Each flag with its targeting rules and, for people, its rule and lifecycle in words.
      const flags = listed.map((flag) => {
        const targeting = registry.resolved(flag.key)?.targeting ?? []
        return { ...flag, targeting, words: FlagWords.describe(flag, targeting, registry.usageOptions, now) }
      })
      return HttpServerResponse.unsafeJson({ store: registry.store, usage: registry.usageOptions, flags, refusals })
    })
  },
  {
    method: "POST",
    path: "/toggle",
    capability: canToggleFlag,
    handler: Effect.gen(function*() {
      const body = yield* readJson(ToggleBody)
      if (Either.isLeft(body)) return HttpResponses.error(400, "InputInvalid", "expected JSON {flag, note?}")
      const result = yield* Effect.either(registry.toggle(body.right.flag, yield* operator(body.right)))
      return Either.isLeft(result) ? answerError(result.left) : HttpServerResponse.unsafeJson(result.right)
    })
  },
  {
    method: "POST",
    path: "/override",
    capability: canToggleFlag,
    handler: Effect.gen(function*() {
      const body = yield* readJson(OverrideBody)
      if (Either.isLeft(body)) return HttpResponses.error(400, "InputInvalid", "expected JSON {flag, note?, override: object or null}")
      const { flag, override } = body.right
      const by = yield* operator(body.right)
      const result = yield* Effect.either(override === null ? registry.clearOverride(flag, by) : registry.override(flag, override, by))
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
