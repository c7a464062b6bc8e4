/**
 * What the SAML routes answer and how they read a request: the refusal bodies (a reason code and a
 * message, never the XML or the configuration), 503 while SAML cannot run, the posted form, the
 * raw query (redirect-binding signatures cover it as received), and the local-path check of
 * `returnTo` and RelayState.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import * as Plugin from "../app/Plugin.js"
import type { SamlIdpUnavailable, SamlLibraryUnavailable, SamlRejected } from "./Errors.js"

/**
 * Whether `path` is a path on this site: not `//host`, not a URL, no backslash, and printable ASCII
 * only (anything else cannot go into a `Location` header as it is).
 */
export const isLocalPath = (path: string): boolean => {
  if (!path.startsWith("/") || path.startsWith("//") || !/^[\x21-\x7e]*$/.test(path) || path.includes("\\")) return false
  try {
    return new URL(path, "http://local.invalid").origin === "http://local.invalid"
  } catch {
    return false
  }
}

/** A JSON refusal with its reason code. */
export const answer = (status: number, reason: string, message: string) =>
  HttpServerResponse.unsafeJson({ error: "SamlRejected", reason, message }, { status })

/** 400 for what is not a SAML message at all, 401 for a message refused. */
export const refused = (error: SamlRejected) =>
  answer(error.reason === "malformed" || error.reason === "too_large" || error.reason === "dtd" ? 400 : 401, error.reason, error.message)

/** 503, logged: the IdP settings or the XML libraries are unavailable. */
export const unavailable = (error: SamlIdpUnavailable | SamlLibraryUnavailable) =>
  Effect.logError("SAML is unavailable", error.message).pipe(
    Effect.as(HttpServerResponse.text("SAML single sign-on is unavailable", { status: 503 }))
  )

/** The posted `application/x-www-form-urlencoded` body, within the route's cap. */
export const formOf = Effect.map(Plugin.readBody, (body) => new URLSearchParams(Buffer.from(body).toString("utf8")))

/** The query string exactly as received. */
export const rawQueryOf = (request: HttpServerRequest.HttpServerRequest) => {
  const mark = request.url.indexOf("?")
  return mark === -1 ? "" : request.url.slice(mark + 1)
}
