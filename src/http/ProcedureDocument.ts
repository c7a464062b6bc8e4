/**
 * The OpenAPI 3.1 document of an app's procedures called as plain JSON (`/rpc/openapi.json`): one
 * `POST /rpc/<tag>` operation per procedure (the app's and its plugins'), with the input schema as
 * the request body, the output schema as the `200` answer, the error bodies of docs/errors.md per
 * status (`ErrorBodies.byStatus`; a handler's `ProcedureFailure` and a plugin's typed errors may
 * come with any status, so they are listed with each and as `default`), its security from its
 * guards (`OpenApiSecurity`), its summary (declared, else `<kind> <tag>`), and a tag per namespace
 * (`notes.add` → `notes`). Live queries stay with the WebSocket and are not listed.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi, OpenApiJsonSchema } from "@effect/platform"
import { Option, Schema, SchemaAST } from "effect"
import type * as App from "../app/App.js"
import type * as Errors from "../app/Errors.js"
import type * as Procedure from "../app/Procedure.js"
import * as ErrorBodies from "./ErrorBodies.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import * as OpenApiSecurity from "./OpenApiSecurity.js"

/** Where the document is served. */
export const path = "/rpc/openapi.json"

/** The tag of procedures whose tag has no namespace (`ping`). */
export const rootTag = "procedures"

/** The extension naming an operation's procedure kind (`query`, `mutation`, `action`). */
export const kindExtension = "x-fw-procedure-kind"

/** The namespace of a tag: all but its last segment. */
export const namespaceOf = (tag: string): string => {
  const dot = tag.lastIndexOf(".")
  return dot === -1 ? rootTag : tag.slice(0, dot)
}

const areaBodies = new Map<string, Schema.Schema.AnyNoContext>()

/** The HTTP body of a plugin's typed error: `{_tag, message}` with its own status. */
const areaBody = (error: Errors.AreaErrorClass): Schema.Schema.AnyNoContext => {
  let body = areaBodies.get(error._tag)
  if (body === undefined) {
    body = Schema.Struct({ _tag: Schema.Literal(error._tag), message: Schema.String }).annotations({
      identifier: error._tag,
      title: error._tag,
      description: `A typed error of the plugin that serves this procedure (${error._tag}), with the status it carries.`
    })
    areaBodies.set(error._tag, body)
  }
  return body
}

/** The `$ref` of a component schema. */
const ref = (schema: Schema.Schema.AnyNoContext) => ({
  $ref: `#/components/schemas/${Option.getOrThrow(SchemaAST.getIdentifierAnnotation(schema.ast))}`
})

/** The error bodies a procedure may answer at `status`, given its security. */
const bodiesAt = (status: number, bodies: ReadonlyArray<Schema.Schema.AnyNoContext>, security: OpenApiSecurity.Security, schemes: number) =>
  bodies.filter((body) => {
    if (body === ErrorBodies.GuardRefused) return status === 401 ? security.authenticated : security.guarded
    if (body === ErrorBodies.Unauthenticated) return schemes > 0
    return true
  })

/**
 * `schema`, or where it has no JSON Schema (a `Schema.declare` without a `jsonSchema` annotation)
 * any JSON value, said so: one such procedure must not take the whole document, nor the boot, down.
 */
const documentable = (schema: Schema.Schema.AnyNoContext, what: string): Schema.Schema.AnyNoContext => {
  try {
    OpenApiJsonSchema.make(schema)
    return schema
  } catch {
    return Schema.Unknown.annotations({ description: `The ${what} (its schema has no JSON Schema form).` })
  }
}

