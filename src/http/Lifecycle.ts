/**
 * Route lifecycle (spec 3.5, 9): a deprecated or sunset route is still served, with
 * `Deprecation: true`, `Sunset: <HTTP date>` and, when the replacement pointer names a path,
 * `Link: <path>; rel="successor-version"`. From the sunset date (Effect `Clock`, so `TestClock`
 * moves it) the route answers 410 with `{version, replacement}`.
 */
import { HttpServerResponse } from "@effect/platform"
import { Clock, Effect } from "effect"

/** What a route declares about its lifecycle. */
export interface Declared {
  readonly version: string | undefined
  readonly deprecated: string | undefined
  readonly sunset: Date | undefined
}

/** The path inside a replacement pointer: `/v2/items` or `GET /v2/items`. */
export const replacementPath = (pointer: string): string | undefined =>
  /^(?:[A-Z]+\s+)?(\/\S*)$/.exec(pointer.trim())?.[1]

/** The headers every answer of a deprecated or sunset route carries (empty for a live route). */
export const headers = (declared: Declared): Readonly<Record<string, string>> => {
  if (declared.deprecated === undefined && declared.sunset === undefined) return {}
  const out: Record<string, string> = { deprecation: "true" }
  if (declared.sunset !== undefined) out.sunset = declared.sunset.toUTCString()
  const path = declared.deprecated === undefined ? undefined : replacementPath(declared.deprecated)
  if (path !== undefined) out.link = `<${path}>; rel="successor-version"`
  return out
}

/** The 410 answer once the sunset date has passed, or `undefined` while the route lives. */
export const gate = (declared: Declared): Effect.Effect<HttpServerResponse.HttpServerResponse | undefined> => {
  const sunset = declared.sunset
  if (sunset === undefined) return Effect.succeed(undefined)
  return Effect.map(Clock.currentTimeMillis, (now) =>
    now < sunset.getTime()
      ? undefined
      : HttpServerResponse.unsafeJson(
        { version: declared.version ?? null, replacement: declared.deprecated ?? null },
        { status: 410, headers: headers(declared) }
      ))
}
