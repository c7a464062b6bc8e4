/**
 * Typed failures of the store. Expected failures are these tagged errors; anything else is a defect.
 */
import { Schema } from "effect"

/** The database failed (connection lost, constraint the store did not anticipate, ...). */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  message: Schema.String
}) {}

/** No row with that id exists (in the caller's tenant). */
export class RowNotFound extends Schema.TaggedError<RowNotFound>()("RowNotFound", {
  table: Schema.String,
  id: Schema.String
}) {
  override get message() {
    return `no row "${this.id}" in table "${this.table}"`
  }
}

/** A row with that id already exists. */
export class DuplicateRow extends Schema.TaggedError<DuplicateRow>()("DuplicateRow", {
  table: Schema.String,
  id: Schema.String
}) {
  override get message() {
    return `a row "${this.id}" already exists in table "${this.table}"`
  }
}

/** A write for a Subject named a tenant other than the Subject's own. */
export class TenantViolation extends Schema.TaggedError<TenantViolation>()("TenantViolation", {
  table: Schema.String,
  message: Schema.String
}) {}

/** A row failed its table's schema (on write, or a stored row on read). */
export class RowInvalid extends Schema.TaggedError<RowInvalid>()("RowInvalid", {
  table: Schema.String,
  message: Schema.String
}) {}

/** A query named a field the table does not declare. */
export class UnknownField extends Schema.TaggedError<UnknownField>()("UnknownField", {
  table: Schema.String,
  field: Schema.String
}) {
  override get message() {
    return `table "${this.table}" has no field "${this.field}"`
  }
}

/**
 * The connection to the database failed while the write's COMMIT was under way: the write may or
 * may not have committed, and nothing tells which. Unlike `StoreUnavailable` (nothing was written),
 * a caller must not assume the write is absent: read back, or retry only an idempotent write.
 */
export class CommitUnknown extends Schema.TaggedError<CommitUnknown>()("CommitUnknown", {
  message: Schema.String
}) {}

/**
 * Retired: the store no longer produces it (a committed write answers success; a listener that
 * fails is retried on its own). Kept so that clients decoding answers of older servers know the tag.
 */
export class ChangeDeliveryFailed extends Schema.TaggedError<ChangeDeliveryFailed>()("ChangeDeliveryFailed", {
  listener: Schema.String,
  message: Schema.String
}) {}

/**
 * A write through a read-only store: a plugin without the `store:write` permission (`plugin`), or
 * a request that may only read (`reason`, e.g. a navigation from another site).
 */
export class StoreWriteDenied extends Schema.TaggedError<StoreWriteDenied>()("StoreWriteDenied", {
  table: Schema.String,
  plugin: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
}) {
  override get message() {
    return this.plugin !== undefined
      ? `plugin "${this.plugin}" may not write table "${this.table}": it did not declare "store:write"`
      : `may not write table "${this.table}": ${this.reason ?? "the store is read-only here"}`
  }
}

/**
 * A table that is not among the app's declared tables (`defineApp({ tables })` and its plugins'):
 * a mistake in the app, not an outage. Found at boot when a plugin or an aggregate names the table
 * (`usedBy` says which), otherwise at the first operation on it. On SQL it would otherwise reach
 * the database as a statement on a table that was never created.
 */
export class TableNotDeclared extends Schema.TaggedError<TableNotDeclared>()("TableNotDeclared", {
  table: Schema.String,
  usedBy: Schema.optional(Schema.String)
}) {
  override get message() {
    const add = `add it to the tables of defineApp({ tables: [...] })`
    return this.usedBy === undefined
      ? `table "${this.table}" is not declared: ${add}`
      : `${this.usedBy} uses table "${this.table}", which the app does not declare: ${add}`
  }
}

/** Every typed store failure. */
export type StoreError =
  | StoreUnavailable
  | RowNotFound
  | DuplicateRow
  | TenantViolation
  | RowInvalid
  | UnknownField
  | CommitUnknown
  | StoreWriteDenied
  | TableNotDeclared
