/**
 * Reading a REST request body: within the cap (`BodyLimit.readCapped`), as JSON (or a
 * urlencoded form). There is no multipart parser on REST routes: `multipart/form-data` is answered
 * 415 before anything is read (file uploads go through the storage plugin's binary routes).
 */
import type { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import * as BodyLimit from "./BodyLimit.js"

/** True when the request declares a multipart body. */
export const isMultipart = (headers: Readonly<Record<string, string | undefined>>): boolean =>
  (headers["content-type"] ?? "").trimStart().toLowerCase().startsWith("multipart/form-data")

/** The 415 answer to a multipart body. */
export const multipartRefused = () =>
  HttpResponses.error(
    415,
    "UnsupportedMediaType",
    "multipart/form-data is not accepted here: send JSON, or upload files through the storage routes"
  )

/** True when the request announces a body (a length above zero, or chunked transfer). */
export const announcesBody = (headers: Readonly<Record<string, string | undefined>>): boolean => {
  const length = headers["content-length"]
  return (length !== undefined && length !== "0") || headers["transfer-encoding"] !== undefined
}

/**
 * Reads the raw body within `limit`; the answer on failure (413 with `Connection: close`, or 400
 * for a broken upload). An empty body is `undefined`.
 */
export const read = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<Uint8Array | undefined, HttpServerResponse.HttpServerResponse> =>
  BodyLimit.readCapped(request, limit).pipe(
    Effect.map((bytes) => (bytes.byteLength === 0 ? undefined : bytes)),
    Effect.mapError((error) =>
      error._tag === "PayloadTooLarge"
        ? BodyLimit.payloadTooLargeResponse(error)
        : HttpResponses.error(400, "BodyReadFailed", error.message)
    )
  )

const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * Parses a body: JSON (any `application/json` or `+json` type, or no type), or a urlencoded form
 * as a record of strings. Left: the answer (400 unreadable, 415 another media type).
 */
export const parse = (
  bytes: Uint8Array | undefined,
  contentType: string | undefined
): Either.Either<unknown, HttpServerResponse.HttpServerResponse> => {
  if (bytes === undefined) return Either.right(undefined)
  let text: string
  try {
    text = decoder.decode(bytes)
  } catch {
    return Either.left(HttpResponses.error(400, "InputInvalid", "the request body is not valid UTF-8"))
  }
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  if (type === "application/x-www-form-urlencoded") {
    return Either.right(Object.fromEntries(new URLSearchParams(text)))
  }
  if (type === "" || type === "application/json" || type.endsWith("+json")) {
    try {
      return Either.right(JSON.parse(text))
    } catch {
      return Either.left(HttpResponses.error(400, "InputInvalid", "the request body is not valid JSON"))
    }
  }
  return Either.left(
    HttpResponses.error(415, "UnsupportedMediaType", `content type "${type}" is not accepted: send application/json`)
  )
}
