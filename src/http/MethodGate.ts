/**
 * The method gate: the router answers 404 for a method not mounted on a known path, so every such
 * method is mounted with a 405 whose `Allow` lists exactly the methods on that path (with `HEAD`
 * wherever `GET` is), including when several routes share the path.
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
