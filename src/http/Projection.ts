/**
 * Projection of procedures with `publicApi` onto REST (spec 2.9, 4.5 rule 4): a query becomes a
 * GET, a mutation or action a POST (or `publicApi.method`), at `/<version>/<tag as path>` (default
 * version `v1`, dots become slashes) or `publicApi.path`. GET input comes from the query string,
 * others from the JSON body; the call goes through the same runtime as rpc (auth, guards, tenant).
 *
 * Query strings carry text: a GET input is decoded from the strings as given, and if that fails,
 * from the strings read as JSON where they parse (`?limit=10` gives the number 10).
 */
import type { Headers } from "@effect/platform"
import { Effect, Either, Fiber, Schema, SchemaAST, Stream } from "effect"
import type * as Procedure from "../app/Procedure.js"
import type { RuntimeShape } from "../app/Runtime.js"
import * as RestRoute from "./RestRoute.js"
import * as Sse from "./Sse.js"

const LooseInput = Schema.Struct({
  query: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.optional(Schema.Unknown)
})

const readJson = (value: string): unknown => {
  try {
    return JSON.parse(value)
  } catch {
    return value
  }
}

/** The query-string form of an input struct, for the document: each field is a string on the wire. */
const queryStrings = (input: Schema.Schema.Any): Schema.Schema.Any => {
  const ast = SchemaAST.encodedAST(input.ast)
  if (ast._tag !== "TypeLiteral") return Schema.Record({ key: Schema.String, value: Schema.String })
  return Schema.Struct(Object.fromEntries(ast.propertySignatures.map((signature) => [
    String(signature.name),
    signature.isOptional ? Schema.optional(Schema.String) : Schema.String
  ])))
}

/**
 * The live query of a query as server-sent events: `snapshot` with the first result, `delta` with
 * each new result after a relevant commit (the whole result: clients replace, not patch), and
 * `error` when the caller is refused (a revoked scope, a failed token) before the stream ends.
 */
const liveEvents = (procedure: Procedure.Any, runtime: RuntimeShape, input: unknown, headers: Headers.Headers) =>
  Sse.sse((emit, end) => {
    const encode = Schema.encodeUnknownSync(procedure.output)
    let first = true
    const fiber = Effect.runFork(
      runtime.live(procedure, { input, headers }).pipe(
        Stream.runForEach((result) =>
          Effect.sync(() => {
            emit(first ? "snapshot" : "delta", { data: encode(result) })
            first = false
          })
        ),
        Effect.catchAll((error) => Effect.sync(() => emit("error", { _tag: error._tag, message: error.message }))),
        Effect.ensuring(Effect.sync(end))
      )
    )
    return () => void Effect.runFork(Fiber.interrupt(fiber))
  })

/** The REST route of a procedure's `publicApi`. */
export const route = (procedure: Procedure.Any, runtime: RuntimeShape): RestRoute.Any | undefined => {
  const api = procedure.publicApi
  if (api === undefined) return undefined
  const streams = api.stream === "sse" && procedure.kind === "query"
  const method = streams ? "GET" : api.method ?? (procedure.kind === "query" ? "GET" : "POST")
  const version = api.version ?? "v1"
  const fromQuery = method === "GET"
  const isInput = Schema.decodeUnknownEither(procedure.input)
  const route = RestRoute.defineRestRoute({
    method,
    path: api.path ?? `/${procedure.tag.split(".").join("/")}`,
    version,
    summary: `${procedure.kind} ${procedure.tag}`,
    input: LooseInput,
    output: procedure.output,
    handler: ({ body, query }, ctx) => {
      const input = !fromQuery
        ? body ?? {}
        : Either.isRight(isInput(query))
        ? query
        : Object.fromEntries(Object.entries(query).map(([key, value]) => [key, readJson(value)]))
      return streams
        ? Effect.succeed(liveEvents(procedure, runtime, input, ctx.headers))
        : runtime.call(procedure, { input, headers: ctx.headers })
    }
  })
  return { ...route, documented: fromQuery ? { query: queryStrings(procedure.input) } : { body: procedure.input } }
}

/** The projected routes of every procedure with a `publicApi`. */
export const routes = (procedures: Iterable<Procedure.Any>, runtime: RuntimeShape): ReadonlyArray<RestRoute.Any> =>
  [...procedures].flatMap((procedure) => {
    const projected = route(procedure, runtime)
    return projected === undefined ? [] : [projected]
  })
