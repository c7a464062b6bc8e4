/**
 * The three engine backends with their fakes, for tests that run the same scenario on each.
 */
import { afterAll, afterEach, beforeAll, expect } from "vitest"
import * as EngineA from "../../../src/search/EngineA.js"
import * as EngineB from "../../../src/search/EngineB.js"
import * as EngineC from "../../../src/search/EngineC.js"
import type { EngineBackend, EngineTuning } from "../../../src/search/EngineSupport.js"
import type { AlgoliaFake } from "../fakes/AlgoliaFake.js"
import { startAlgolia } from "../fakes/AlgoliaFake.js"
import type { FakeServer } from "../fakes/FakeCore.js"
import type { MeilisearchFake } from "../fakes/MeilisearchFake.js"
import { startMeilisearch } from "../fakes/MeilisearchFake.js"
import type { TypesenseFake } from "../fakes/TypesenseFake.js"
import { startTypesense } from "../fakes/TypesenseFake.js"

/** The running fakes. */
export interface Fakes {
  typesense: TypesenseFake
  meilisearch: MeilisearchFake
  algolia: AlgoliaFake
}

/** One engine under test. */
export interface EngineCase {
  readonly name: "engineA" | "engineB" | "engineC"
  readonly fake: () => FakeServer
  readonly make: (tuning?: EngineTuning) => EngineBackend
}

/** Starts the three fakes for the file, asserts after each test that no request violated a spec. */
export const useFakes = (): { readonly fakes: Fakes; readonly cases: ReadonlyArray<EngineCase> } => {
  const fakes = {} as Fakes
  beforeAll(async () => {
    const [typesense, meilisearch, algolia] = await Promise.all([startTypesense(), startMeilisearch(), startAlgolia()])
    Object.assign(fakes, { typesense, meilisearch, algolia })
  })
  afterAll(async () => {
    await Promise.all([fakes.typesense.close(), fakes.meilisearch.close(), fakes.algolia.close()])
  })
  afterEach(() => {
    for (const fake of [fakes.typesense, fakes.meilisearch, fakes.algolia]) {
      fake.clearFaults()
      const violations = fake.violations.splice(0)
      expect(violations).toEqual([])
    }
    fakes.typesense.rejectDocuments = undefined
    fakes.meilisearch.failTasks = undefined
    fakes.algolia.stallTasks = false
  })
  const cases: ReadonlyArray<EngineCase> = [
    { name: "engineA", fake: () => fakes.typesense, make: (t = {}) => EngineA.make({ url: fakes.typesense.url, apiKey: "k", ...t }) },
    { name: "engineB", fake: () => fakes.meilisearch, make: (t = {}) => EngineB.make({ url: fakes.meilisearch.url, apiKey: "k", ...t }) },
    { name: "engineC", fake: () => fakes.algolia, make: (t = {}) => EngineC.make({ appId: "APP", apiKey: "k", hosts: [fakes.algolia.url], ...t }) }
  ]
  return { fakes, cases }
}

let counter = 0
/** A fresh index name. */
export const freshIndex = (prefix: string) => `${prefix}_${Date.now().toString(36)}_${counter++}`
