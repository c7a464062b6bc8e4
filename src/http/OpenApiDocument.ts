/**
 * The OpenAPI 3.1 document (`/openapi.json`) and docs page (`/docs`, Scalar, inline: it works
 * offline). Every hand-written route and projected procedure is an `HttpApiEndpoint` of one
 * `HttpApi`; operations are grouped per API version under a tag named after the version, and
 * each versioned operation carries the extension `x-fw-api-version`.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import type { Context } from "effect"
import { Schema, SchemaAST } from "effect"
import * as Errors from "../app/Errors.js"
import * as Guard from "../app/Guard.js"
import * as BodyLimit from "./BodyLimit.js"
import type * as Endpoint from "./Endpoint.js"
import * as RestRoute from "./RestRoute.js"

/** The extension naming an operation's API version. */
export const versionExtension = "x-fw-api-version"

/** The tag of operations without a version. */
export const unversionedTag = "unversioned"

/** The 410 body of a sunset route. */
export const Gone = Schema.Struct({
  version: Schema.NullOr(Schema.String),
  replacement: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Gone", description: "The route is past its sunset date." })

/** The body of the other error answers. */
export const Problem = Schema.Struct({
  _tag: Schema.String,
  message: Schema.String
}).annotations({ identifier: "Problem" })

const EventStream = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))

/** The type-side AST of field `name` of a struct schema, without its optional `undefined`. */
const fieldAst = (ast: SchemaAST.AST, name: string): SchemaAST.AST | undefined => {
  const struct = ast._tag === "TypeLiteral" ? ast : ast._tag === "Transformation" && ast.to._tag === "TypeLiteral" ? ast.to : undefined
  const field = struct?.propertySignatures.find((p) => p.name === name)?.type
  if (field?._tag === "Union") {
    const defined = field.types.filter((t) => t._tag !== "UndefinedKeyword")
    return defined.length === 1 ? defined[0] : SchemaAST.Union.make(defined)
  }
  return field
}

const isStruct = (ast: SchemaAST.AST | undefined): ast is SchemaAST.AST =>
  ast !== undefined && (ast._tag === "TypeLiteral" || (ast._tag === "Transformation" && ast.to._tag === "TypeLiteral"))

