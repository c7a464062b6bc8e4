import { afterAll, afterEach, beforeAll, expect } from "vitest"
import * as EngineB from "../../../src/search/EngineB.js"
import { conformance } from "../conformance/suite.js"
import type { MeilisearchFake } from "../fakes/MeilisearchFake.js"
import { startMeilisearch } from "../fakes/MeilisearchFake.js"

let fake: MeilisearchFake
beforeAll(async () => {
  fake = await startMeilisearch()
})
afterAll(() => fake.close())
// Every request meilisearch-js sent must be one the Meilisearch OpenAPI spec allows.
afterEach(() => {
  expect(fake.violations).toEqual([])
})

conformance("engineB (Meilisearch, fake)", () => EngineB.layer({ url: fake.url, apiKey: "test-key" }), { prefix: "mb", typoSemantics: "engine" })
