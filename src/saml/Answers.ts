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

const hostOf = (url: string | undefined) => (url !== undefined && URL.canParse(url) ? new URL(url).host : undefined)

/**
 * Whether the browser says the request comes from this site: `Sec-Fetch-Site` `same-origin`,
 * `same-site` or `none` (typed, a bookmark); without it, a `Referer` on this host. Anything else,
 * including no sign at all, is not.
 */
export const sameSite = (headers: HttpServerRequest.HttpServerRequest["headers"]): boolean => {
  const site = headers["sec-fetch-site"]
  if (site !== undefined) return site === "same-origin" || site === "same-site" || site === "none"
  const host = headers["host"]?.toLowerCase()
  return host !== undefined && hostOf(headers["referer"]) === host
}

/** Whether a posted request comes from this origin: its `Origin` (else `Sec-Fetch-Site`) says so. */
export const sameOrigin = (headers: HttpServerRequest.HttpServerRequest["headers"]): boolean => {
  const origin = headers["origin"]
  const host = headers["host"]?.toLowerCase()
  if (origin !== undefined) return host !== undefined && hostOf(origin) === host
  return headers["sec-fetch-site"] === "same-origin"
}

/**
 * The page a cross-site `GET /saml/logout` gets: a button that posts to `action` from this origin.
 * It runs no script, cannot be framed, and may post only to this site.
 */
export const logoutConfirmation = (action: string) =>
  HttpServerResponse.html(
    `<!doctype html><html><head><meta charset="utf-8"><title>Log out</title></head><body>` +
      `<form method="post" action="${action}"><p>Log out of this site?</p><button type="submit">Log out</button></form>` +
      `</body></html>`
  ).pipe(
    HttpServerResponse.setHeaders({
      "content-security-policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
      "x-frame-options": "DENY",
      "cache-control": "no-store",
      "referrer-policy": "same-origin"
    })
  )
