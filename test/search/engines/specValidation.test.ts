/**
 * The fakes' request validation bites: a request the vendor's OpenAPI spec does not allow is
 * answered 400 and recorded as a violation, whether it comes raw or through the official client;
 * the exact deviations of the official clients (notes §1.6) are the only ones tolerated.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AlgoliaFake } from "../fakes/AlgoliaFake.js"
import { startAlgolia } from "../fakes/AlgoliaFake.js"
import type { MeilisearchFake } from "../fakes/MeilisearchFake.js"
import { startMeilisearch } from "../fakes/MeilisearchFake.js"
import type { TypesenseFake } from "../fakes/TypesenseFake.js"
import { startTypesense } from "../fakes/TypesenseFake.js"

let typesense: TypesenseFake
let meilisearch: MeilisearchFake
let algolia: AlgoliaFake
beforeAll(async () => {
  ;[typesense, meilisearch, algolia] = await Promise.all([startTypesense(), startMeilisearch(), startAlgolia()])
})
afterAll(async () => {
  await Promise.all([typesense.close(), meilisearch.close(), algolia.close()])
})

const send = async (base: string, method: string, path: string, body?: unknown, contentType = "application/json") => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": contentType },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) })
  })
  return { status: response.status, body: await response.text() }
}

describe("the fakes reject what the vendors' specs do not allow", () => {
  it("Typesense: an undeclared query parameter, an unknown path, a wrong body type", async () => {
    typesense.violations.splice(0)
    await send(typesense.url, "POST", "/collections", { name: "v1", fields: [{ name: "title", type: "string" }] })
    expect(typesense.violations).toEqual([])
    const ok = await send(typesense.url, "GET", "/collections/v1/documents/search?q=a&query_by=title")
    expect(ok.status).toBe(200)
    const bogus = await send(typesense.url, "GET", "/collections/v1/documents/search?q=a&query_by=title&bogus=1")
    expect(bogus.status).toBe(400)
    expect(bogus.body).toMatch(/bogus/)
    const path = await send(typesense.url, "GET", "/collections/v1/not-a-route")
    expect(path.status).toBe(400)
    const badType = await send(typesense.url, "POST", "/collections", { name: 7, fields: "title" })
    expect(badType.status).toBe(400)
    const badEnum = await send(typesense.url, "POST", "/collections/v1/documents?action=bogus", { id: "1" })
    expect(badEnum.status).toBe(400)
    expect(typesense.violations.length).toBe(4)
    typesense.violations.splice(0)
  })

  it("Typesense: the import's text/plain and throwOnFail are tolerated only on the import route", async () => {
    typesense.violations.splice(0)
    await send(typesense.url, "POST", "/collections", { name: "v2", fields: [{ name: "title", type: "string" }] })
    const imported = await send(typesense.url, "POST", "/collections/v2/documents/import?action=upsert&throwOnFail=true", "{\"id\":\"1\",\"title\":\"x\"}", "text/plain")
    expect(imported.status).toBe(200)
    expect(typesense.violations).toEqual([])
    const elsewhere = await send(typesense.url, "GET", "/collections/v2/documents/search?q=a&query_by=title&throwOnFail=true")
    expect(elsewhere.status).toBe(400)
    expect(typesense.violations.length).toBe(1)
    typesense.violations.splice(0)
  })

  it("Meilisearch: a string where the spec wants an integer, an unknown field, a wrong content type", async () => {
    meilisearch.violations.splice(0)
    await send(meilisearch.url, "POST", "/indexes", { uid: "v1", primaryKey: "id" })
    const ok = await send(meilisearch.url, "POST", "/indexes/v1/search", { q: "a", limit: 5, attributesToHighlight: ["x"] })
    expect(ok.status).not.toBe(400)
    expect(meilisearch.violations).toEqual([])
    const limit = await send(meilisearch.url, "POST", "/indexes/v1/search", { q: "a", limit: "5" })
    expect(limit.status).toBe(400)
    expect(limit.body).toMatch(/limit/)
    const unknown = await send(meilisearch.url, "PATCH", "/indexes/v1/settings", { typoTolerance: { enabled: "yes" } })
    expect(unknown.status).toBe(400)
    const type = await send(meilisearch.url, "POST", "/indexes/v1/search", "q=a", "application/x-www-form-urlencoded")
    expect(type.status).toBe(400)
    expect(meilisearch.violations.length).toBe(3)
    meilisearch.violations.splice(0)
  })

  it("Meilisearch through the official client: a request outside the spec fails", async () => {
    meilisearch.violations.splice(0)
    const { Meilisearch } = await import("meilisearch")
    const client = new Meilisearch({ host: meilisearch.url, apiKey: "k" })
    await client.createIndex("v2", { primaryKey: "id" }).waitTask()
    // A caller passing a wrongly typed parameter through: the client forwards it, the spec refuses it.
    await expect(client.index("v2").search("a", { limit: "5" as unknown as number })).rejects.toThrow()
    expect(meilisearch.violations.length).toBe(1)
    expect(meilisearch.violations[0]).toMatch(/limit must be integer/)
    meilisearch.violations.splice(0)
  })

  it("Algolia: typoTolerance must be a boolean or an enum; undeclared query parameters are refused", async () => {
    algolia.violations.splice(0)
    const ok = await send(algolia.url, "POST", "/1/indexes/v1/batch?x-algolia-agent=test", { requests: [{ action: "updateObject", body: { objectID: "1", t: "a" } }] }, "text/plain")
    expect(ok.status).toBe(200)
    expect(algolia.violations).toEqual([])
    const typo = await send(algolia.url, "POST", "/1/indexes/v1/query", { query: "a", typoTolerance: 1 })
    expect(typo.status).toBe(400)
    const action = await send(algolia.url, "POST", "/1/indexes/v1/batch", { requests: [{ action: "explode", body: {} }] })
    expect(action.status).toBe(400)
    const param = await send(algolia.url, "POST", "/1/indexes/v1/query?debug=1", { query: "a" })
    expect(param.status).toBe(400)
    expect(algolia.violations.length).toBe(3)
    algolia.violations.splice(0)
  })

  it("Algolia through the official client: an unknown search parameter fails", async () => {
    algolia.violations.splice(0)
    const { algoliasearch } = await import("algoliasearch")
    const client = algoliasearch("APP", "k", { hosts: [{ url: "127.0.0.1", port: algolia.port, protocol: "http", accept: "readWrite" }] })
    await expect(client.searchSingleIndex({ indexName: "v1", searchParams: { query: "a", notAParameter: true } as never })).rejects.toThrow()
    expect(algolia.violations.length).toBe(1)
    expect(algolia.violations[0]).toMatch(/notAParameter/)
    algolia.violations.splice(0)
  })
})
