/**
 * The method gate: the router answers 404 for a method not mounted on a known path, so every such
 * method is mounted with a 405 whose `Allow` lists exactly the methods on that path (with `HEAD`
 * wherever `GET` is), including when several routes share the path. A method that another route
 * answers there through a broader pattern (`GET /items/:id` on `/items/search`, a plugin route on
 * the same path) is not gated: the router prefers the more specific path, so a 405 there would
 * hide that route.
 */
import { HttpLayerRouter } from "@effect/platform"
import { Effect } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"

/** The methods the router can mount. */
const mountable = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const

const order = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

/** The `Allow` header value for the methods mounted on a path. */
export const allowOf = (methods: Iterable<string>): string => {
  const all = new Set(methods)
  if (all.has("GET")) all.add("HEAD")
  return [...all].sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(", ")
}

/** The 405 answer. */
export const refusal = (allow: string) =>
  HttpResponses.error(405, "MethodNotAllowed", `this path allows ${allow}`, { allow })

/** 405 routes for every method not in `methods` on `path`. */
export const routes = (path: `/${string}`, methods: ReadonlySet<string>) => {
  const allow = allowOf(methods)
  return mountable
    .filter((method) => !methods.has(method))
    .map((method) => HttpLayerRouter.route(method, path, Effect.succeed(refusal(allow))))
}

/** A route on the listener, as the gate sees it. */
export interface Mounted {
  readonly method: string
  readonly path: string
}

/**
 * Whether the pattern `general` answers every path the pattern `specific` answers, segment by
 * segment: a `:param` takes any one segment, a `*` the rest.
 */
export const covers = (general: string, specific: string): boolean => {
  const outer = general.split("/")
  const inner = specific.split("/")
  for (let i = 0; i < inner.length; i++) {
    const segment = outer[i]
    if (segment === undefined) return false
    if (segment === "*") return true
    if (inner[i] === "*" || !(segment.startsWith(":") || segment === inner[i])) return false
  }
  return outer.length === inner.length
}

/** The methods answered on `path`: its own, and those of every mounted route whose pattern covers it. */
export const methodsOn = (path: string, own: ReadonlySet<string>, mounted: ReadonlyArray<Mounted>): ReadonlySet<string> => {
  const methods = new Set(own)
  for (const route of mounted) if (covers(route.path, path)) methods.add(route.method)
  return methods
}
