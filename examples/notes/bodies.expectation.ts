/**
 * A data-quality expectation: at most a quarter of the notes may have an empty body. It is counted
 * per write over the whole table (every tenant: data quality is the operator's concern), and the
 * page shows its status and rate, never anyone's notes.
 */
import { defineExpectation } from "@fw/framework/standing"
import { Notes } from "./tables.js"

/** The share of notes that may have an empty body (0 words) before the expectation is violated. */
export const maxEmptyShare = 0.25

export default defineExpectation({
  name: "notes-have-bodies",
  on: { table: Notes },
  invariant: { kind: "valueBounds", column: "words", min: 1, maxViolationRate: maxEmptyShare },
  severity: "warn"
})
