/**
 * The OpenAPI 3.1 document of an app's REST routes, built as an `@effect/platform` HttpApi from the
 * route descriptors (so schemas, parameters and bodies come from the same Schemas that decode
 * requests). Operations are grouped per version under a version tag with `x-fw-api-version`.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import type { Context } from "effect"
import { Schema, SchemaAST } from "effect"
import type * as RestRoute from "./RestRoute.js"

/** The `{query, params, body}` parts of a route's input, when its input is a struct. */
const inputParts = (route: RestRoute.Any) => {
  const ast = SchemaAST.encodedAST(route.input.ast)
  const part = (name: string) => {
    if (ast._tag !== "TypeLiteral") return undefined
    const signature = ast.propertySignatures.find((p) => p.name === name)
    return signature === undefined ? undefined : Schema.make(signature.type)
  }
  return route.documented !== undefined
    ? { query: route.documented.query, params: part("params"), body: route.documented.body }
    : { query: part("query"), params: part("params"), body: part("body") }
}

const operationName = (route: RestRoute.Any) =>
  `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ?? "").toUpperCase())}`

/** The builder methods used here, with the HttpApi's static types erased. */
interface Builder<Self> {
  readonly annotate: <I, S>(tag: Context.Tag<I, S>, value: S) => Self
}
interface EndpointBuilder extends Builder<EndpointBuilder> {
  readonly setPath: (schema: Schema.Schema.Any) => EndpointBuilder
  readonly setUrlParams: (schema: Schema.Schema.Any) => EndpointBuilder
  readonly setPayload: (schema: Schema.Schema.Any) => EndpointBuilder
  readonly addSuccess: (schema: Schema.Schema.Any) => EndpointBuilder
}
interface GroupBuilder extends Builder<GroupBuilder> {
  readonly add: (endpoint: EndpointBuilder) => GroupBuilder
}
interface ApiBuilder extends Builder<ApiBuilder> {
  readonly add: (group: GroupBuilder) => ApiBuilder
}

/**
 * Builds the document. Routes are only known at runtime, so the HttpApi is assembled with its
 * types erased (the builder boundary of this module: `Builder` above); it serves the document only.
 */
export const api = (
  title: string,
  routes: ReadonlyArray<RestRoute.Any>
): HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.Any, unknown, unknown> => {
  const versions = new Map<string, Array<RestRoute.Any>>()
  for (const route of routes) {
    const version = route.version ?? "unversioned"
    versions.set(version, [...(versions.get(version) ?? []), route])
  }
  let built = HttpApi.make("app") as unknown as ApiBuilder
  for (const [version, members] of versions) {
    let group = HttpApiGroup.make(version, { topLevel: true }) as unknown as GroupBuilder
    for (const route of members) {
      const { body, params, query } = inputParts(route)
      let endpoint = HttpApiEndpoint.make(route.method)(operationName(route), route.path) as unknown as EndpointBuilder
      if (params !== undefined) endpoint = endpoint.setPath(params)
      if (query !== undefined) endpoint = endpoint.setUrlParams(query)
      if (body !== undefined) endpoint = endpoint.setPayload(body)
      endpoint = endpoint.addSuccess(route.output).annotate(OpenApi.Override, {
        "x-fw-api-version": version,
        ...(route.sunset ? { "x-sunset": route.sunset.toISOString() } : {})
      })
      if (route.summary !== undefined) endpoint = endpoint.annotate(OpenApi.Summary, route.summary)
      if (route.deprecated !== undefined || route.sunset !== undefined) endpoint = endpoint.annotate(OpenApi.Deprecated, true)
      group = group.add(endpoint)
    }
    built = built.add(group)
  }
  return built.annotate(OpenApi.Title, title) as unknown as HttpApi.HttpApi<string, HttpApiGroup.HttpApiGroup.Any, unknown, unknown>
}

/** The OpenAPI document of `routes`. */
export const make = (title: string, routes: ReadonlyArray<RestRoute.Any>): OpenApi.OpenAPISpec => OpenApi.fromApi(api(title, routes))
