/**
 * Projection of procedures carrying `publicApi` (spec 2.9, 4.5 rule 4). A query becomes `GET`, a
 * mutation or action `POST` (override with `method`; never `GET` for them: `PublicApiInvalid`), at `/<version>/<tag as path>` (version
 * `v1` by default, `todos.list` → `/v1/todos/list`; override with `path`, which is then literal
 * unless `version` is also given). `GET` input comes from the query string (read as `QueryInput`
 * describes: `?minRank=3` is the number 3 for a number field), other methods read the JSON body;
 * `:params` of a custom path are input fields too. Calls run through the procedure runtime, so
 * guards, row filter and tenant scoping are exactly the socket's. `stream: 'sse'` on a query
 * projects a live `text/event-stream`; on a mutation or action it is ignored. `scopes` adds a
 * `requireScope` for each listed scope. `idempotent: false` keeps the idempotency binding off.
 * `rateLimit` limits the projected route (see `RateLimit`).
 */
import * as Procedure from "../app/Procedure.js"
import * as RateLimit from "../app/RateLimit.js"
import type * as Endpoint from "./Endpoint.js"
import * as RestRoute from "./RestRoute.js"

/** The default version of projected procedures. */
export const defaultVersion = "v1"

/** Where a procedure is projected: method, path, version, and whether it is a live query. */
export const placement = (procedure: Procedure.Any, publicApi: Procedure.PublicApi) => {
  const what = `procedure "${procedure.tag}" (publicApi)`
  const live = publicApi.stream === "sse" && procedure.kind === "query"
  const method: RestRoute.Method = live ? "GET" : publicApi.method ?? (procedure.kind === "query" ? "GET" : "POST")
  let path: `/${string}`
  if (publicApi.path !== undefined) {
    RestRoute.checkPath(publicApi.path, what)
    path = RestRoute.versionedPath(publicApi.path, publicApi.version, what)
  } else {
    path = RestRoute.versionedPath(`/${procedure.tag.split(".").join("/")}`, publicApi.version ?? defaultVersion, what)
  }
  return { method, path, live, version: RestRoute.versionOfPath(path) ?? publicApi.version ?? defaultVersion }
}

/** The endpoints of every procedure with `publicApi`. Throws `RestRouteInvalid` for a bad path or version. */
export const endpoints = (procedures: Iterable<Procedure.Any>): ReadonlyArray<Endpoint.Endpoint> => {
  const out: Array<Endpoint.Endpoint> = []
  for (const procedure of procedures) {
    const publicApi = procedure.publicApi
    if (publicApi === undefined) continue
    // Checked at definition; checked again here for a procedure object built by hand.
    Procedure.checkMethod(procedure.kind, procedure.tag, publicApi)
    const { live, method, path, version } = placement(procedure, publicApi)
    const scopes = publicApi.scopes ?? []
    out.push({
      method,
      path,
      version,
      lifecycle: { version, deprecated: undefined, sunset: undefined },
      maxBodyBytes: undefined,
      streaming: live,
      claimable: RestRoute.mutatingMethods.has(method) && publicApi.idempotent !== false,
      summary: `${procedure.kind} ${procedure.tag}`,
      // Checked at definition; checked again here for a procedure object built by hand.
      rateLimit: RateLimit.check(publicApi.rateLimit, `procedure "${procedure.tag}" (publicApi)`),
      operationId: procedure.tag,
      serve: live ? { _tag: "Live", procedure, scopes } : { _tag: "Procedure", procedure, scopes }
    })
  }
  return out
}
