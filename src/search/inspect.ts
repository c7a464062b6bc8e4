/**
 * The search inspect routes (spec 4.1), under `/_fw/inspect/plugins/search`: `GET /indexes`,
 * `GET /drift`, `POST /resync` (capability `canResyncSearch`), `POST /reindex` with body
 * `{index}` (capability `canReindexSearch`), which streams its progress as NDJSON lines.
 */
import { HttpServerResponse } from "@effect/platform"
import { Effect, Mailbox, Option, Schema, Stream } from "effect"
import * as Capabilities from "../app/Capabilities.js"
import * as Plugin from "../app/Plugin.js"
import { Store } from "../kernel/store/Store.js"
import type { ReindexProgress, Running } from "./Sync.js"
import { SearchDrift } from "./tables.js"

const json = (status: number, body: unknown) => HttpServerResponse.unsafeJson(body, { status })

const ReindexBody = Schema.parseJson(Schema.Struct({ index: Schema.String }))

/** The routes, over the running plugin. */
export const routes = (running: Effect.Effect<Running, unknown>): ReadonlyArray<Plugin.Route> => [
  {
    method: "GET",
    path: "/indexes",
    handler: Effect.gen(function*() {
      const { engine } = yield* running
      return json(200, { indexes: yield* engine.view })
    })
  },
  {
    method: "GET",
    path: "/drift",
    handler: Effect.gen(function*() {
      const store = yield* Store
      const entries = yield* store.find(SearchDrift, { orderBy: "lastFailedAt", limit: 1000 })
      return json(200, {
        entries: entries.map((entry) => ({
          index: entry.indexName,
          rowId: entry.rowId,
          table: entry.tableName,
          state: entry.state,
          lastError: entry.lastError,
          errorKind: entry.errorKind,
          attempts: entry.attempts,
          firstFailedAt: entry.firstFailedAt,
          lastFailedAt: entry.lastFailedAt
        }))
      })
    })
  },
  {
    method: "POST",
    path: "/resync",
    capability: Capabilities.canResyncSearch,
    handler: Effect.gen(function*() {
      const { engine } = yield* running
      return json(200, yield* engine.resync())
    })
  },
  {
    method: "POST",
    path: "/reindex",
    capability: Capabilities.canReindexSearch,
    handler: Effect.gen(function*() {
      const body = yield* Effect.either(Effect.flatMap(Plugin.readBody, (bytes) =>
        Schema.decodeUnknown(ReindexBody)(new TextDecoder().decode(bytes))))
      if (body._tag === "Left") return json(400, { _tag: "InputInvalid", message: "the body must be JSON {\"index\": <name>}" })
      const { engine } = yield* running
      const name = body.right.index
      if (!(yield* engine.view).some((view) => view.name === name)) {
        return json(404, { _tag: "SearchIndexNotFound", message: `no search index "${name}" is declared` })
      }
      // Progress lines are produced by the reindex fiber and streamed as they come.
      const mailbox = yield* Mailbox.make<string>()
      const onProgress = (progress: ReindexProgress) => Effect.asVoid(mailbox.offer(`${JSON.stringify(progress)}\n`))
      yield* engine.reindex(name, onProgress).pipe(
        Effect.tap((result) =>
          Option.isNone(result)
            ? mailbox.offer(`${JSON.stringify({ index: name, phase: "refused", message: `a reindex of "${name}" is already running` })}\n`)
            : Effect.void
        ),
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.logError(`search: reindex of "${name}" failed`, cause),
            mailbox.offer(`${JSON.stringify({ index: name, phase: "failed" })}\n`)
          )
        ),
        Effect.ensuring(mailbox.end),
        Effect.forkDaemon
      )
      return HttpServerResponse.stream(
        Mailbox.toStream(mailbox).pipe(Stream.encodeText),
        { contentType: "application/x-ndjson" }
      )
    })
  }
]
