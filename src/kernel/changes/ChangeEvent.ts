/**
 * The post-commit change event: one per committed insert, update and delete.
 */
import { Schema } from "effect"
import { Provenance } from "./Provenance.js"

/** The operation a change records. */
export const ChangeOp = Schema.Literal("insert", "update", "delete")
/** @see ChangeOp */
export type ChangeOp = typeof ChangeOp.Type

/**
 * A committed change. `before`/`after` are the encoded rows (JSON-safe); `seq` is a per-process
 * monotonically increasing number in commit order; `at` is the time of the write in epoch ms (Effect `Clock`).
 */
export const ChangeEvent = Schema.Struct({
  table: Schema.String,
  op: ChangeOp,
  id: Schema.String,
  tenantId: Schema.NullOr(Schema.String),
  before: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  after: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  at: Schema.Number,
  seq: Schema.Number,
  provenance: Provenance,
  /** Under fleet scope: the change was committed by another replica (absent for local changes). */
  remote: Schema.optional(Schema.Boolean),
  /**
   * A reference unique to this change across processes, set by the store as it records the change
   * (absent on events made by hand). Work a stager wrote inside the writing transaction (see
   * `ChangeTap.Stager`) names it, so a listener can find that work again once the change is delivered.
   */
  ref: Schema.optional(Schema.String)
})
/** @see ChangeEvent */
export type ChangeEvent = typeof ChangeEvent.Type
