/**
 * The document the docs page (`/docs`, Scalar with its script inline: it works offline) renders:
 * the public REST document, and when the procedures' document is published, its operations too,
 * in one sidebar. The viewer takes one document, so the two are merged here: a procedure's
 * operation id or tag that a REST operation already uses gets a `rpc.` prefix or a
 * ` (procedures)` suffix, and a schema name both use for different schemas is renamed on the
 * procedures' side.
 */
import { HttpApi, HttpApiScalar, OpenApi } from "@effect/platform"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const objectAt = (value: Json, key: string): Json => {
  const found = value[key]
  return isObject(found) ? found : {}
}
const arrayAt = (value: Json, key: string): ReadonlyArray<Json> => {
  const found = value[key]
  return Array.isArray(found) ? found.filter(isObject) : []
}

/** `rest` with the operations, tags and schemas of `procedures` added. */
export const merge = (rest: Json, procedures: Json): Json => {
  const restSchemas = objectAt(objectAt(rest, "components"), "schemas")
  let procedureSchemas = objectAt(objectAt(procedures, "components"), "schemas")
  let procedurePaths = objectAt(procedures, "paths")
  // Same name, other schema: the procedures' copy is renamed and its references follow.
  for (const [name, schema] of Object.entries(procedureSchemas)) {
    if (!(name in restSchemas) || JSON.stringify(restSchemas[name]) === JSON.stringify(schema)) continue
    let renamed = `${name}_procedures`
    for (let n = 2; renamed in restSchemas || renamed in procedureSchemas; n++) renamed = `${name}_procedures${n}`
    const rewrite = <A>(value: A): A =>
      JSON.parse(JSON.stringify(value).replaceAll(`"#/components/schemas/${name}"`, `"#/components/schemas/${renamed}"`)) as A
    const { [name]: moved, ...others } = procedureSchemas
    procedureSchemas = rewrite({ ...others, [renamed]: moved })
    procedurePaths = rewrite(procedurePaths)
  }
  const operationIds = new Set<unknown>()
  for (const item of Object.values(objectAt(rest, "paths"))) {
    if (isObject(item)) for (const operation of Object.values(item)) if (isObject(operation)) operationIds.add(operation["operationId"])
  }
  const restTags = new Set(arrayAt(rest, "tags").map((tag) => tag["name"]))
  const tagOf = (name: unknown) => restTags.has(name) ? `${String(name)} (procedures)` : name
  const paths: Json = { ...objectAt(rest, "paths") }
  for (const [path, item] of Object.entries(procedurePaths)) {
    if (!isObject(item)) continue
    const operations: Json = {}
    for (const [method, operation] of Object.entries(item)) {
      if (!isObject(operation)) continue
      const id = operation["operationId"]
      operations[method] = {
        ...operation,
        operationId: operationIds.has(id) ? `rpc.${String(id)}` : id,
        tags: Array.isArray(operation["tags"]) ? operation["tags"].map(tagOf) : operation["tags"]
      }
    }
    paths[path] = { ...objectAt(paths, path), ...operations }
  }
  const components = objectAt(rest, "components")
  return {
    ...rest,
    info: {
      ...objectAt(rest, "info"),
      description: `${String(objectAt(rest, "info")["description"] ?? "")}\n\n${String(objectAt(procedures, "info")["description"] ?? "")}`.trim()
    },
    paths,
    tags: [...arrayAt(rest, "tags"), ...arrayAt(procedures, "tags").map((tag) => ({ ...tag, name: tagOf(tag["name"]) }))],
    components: {
      ...components,
      schemas: { ...restSchemas, ...procedureSchemas },
      securitySchemes: { ...objectAt(components, "securitySchemes"), ...objectAt(objectAt(procedures, "components"), "securitySchemes") }
    }
  }
}

/** The `/docs` route rendering `rest`, merged with `procedures` when given (both generated documents). */
export const layer = (name: string, rest: OpenApi.OpenAPISpec, procedures: OpenApi.OpenAPISpec | undefined) => {
  const restSpec = rest as unknown as Json
  const spec = procedures === undefined ? restSpec : merge(restSpec, procedures as unknown as Json)
  // The viewer reads its document from an HttpApi: one whose generated document is replaced by `spec`.
  const page = HttpApi.make(name).annotate(OpenApi.Transform, () => spec)
  return HttpApiScalar.layerHttpLayerRouter({ api: page, path: "/docs" })
}
