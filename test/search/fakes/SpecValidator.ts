/**
 * Validates every request a fake engine receives against the vendor's OpenAPI spec
 * (`/work/shared/specs/engines/`, data files kept outside the repository). openapi-backend checks
 * the body and parameter schemas; this module adds what it leaves out: an unknown method/path,
 * an undeclared query parameter and a content type the operation does not declare are violations.
 *
 * The specs carry three modelling artefacts (README of the specs folder) that are patched at load:
 * Meilisearch `AttributePatterns`, Typesense object-typed query parameters, Algolia `allOf` of
 * closed objects (plus its schema literally named `query`).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { AjvCustomizer, Document as OasDocument } from "openapi-backend"
import { OpenAPIBackend } from "openapi-backend"
import YAML from "yaml"

/**
 * The Meilisearch spec (generated from Rust) types integers with `u-int8`, `u-int32` and `u-int64`,
 * formats ajv does not know: it would ignore them and print a warning per schema. Declared here,
 * they are checked (a non-negative integer within the width) and nothing is printed.
 */
const withUnsignedFormats: AjvCustomizer = (ajv) => {
  for (const [name, max] of [["u-int8", 2 ** 8 - 1], ["u-int32", 2 ** 32 - 1], ["u-int64", Number.MAX_SAFE_INTEGER]] as const) {
    ajv.addFormat(name, { type: "number", validate: (n: number) => Number.isInteger(n) && n >= 0 && n <= max })
  }
  return ajv
}

/**
 * Where the vendors' specs live: `FW_ENGINE_SPECS`, else `shared/specs/engines` beside the
 * repository (as CI lays it out), else the workplace's copy.
 */
export const specsDir = process.env["FW_ENGINE_SPECS"] ?? [
  path.resolve(import.meta.dirname, "../../../../shared/specs/engines"),
  "/work/shared/specs/engines"
].find((dir) => fs.existsSync(dir)) ?? "/work/shared/specs/engines"

type Json = Record<string, unknown>
const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

