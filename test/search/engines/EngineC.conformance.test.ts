import { afterAll, afterEach, beforeAll, expect } from "vitest"
import * as EngineC from "../../../src/search/EngineC.js"
import { conformance } from "../conformance/suite.js"
import type { AlgoliaFake } from "../fakes/AlgoliaFake.js"
import { startAlgolia } from "../fakes/AlgoliaFake.js"

let fake: AlgoliaFake
beforeAll(async () => {
  fake = await startAlgolia()
})
afterAll(() => fake.close())
// Every request algoliasearch sent must be one the Algolia OpenAPI spec allows.
afterEach(() => {
  expect(fake.violations).toEqual([])
})

conformance("engineC (Algolia, fake)", () => EngineC.layer({ appId: "TESTAPP", apiKey: "test-key", hosts: [fake.url] }), { prefix: "ac", typoSemantics: "engine" })
