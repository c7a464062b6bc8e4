/**
 * The REST request pipeline, in the spec's order (4.5): method gate (405 with `Allow`), sunset
 * gate (410), decode of `{query, params, body}` (400), guards, handler (a `{status, message}`
 * failure keeps its status, anything else is a 500 that leaks nothing), encode (200), plus
 * deprecation headers and weak ETags. `HEAD` runs the `GET` pipeline; the body is dropped.
 */
import { HttpLayerRouter, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Either, ParseResult, Schema } from "effect"
import { createHash } from "node:crypto"
import * as Errors from "../app/Errors.js"
import * as Guard from "../app/Guard.js"
import * as HttpResponses from "../app/HttpResponses.js"
import { Runtime, toProcedureError } from "../app/Runtime.js"
import * as Provenance from "../kernel/Provenance.js"
import { Store } from "../kernel/Store.js"
import * as Subject from "../kernel/Subject.js"
import * as BodyLimit from "./BodyLimit.js"
import * as Bytes from "./Bytes.js"
import * as Idempotency from "./Idempotency.js"
import * as Sse from "./Sse.js"
import type * as RestRoute from "./RestRoute.js"

const allMethods: ReadonlyArray<RestRoute.Method> = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
const bodyless = new Set(["GET", "HEAD", "OPTIONS", "DELETE"])

/** The routes grouped by path, with the `Allow` value and the widest body cap of each path. */
export const byPath = (routes: ReadonlyArray<RestRoute.Any>, appMaxBodyBytes: number) => {
  const paths = new Map<string, { routes: Array<RestRoute.Any>; allow: string; maxBodyBytes: number }>()
  for (const route of routes) {
    const entry = paths.get(route.path) ?? { routes: [], allow: "", maxBodyBytes: 0 }
    if (entry.routes.some((r) => r.method === route.method)) throw new Error(`${route.method} ${route.path} is declared twice`)
    entry.routes.push(route)
    paths.set(route.path, entry)
  }
  for (const entry of paths.values()) {
    const methods = entry.routes.map((r) => r.method)
    entry.allow = [...methods, ...(methods.includes("GET") ? ["HEAD"] : [])].join(", ")
    // One read per path: the widest cap among the routes that read a body.
    const readers = entry.routes.filter((r) => !bodyless.has(r.method))
    entry.maxBodyBytes = readers.length === 0 ? appMaxBodyBytes : Math.max(...readers.map((r) => r.maxBodyBytes ?? appMaxBodyBytes))
  }
  return paths
}

const weakEtag = (body: Uint8Array) => `W/"${createHash("sha1").update(body).digest("hex")}"`

const lifecycleHeaders = (route: RestRoute.Any): Record<string, string> => ({
  ...(route.deprecated !== undefined || route.sunset !== undefined ? { deprecation: "true" } : {}),
  ...(route.sunset !== undefined ? { sunset: route.sunset.toUTCString() } : {}),
  ...(route.deprecated?.startsWith("/") ? { link: `<${route.deprecated}>; rel="successor-version"` } : {})
})

/** The body of a request as JSON (`undefined` when empty). */
const jsonBody = (raw: Uint8Array) =>
  Effect.try({
    try: () => raw.byteLength === 0 ? undefined : JSON.parse(new TextDecoder().decode(raw)) as unknown,
    catch: () => new Errors.InputInvalid({ message: "the request body is not valid JSON" })
  })

