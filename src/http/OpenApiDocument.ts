/**
 * The OpenAPI 3.1 document of the public REST surface (`/openapi.json`). Every hand-written route
 * and projected procedure is an `HttpApiEndpoint` of one `HttpApi`; operations are grouped per API
 * version under a tag named after the version, and each versioned operation carries the extension
 * `x-fw-api-version`. Every operation has a summary and its security (`OpenApiSecurity`); the
 * document has the app's servers and licence (`finish`), so it passes Redocly's recommended rules.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import type { Context } from "effect"
import { Schema, SchemaAST } from "effect"
import type * as App from "../app/App.js"
import type * as AuthStrategy from "../app/AuthStrategy.js"
import type * as Endpoint from "./Endpoint.js"
import * as ErrorBodies from "./ErrorBodies.js"
import * as OpenApiSecurity from "./OpenApiSecurity.js"
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
export interface Builder<Self> {
  readonly annotate: <I, S>(tag: Context.Tag<I, S>, value: S) => Self
}
/** An `HttpApiEndpoint` as built here. */
export interface AnyEndpoint extends Builder<AnyEndpoint> {
  readonly setPath: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly setUrlParams: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly setPayload: (schema: Schema.Schema.Any) => AnyEndpoint
  readonly addSuccess: (schema: Schema.Schema.Any) => AnyEndpoint
  /** Adds an error answer: its status annotated on the schema (`ErrorBodies.at`). */
  readonly addError: (schema: Schema.Schema.Any) => AnyEndpoint
}
/** An `HttpApiGroup` as built here. */
export interface AnyGroup extends Builder<AnyGroup> {
  readonly add: (endpoint: AnyEndpoint) => AnyGroup
}
/** An `HttpApi` as built here. */
export interface AnyApi extends Builder<AnyApi> {
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

/** The guards and scopes in front of an endpoint. */
const guardsOf = (endpoint: Endpoint.Endpoint) =>
  endpoint.serve._tag === "Route"
    ? { guards: endpoint.serve.route.guards, scopes: [] }
    : { guards: endpoint.serve.procedure.guards, scopes: endpoint.serve.scopes }

const documentErrors = (endpoint: Endpoint.Endpoint, base: AnyEndpoint, idempotency: boolean, security: OpenApiSecurity.Security): AnyEndpoint => {
  let out = base
    .addError(ErrorBodies.at(ErrorBodies.InputInvalid, 400))
    .addError(ErrorBodies.at(ErrorBodies.Unauthenticated, 401))
    .addError(ErrorBodies.at(ErrorBodies.InternalError, 500))
  if (security.authenticated) out = out.addError(ErrorBodies.at(ErrorBodies.GuardRefused, 401))
  if (security.guarded) out = out.addError(ErrorBodies.at(ErrorBodies.GuardRefused, 403))
  if (endpoint.lifecycle.sunset !== undefined) out = out.addError(ErrorBodies.at(Gone, 410))
  if (RestRoute.mutatingMethods.has(endpoint.method)) {
    out = out.addError(ErrorBodies.at(ErrorBodies.PayloadTooLarge, 413)).addError(ErrorBodies.at(Problem, 415))
    if (idempotency && endpoint.claimable) out = out.addError(ErrorBodies.at(Problem, 409)).addError(ErrorBodies.at(Problem, 422))
  }
  if (endpoint.rateLimit !== undefined) out = out.addError(ErrorBodies.at(Problem, 429)).addError(ErrorBodies.at(Problem, 503))
  return out
}

/** An operation's `security`, set on the generated operation (the HttpApi knows only its own middleware). */
export const withSecurity = (base: AnyEndpoint, security: OpenApiSecurity.Security): AnyEndpoint =>
  base.annotate(OpenApi.Transform, (operation) => ({ ...operation, security: security.requirements }))

const annotate = (endpoint: Endpoint.Endpoint, base: AnyEndpoint): AnyEndpoint => {
  // Every operation has a summary (Redocly's `operation-summary`): the method and path when none is declared.
  let out = base.annotate(OpenApi.Identifier, endpoint.operationId).annotate(OpenApi.Summary, endpoint.summary ?? `${endpoint.method} ${endpoint.path}`)
  const { deprecated, sunset } = endpoint.lifecycle
  if (deprecated !== undefined || sunset !== undefined) out = out.annotate(OpenApi.Deprecated, true)
  const extensions: Record<string, unknown> = {}
  if (endpoint.version !== undefined) extensions[versionExtension] = endpoint.version
  if (deprecated !== undefined) extensions["x-fw-replacement"] = deprecated
  if (sunset !== undefined) extensions["x-fw-sunset"] = sunset.toISOString()
  return Object.keys(extensions).length === 0 ? out : out.annotate(OpenApi.Override, extensions)
}

/** The HttpApi endpoint documenting `endpoint`. */
const endpointOf = (endpoint: Endpoint.Endpoint, idempotency: boolean, schemes: ReadonlyArray<string>): AnyEndpoint => {
  // The one erasure boundary: the builder's generics cannot follow runtime descriptors.
  const base = HttpApiEndpoint.make(endpoint.method)(endpoint.operationId, endpoint.path) as unknown as AnyEndpoint
  const { guards, scopes } = guardsOf(endpoint)
  const security = OpenApiSecurity.of(guards, schemes, scopes)
  const documented = documentErrors(endpoint, documentOutput(endpoint, documentInput(endpoint, base)), idempotency, security)
  return withSecurity(annotate(endpoint, documented), security)
}

/** The platform's own decode error, which every HttpApi lists at 400: fw answers `InputInvalid` instead. */
const platformDecodeError = ["HttpApiDecodeError", "Issue", "PropertyKey"]

/** `spec` without the platform's `HttpApiDecodeError` answers and their schemas. */
const withoutDecodeError = (spec: OpenApi.OpenAPISpec): OpenApi.OpenAPISpec => {
  const decodeError = { $ref: "#/components/schemas/HttpApiDecodeError" }
  const isDecodeError = (schema: unknown) => JSON.stringify(schema) === JSON.stringify(decodeError)
  const paths: Record<string, unknown> = {}
  for (const [path, item] of Object.entries(spec.paths)) {
    paths[path] = Object.fromEntries(Object.entries(item).map(([method, operation]) => {
      const responses = Object.fromEntries(Object.entries((operation as OpenApi.OpenAPISpecOperation).responses).map(([status, response]) => {
        const content = response.content?.["application/json"]
        const schema = content?.schema as { readonly anyOf?: ReadonlyArray<unknown> } | undefined
        if (schema === undefined || !(isDecodeError(schema) || schema.anyOf?.some(isDecodeError))) return [status, response]
        const rest = (schema.anyOf ?? []).filter((member) => !isDecodeError(member))
        if (rest.length === 0) return [status, { description: response.description }]
        return [status, { ...response, content: { ...response.content, "application/json": { ...content, schema: rest.length === 1 ? rest[0] : { anyOf: rest } } } }]
      }))
      return [method, { ...operation, responses }]
    }))
  }
  const schemas = Object.fromEntries(Object.entries(spec.components.schemas).filter(([name]) => !platformDecodeError.includes(name)))
  return { ...spec, paths: paths as OpenApi.OpenAPISpec["paths"], components: { ...spec.components, schemas } }
}

/**
 * The document-level parts every fw document has: the app's servers (default `/`), licence and
 * version, and its auth strategies as security schemes (those some operation names). Operations
 * carry their own `security`, so the root's empty one is dropped.
 */
export const finish = (
  options: App.OpenApi,
  schemes: Readonly<Record<string, AuthStrategy.SecurityScheme>>
) =>
(spec: Record<string, unknown>): Record<string, unknown> => {
  const { security: _root, ...rest } = withoutDecodeError(spec as unknown as OpenApi.OpenAPISpec)
  // `license.identifier` is OpenAPI 3.1; the platform's types know only `url`.
  const license = options.license.identifier === undefined
    ? { name: options.license.name, url: options.license.url }
    : { name: options.license.name, identifier: options.license.identifier }
  // A scheme no operation names would be an unused component (Redocly warns): only the used ones.
  const used = new Set<string>()
  for (const item of Object.values(rest.paths)) {
    for (const operation of Object.values(item)) {
      for (const requirement of (operation as OpenApi.OpenAPISpecOperation).security ?? []) for (const name of Object.keys(requirement)) used.add(name)
    }
  }
  return {
    ...rest,
    info: { ...rest.info, version: options.version, license },
    servers: options.servers.map((server) => ({ ...server })),
    components: { ...rest.components, securitySchemes: Object.fromEntries(Object.entries(schemes).filter(([name]) => used.has(name))) }
  }
}

/** The HttpApi of an app's REST surface: one group (tag) per version. */
export const api = (
  app: App.App,
  endpoints: ReadonlyArray<Endpoint.Endpoint>,
  idempotency: boolean
): DocumentApi => {
  const groups = new Map<string, Array<Endpoint.Endpoint>>()
  for (const endpoint of endpoints) {
    const tag = endpoint.version ?? unversionedTag
    groups.set(tag, [...(groups.get(tag) ?? []), endpoint])
  }
  const schemes = OpenApiSecurity.schemesOf(app.auth)
  let out = (HttpApi.make(app.name) as unknown as AnyApi)
    .annotate(OpenApi.Title, app.name)
    .annotate(OpenApi.Description, `The public REST routes of ${app.name}.`)
    .annotate(OpenApi.Transform, finish(app.openApi, schemes))
  for (const [tag, members] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    let group = (HttpApiGroup.make(tag, { topLevel: true }) as unknown as AnyGroup).annotate(
      OpenApi.Description,
      tag === unversionedTag ? "Routes without an API version" : `API version ${tag}`
    )
    if (tag !== unversionedTag) group = group.annotate(OpenApi.Override, { [versionExtension]: tag })
    for (const endpoint of members) group = group.add(endpointOf(endpoint, idempotency, Object.keys(schemes)))
    out = out.add(group)
  }
  return out as unknown as DocumentApi
}
