/**
 * The store conformance suite: one set of behaviours every tier must show identically. Each tier
 * runs it with a recording ChangeTap (see `test/kernel/support/RecordingTap.ts`).
 */
import { layer } from "@effect/vitest"
import { changes } from "./cases/Changes.js"
import { crud } from "./cases/Crud.js"
import { limits } from "./cases/Limits.js"
import { queries } from "./cases/Queries.js"
import { tenancy } from "./cases/Tenancy.js"
import { transactions } from "./cases/Transactions.js"
import type { Tier } from "./fixtures.js"

/** Runs the conformance suite on `tier`, built once for all its cases. */
export const conformance = (name: string, tier: Tier, options: { readonly timeout?: number } = {}) =>
  layer(tier, { timeout: options.timeout ?? 60_000 })(`store conformance: ${name}`, (it) => {
    crud(it)
    queries(it)
    transactions(it)
    tenancy(it)
    changes(it)
    limits(it)
  })