const mutating = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** Serves one route through the pipeline. */
const serve = (route: RestRoute.Any, pathMaxBodyBytes: number, idempotency: Idempotency.Settings | undefined) =>
  Effect.gen(function*() {
    const runtime = yield* Runtime
    const store = yield* Store
    const decode = Schema.decodeUnknown(route.input, { errors: "all", onExcessProperty: "ignore" })
    const encode = Schema.encode(route.output)
    const headers = lifecycleHeaders(route)
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (route.sunset !== undefined && (yield* Clock.currentTimeMillis) >= route.sunset.getTime()) {
        return HttpServerResponse.unsafeJson(
          { version: route.version ?? null, replacement: route.deprecated ?? null },
          { status: 410, headers }
        )
      }
      const raw = bodyless.has(request.method) ? new Uint8Array() : yield* BodyLimit.readCapped(request, pathMaxBodyBytes)
      const body = yield* jsonBody(raw)
      const queryAt = request.url.indexOf("?")
      const query = queryAt === -1 ? {} : Object.fromEntries(new URLSearchParams(request.url.slice(queryAt + 1)))
      const params = Object.fromEntries(
        Object.entries(yield* HttpRouter.params).filter((entry): entry is [string, string] => entry[1] !== undefined)
      )
      const input = yield* decode({ query, params, ...(body === undefined ? {} : { body }) }).pipe(
        Effect.mapError((error) => new Errors.InputInvalid({ message: ParseResult.TreeFormatter.formatErrorSync(error) }))
      )
      const subject = yield* runtime.resolveSubject(request.headers)
      const traceId = Provenance.newTraceId()
      const ctx = { subject, store, headers: request.headers, traceId }
      yield* Guard.runGuards(route.guards, ctx)
      const key = idempotency === undefined || !mutating.has(request.method) ? undefined : request.headers[idempotency.header]
      const run = Effect.gen(function*() {
        const output = yield* Effect.suspend(() => route.handler(input, ctx)).pipe(
          Subject.actingAs(subject),
          Provenance.withProvenance({ traceId, subjectId: subject.id, procedure: `${route.method} ${route.path}` }),
          Effect.catchAllCause((cause) => toProcedureError(cause, traceId, `${route.method} ${route.path}`))
        )
        if (Sse.isSse(output) || Bytes.isBytes(output)) {
          if (!route.streaming && key !== undefined) {
            // An undeclared stream cannot be replayed: fail (500), which releases the claim for a retry.
            yield* Effect.logError(`${route.method} ${route.path} returned a stream without declaring streaming: true`)
            return yield* new Errors.InternalError({ message: "internal error", traceId })
          }
          return Sse.isSse(output) ? yield* Sse.response(output, headers) : Bytes.response(output, headers)
        }
        const encoded = yield* encode(output).pipe(
          Effect.mapError(() => new Errors.InternalError({ message: "internal error", traceId }))
        )
        const response = HttpServerResponse.unsafeJson(encoded, { headers })
        if (!route.etag || response.body._tag !== "Uint8Array") return response
        const etag = weakEtag(response.body.body)
        const matches = (request.headers["if-none-match"] ?? "").split(",").map((t) => t.trim())
        return matches.includes(etag) || matches.includes("*")
          ? HttpServerResponse.empty({ status: 304, headers: { ...headers, etag } })
          : HttpServerResponse.setHeader(response, "etag", etag)
      })
      if (key === undefined) return yield* run
      // Decode and guards passed: only now is the key claimed, so their failures never consume it.
      const id = Idempotency.recordId(subject.tenantId, request.method, route.path, key)
      const claim = yield* Idempotency.claim(store, id, raw, idempotency!.ttlMs)
      switch (claim._tag) {
        case "InFlight":
          return HttpResponses.error(409, "IdempotencyInFlight", "a request with this idempotency key is in progress")
        case "Mismatch":
          return HttpResponses.error(422, "IdempotencyKeyReused", "this idempotency key was used with a different body")
        case "Replay": {
          const { "content-type": contentType, ...replayed } = claim.headers
          return HttpServerResponse.text(claim.body, {
            status: claim.status,
            headers: { ...replayed, "idempotency-replayed": "true" },
            ...(contentType === undefined ? {} : { contentType })
          })
        }
        case "Claimed": {
          const response = yield* Effect.either(run).pipe(
            Effect.map(Either.match({ onLeft: HttpResponses.procedureError, onRight: (response) => response })),
            Effect.onExit((exit) => exit._tag === "Failure" ? Idempotency.release(store, id) : Effect.void)
          )
          if (response.status >= 500 || response.body._tag !== "Uint8Array") {
            yield* Idempotency.release(store, id)
          } else {
            yield* Idempotency.complete(store, id, {
              status: response.status,
              headers: { ...response.headers, "content-type": response.body.contentType },
              body: new TextDecoder().decode(response.body.body)
            })
          }
          return response
        }
      }
    }).pipe(
      Effect.catchAll((failure) =>
        Effect.succeed(
          failure._tag === "PayloadTooLarge"
            ? BodyLimit.payloadTooLargeResponse(failure)
            : failure._tag === "BodyReadFailed"
            ? HttpResponses.error(400, failure._tag, failure.message)
            : HttpServerResponse.setHeaders(HttpResponses.procedureError(failure), headers)
        )
      )
    )
  })

/** Mounts every REST route, and 405 answers (with `Allow`) for the other methods on their paths. */
export const routes = (
  restRoutes: ReadonlyArray<RestRoute.Any>,
  appMaxBodyBytes: number,
  idempotency: Idempotency.Settings | undefined
) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      for (const route of restRoutes) {
        if (idempotency !== undefined && route.streaming && mutating.has(route.method)) {
          return yield* Effect.dieMessage(
            `${route.method} ${route.path}: a streaming route cannot be idempotent (its response cannot be replayed)`
          )
        }
      }
      // There is no multipart parser on REST routes: uploads use the storage plugin's routes.
      const multipartRefused = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
        (request.headers["content-type"] ?? "").toLowerCase().startsWith("multipart/form-data")
          ? HttpResponses.error(415, "UnsupportedMediaType", "multipart/form-data is not accepted here")
          : HttpResponses.error(404, "NotFound", "no such route"))
      for (const method of ["POST", "PUT", "PATCH"] as const) {
        if (!restRoutes.some((r) => r.path === "/form/*" && r.method === method)) yield* router.add(method, "/form/*", multipartRefused)
      }
      for (const [path, entry] of byPath(restRoutes, appMaxBodyBytes)) {
        for (const route of entry.routes) yield* router.add(route.method, route.path, yield* serve(route, entry.maxBodyBytes, idempotency))
        const notAllowed = HttpResponses.error(405, "MethodNotAllowed", `allowed: ${entry.allow}`, { allow: entry.allow })
        for (const method of allMethods.filter((m) => !entry.routes.some((r) => r.method === m))) {
          yield* router.add(method, path as `/${string}`, Effect.succeed(notAllowed))
        }
      }
    })
  )