const resolveRef = (root: Json, ref: string): Json => {
  let node: unknown = root
  for (const part of ref.replace(/^#\//, "").split("/")) node = (node as Json)[part.replace(/~1/g, "/").replace(/~0/g, "~")]
  return node as Json
}

/** Artefact 1: the wire format of Meilisearch attribute pattern lists is a plain string array. */
const patchMeilisearch = (spec: Json) => {
  const schemas = (spec["components"] as Json)["schemas"] as Json
  schemas["AttributePatterns"] = { type: "array", items: { type: "string" } }
}

/** Artefact 2: Typesense object-typed query parameters are sent flattened (form/explode). */
const patchTypesense = (spec: Json) => {
  for (const item of Object.values(spec["paths"] as Json)) {
    for (const op of Object.values(item as Json)) {
      if (!isObj(op) || !Array.isArray(op["parameters"])) continue
      const out: Array<unknown> = []
      for (const param of op["parameters"] as Array<Json>) {
        let schema = param["schema"] as Json | undefined
        if (schema && typeof schema["$ref"] === "string") schema = resolveRef(spec, schema["$ref"])
        if (param["in"] === "query" && schema && schema["type"] === "object" && isObj(schema["properties"])) {
          const required = new Set(Array.isArray(schema["required"]) ? schema["required"] as Array<string> : [])
          for (const [name, prop] of Object.entries(schema["properties"] as Json)) {
            out.push({ name, in: "query", required: required.has(name), schema: prop })
          }
        } else out.push(param)
      }
      op["parameters"] = out
    }
  }
}

/** Artefact 3: Algolia `allOf` members each close themselves (`additionalProperties: false`): merge them. */
const patchAlgolia = (spec: Json) => {
  // A component named `query` confuses openapi-backend's ref resolution: inline it where used.
  const before = (spec["components"] as Json)["schemas"] as Json
  if ("query" in before) {
    const inline = JSON.stringify(before["query"])
    delete before["query"]
    const text = JSON.stringify(spec).replaceAll("{\"$ref\":\"#/components/schemas/query\"}", inline)
    Object.assign(spec, JSON.parse(text))
  }
  const schemas = (spec["components"] as Json)["schemas"] as Json
  const flatten = (schema: Json, seen: Set<Json>): Json => {
    if (typeof schema["$ref"] === "string") return flatten(resolveRef(spec, schema["$ref"]), seen)
    if (!Array.isArray(schema["allOf"])) return schema
    const merged: Json = { type: "object", properties: {} }
    let closed = false
    const required: Array<string> = []
    for (const member of schema["allOf"] as Array<Json>) {
      const m = flatten(member, seen)
      if (!isObj(m["properties"]) && m["type"] !== "object") return schema
      Object.assign(merged["properties"] as Json, m["properties"] ?? {})
      if (m["additionalProperties"] === false) closed = true
      if (Array.isArray(m["required"])) required.push(...m["required"] as Array<string>)
    }
    if (closed) merged["additionalProperties"] = false
    if (required.length > 0) merged["required"] = required
    for (const key of ["title", "description"]) if (key in schema) merged[key] = schema[key]
    return merged
  }
  for (const [name, schema] of Object.entries(schemas)) {
    if (isObj(schema) && Array.isArray(schema["allOf"])) schemas[name] = flatten(schema, new Set())
  }
  // The merged schemas share member objects; the dereferencer needs a tree.
  Object.assign(spec, JSON.parse(JSON.stringify(spec)))
  const info = spec["info"] as Json
  delete info["summary"]
}

/** The engines whose specs we load. */
export type Engine = "typesense" | "meilisearch" | "algolia"

const load = (engine: Engine): Json => {
  switch (engine) {
    case "typesense": {
      const spec = YAML.parse(fs.readFileSync(path.join(specsDir, "typesense-openapi.yml"), "utf8")) as Json
      patchTypesense(spec)
      return spec
    }
    case "meilisearch": {
      const spec = JSON.parse(fs.readFileSync(path.join(specsDir, "meilisearch-openapi.json"), "utf8")) as Json
      patchMeilisearch(spec)
      return spec
    }
    case "algolia": {
      const spec = YAML.parse(fs.readFileSync(path.join(specsDir, "algolia-search-bundled.yml"), "utf8"), {
        maxAliasCount: -1
      }) as Json
      patchAlgolia(spec)
      return spec
    }
  }
}

/** A request as the fake received it. */
export interface SeenRequest {
  readonly method: string
  readonly path: string
  readonly query: Readonly<Record<string, string>>
  readonly headers: Readonly<Record<string, string>>
  /** Parsed JSON when the content was JSON, else the raw text. */
  readonly body: unknown
  readonly contentType: string
}

/** The outcome of validating one request. */
export interface Verdict {
  readonly operationId: string | undefined
  readonly errors: ReadonlyArray<string>
}

/** A validator for one engine's spec. */
export interface SpecValidator {
  readonly validate: (request: SeenRequest) => Verdict
  /** Compiles the validators of these operations now (they are compiled lazily otherwise, slowly for big schemas). */
  readonly warm: (operationIds: ReadonlyArray<string>) => void
}

const cache = new Map<Engine, Promise<SpecValidator>>()

/** Loads (once per process) the patched spec of `engine` and returns its validator. */
export const validator = (engine: Engine): Promise<SpecValidator> => {
  const existing = cache.get(engine)
  if (existing) return existing
  const made = (async () => {
    const definition = load(engine)
    const api = new OpenAPIBackend({
      definition: definition as unknown as OasDocument,
      quick: true,
      validate: true,
      strict: false,
      customizeAjv: withUnsignedFormats
    })
    await api.init()
    const validate = (request: SeenRequest): Verdict => {
      const req = {
        method: request.method.toLowerCase(),
        path: request.path,
        query: { ...request.query },
        headers: { ...request.headers },
        body: request.body as never
      }
      const operation = api.matchOperation(req)
      if (!operation) return { operationId: undefined, errors: [`no operation ${request.method} ${request.path} in the ${engine} spec`] }
      const errors: Array<string> = []
      const params = (operation.parameters ?? []) as unknown as Array<Json>
      const declared = new Set(params.filter((p) => p["in"] === "query").map((p) => String(p["name"])))
      for (const name of Object.keys(request.query)) {
        if (!declared.has(name)) errors.push(`query parameter "${name}" is not declared by ${operation.operationId}`)
      }
      const body = operation.requestBody as unknown as Json | undefined
      if (body && isObj(body["content"]) && request.contentType !== "") {
        const media = Object.keys(body["content"] as Json)
        if (!media.includes(request.contentType)) {
          errors.push(`content type ${request.contentType} is not declared by ${operation.operationId} (${media.join(", ")})`)
        }
      }
      if (!body && request.body !== undefined && request.body !== "") {
        errors.push(`${operation.operationId} declares no request body`)
      }
      const result = api.validateRequest(req, operation)
      for (const e of result.errors ?? []) errors.push(`${e.instancePath || "/"} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`)
      return { operationId: operation.operationId, errors }
    }
    const warm = (operationIds: ReadonlyArray<string>) => {
      for (const id of operationIds) api.validator.getRequestValidatorsForOperation(id)
    }
    return { validate, warm }
  })()
  cache.set(engine, made)
  return made
}