const endpointOf = (
  procedure: Procedure.Any,
  schemes: ReadonlyArray<string>,
  areaErrors: ReadonlyArray<Schema.Schema.AnyNoContext>
): OpenApiDocument.AnyEndpoint => {
  // The one erasure boundary: the builder's generics cannot follow runtime descriptors.
  let out = (HttpApiEndpoint.make("POST")(procedure.tag, `/rpc/${procedure.tag}`) as unknown as OpenApiDocument.AnyEndpoint)
    .setPayload(documentable(procedure.input, "procedure's input"))
    .addSuccess(documentable(procedure.output, "procedure's output"))
  const security = OpenApiSecurity.of(procedure.guards, schemes)
  const statuses = new Map<number, string>()
  for (const [status, { bodies, description }] of ErrorBodies.byStatus) {
    const known = bodiesAt(status, bodies, security, schemes.length)
    if (known.length === 0) continue
    statuses.set(status, description)
    for (const body of [...known, ErrorBodies.ProcedureFailure, ...areaErrors]) out = out.addError(ErrorBodies.at(body, status))
  }
  const others = [ErrorBodies.ProcedureFailure, ...areaErrors].map(ref)
  out = out
    .annotate(OpenApi.Identifier, procedure.tag)
    .annotate(OpenApi.Summary, procedure.summary ?? `${procedure.kind} ${procedure.tag}`)
    .annotate(OpenApi.Override, { [kindExtension]: procedure.kind })
  if (procedure.description !== undefined) out = out.annotate(OpenApi.Description, procedure.description)
  return out.annotate(OpenApi.Transform, (operation) => {
    const responses: Record<string, Record<string, unknown>> = { ...operation["responses"] }
    for (const [status, description] of statuses) responses[status] = { ...responses[status], description }
    responses["200"] = { ...responses["200"], description: "The procedure's output." }
    responses["default"] = {
      description: "Any other status a handler or a plugin refuses with.",
      content: { "application/json": { schema: others.length === 1 ? others[0] : { anyOf: others } } }
    }
    return { ...operation, security: security.requirements, responses }
  })
}

/** The plugin error classes of each plugin procedure's tag. */
const areaErrorsByTag = (app: App.App): ReadonlyMap<string, ReadonlyArray<Schema.Schema.AnyNoContext>> => {
  const out = new Map<string, ReadonlyArray<Schema.Schema.AnyNoContext>>()
  for (const plugin of app.plugins) {
    const bodies = (plugin.errors ?? []).map(areaBody)
    for (const procedure of plugin.procedures ?? []) out.set(procedure.tag, bodies)
  }
  return out
}

/** The HttpApi of an app's procedures: one group (tag) per namespace. */
export const api = (app: App.App): OpenApiDocument.DocumentApi => {
  const schemes = OpenApiSecurity.schemesOf(app.auth)
  const areaErrors = areaErrorsByTag(app)
  const groups = new Map<string, Array<Procedure.Any>>()
  for (const procedure of app.procedures.values()) {
    const namespace = namespaceOf(procedure.tag)
    groups.set(namespace, [...(groups.get(namespace) ?? []), procedure])
  }
  let out = (HttpApi.make(`${app.name}-procedures`) as unknown as OpenApiDocument.AnyApi)
    .annotate(OpenApi.Title, `${app.name} procedures`)
    .annotate(
      OpenApi.Description,
      `Every procedure of ${app.name} as plain JSON: \`POST /rpc/<tag>\` with the input as the body answers the output; ` +
        "an error answers its status with `{_tag, message}`."
    )
    .annotate(OpenApi.Transform, OpenApiDocument.finish(app.openApi, schemes))
  for (const [namespace, members] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    // Group identifiers are prefixed so that a namespace never replaces a REST version's group.
    let group = (HttpApiGroup.make(`procedures:${namespace}`, { topLevel: true }) as unknown as OpenApiDocument.AnyGroup)
      .annotate(OpenApi.Title, namespace)
      .annotate(
        OpenApi.Description,
        namespace === rootTag ? "Procedures without a namespace" : `Procedures under \`${namespace}.\``
      )
    for (const procedure of members) group = group.add(endpointOf(procedure, Object.keys(schemes), areaErrors.get(procedure.tag) ?? []))
    out = out.add(group)
  }
  return out as unknown as OpenApiDocument.DocumentApi
}
