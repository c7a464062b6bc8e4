import { afterAll, afterEach, beforeAll, expect } from "vitest"
import * as EngineA from "../../../src/search/EngineA.js"
import { conformance } from "../conformance/suite.js"
import type { TypesenseFake } from "../fakes/TypesenseFake.js"
import { startTypesense } from "../fakes/TypesenseFake.js"

let fake: TypesenseFake
beforeAll(async () => {
  fake = await startTypesense()
})
afterAll(() => fake.close())
// Every request typesense-js sent must be one the Typesense OpenAPI spec allows.
afterEach(() => {
  expect(fake.violations).toEqual([])
})

conformance("engineA (Typesense, fake)", () => EngineA.layer({ url: fake.url, apiKey: "test-key" }), { prefix: "ta" })