const pathParams = (path: string) => [...path.matchAll(/:([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!)

/** Every `:param` of the path, typed as declared when the input declares it, a string otherwise. */
const pathSchema = (path: string, declared: SchemaAST.AST | undefined) =>
  Schema.Struct(Object.fromEntries(pathParams(path).map((name) => {
    const field = declared === undefined ? undefined : fieldAst(declared, name)
    return [name, field === undefined ? Schema.String : Schema.make(field)]
  })))

/** The builder methods used here, with the HttpApi's static types erased (endpoints are runtime data). */
interface Builder<Self> {
  readonly annotate: <I, S>(tag: Context.Tag<I, S>, value: S) => Self
}
interface AnyEndpoint extends Builder<AnyEndpoint> {
  readonly setPath: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly setUrlParams: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly setPayload: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly addSuccess: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly addError: (schema: Schema.Schema.Any, annotations: { readonly status: number }) => AnyEndpoint
}
interface AnyGroup extends Builder<AnyGroup> {
  readonly add: (endpoint: AnyEndpoint) => AnyGroup
}
interface AnyApi extends Builder<AnyApi> {
  readonly add: (group: AnyGroup) => AnyApi
}

/** The document's HttpApi, as `OpenApi.fromApi` and the docs page take it. */
export type DocumentApi = HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.Any, unknown, unknown>

const documentInput = (endpoint: Endpoint.Endpoint, base: AnyEndpoint): AnyEndpoint => {
  let out = base
  const serve = endpoint.serve
  const withBody = RestRoute.mutatingMethods.has(endpoint.method)
  if (serve._tag === "Route") {
    const input = serve.route.input.ast
    if (pathParams(endpoint.path).length > 0) out = out.setPath(pathSchema(endpoint.path, fieldAst(input, "params")))
    const query = fieldAst(input, "query")
    if (isStruct(query)) out = out.setUrlParams(Schema.make(query))
    const body = fieldAst(input, "body")
    if (withBody && body !== undefined) out = out.setPayload(Schema.make(body))
    return out
  }
  const input = serve.procedure.input
  if (pathParams(endpoint.path).length > 0) out = out.setPath(pathSchema(endpoint.path, input.ast))
  if (!withBody) return isStruct(input.ast) ? out.setUrlParams(input) : out
  return out.setPayload(input)
}

const documentOutput = (endpoint: Endpoint.Endpoint, base: AnyEndpoint): AnyEndpoint => {
  const serve = endpoint.serve
  if (serve._tag === "Live") return base.addSuccess(EventStream)
  if (serve._tag === "Procedure") return base.addSuccess(serve.procedure.output)
  if (endpoint.streaming) {
    return base.addSuccess(Schema.Uint8ArrayFromSelf.pipe(HttpApiSchema.withEncoding({ kind: "Uint8Array", contentType: "application/octet-stream" })))
  }
  return base.addSuccess(serve.route.output)
}

const documentErrors = (endpoint: Endpoint.Endpoint, base: AnyEndpoint, idempotency: boolean): AnyEndpoint => {
  let out = base
    .addError(Errors.InputInvalid, { status: 400 })
    .addError(Errors.Unauthenticated, { status: 401 })
    .addError(Errors.InternalError, { status: 500 })
  const guarded = endpoint.serve._tag === "Route" ? endpoint.serve.route.guards.length > 0 : true
  if (guarded) out = out.addError(Guard.GuardRefused, { status: 403 })
  if (endpoint.lifecycle.sunset !== undefined) out = out.addError(Gone, { status: 410 })
  if (RestRoute.mutatingMethods.has(endpoint.method)) {
    out = out.addError(BodyLimit.PayloadTooLarge, { status: 413 }).addError(Problem, { status: 415 })
    if (idempotency && endpoint.claimable) out = out.addError(Problem, { status: 409 }).addError(Problem, { status: 422 })
  }
  if (endpoint.rateLimit !== undefined) out = out.addError(Problem, { status: 429 }).addError(Problem, { status: 503 })
  return out
}

const annotate = (endpoint: Endpoint.Endpoint, base: AnyEndpoint): AnyEndpoint => {
  let out = base.annotate(OpenApi.Identifier, endpoint.operationId)
  if (endpoint.summary !== undefined) out = out.annotate(OpenApi.Summary, endpoint.summary)
  const { deprecated, sunset } = endpoint.lifecycle
  if (deprecated !== undefined || sunset !== undefined) out = out.annotate(OpenApi.Deprecated, true)
  const extensions: Record<string, unknown> = {}
  if (endpoint.version !== undefined) extensions[versionExtension] = endpoint.version
  if (deprecated !== undefined) extensions["x-fw-replacement"] = deprecated
  if (sunset !== undefined) extensions["x-fw-sunset"] = sunset.toISOString()
  return Object.keys(extensions).length === 0 ? out : out.annotate(OpenApi.Override, extensions)
}

/** The HttpApi endpoint documenting `endpoint`. */
const endpointOf = (endpoint: Endpoint.Endpoint, idempotency: boolean): AnyEndpoint => {
  // The one erasure boundary: the builder's generics cannot follow runtime descriptors.
  const base = HttpApiEndpoint.make(endpoint.method)(endpoint.operationId, endpoint.path) as unknown as AnyEndpoint
  return annotate(endpoint, documentErrors(endpoint, documentOutput(endpoint, documentInput(endpoint, base)), idempotency))
}

/** The HttpApi of an app's REST surface: one group (tag) per version. */
export const api = (
  name: string,
  endpoints: ReadonlyArray<Endpoint.Endpoint>,
  idempotency: boolean
): DocumentApi => {
  const groups = new Map<string, Array<Endpoint.Endpoint>>()
  for (const endpoint of endpoints) {
    const tag = endpoint.version ?? unversionedTag
    groups.set(tag, [...(groups.get(tag) ?? []), endpoint])
  }
  let out = HttpApi.make(name).annotate(OpenApi.Title, name).annotate(OpenApi.Version, "1.0.0") as unknown as AnyApi
  for (const [tag, members] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    let group = (HttpApiGroup.make(tag, { topLevel: true }) as unknown as AnyGroup).annotate(
      OpenApi.Description,
      tag === unversionedTag ? "Routes without an API version" : `API version ${tag}`
    )
    if (tag !== unversionedTag) group = group.annotate(OpenApi.Override, { [versionExtension]: tag })
    for (const endpoint of members) group = group.add(endpointOf(endpoint, idempotency))
    out = out.add(group)
  }
  return out as unknown as DocumentApi
}
