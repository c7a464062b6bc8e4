/**
 * Typed errors of the aggregates area (spec 7.1).
 */
import { Schema } from "effect"

/** Thrown at definition time (or boot) for an aggregate the framework refuses (spec 7.1, refusals 5, 6, 9). */
export class AggregateDefinitionError extends Error {
  override readonly name = "AggregateDefinitionError"
}

/** `read({maxAgeMs})` when the last refresh is older than `maxAgeMs` (or there was none yet). */
export class AggregateStale extends Schema.TaggedError<AggregateStale>()("AggregateStale", {
  aggregate: Schema.String,
  /** Epoch ms of the last successful refresh, null when there was none. */
  refreshedAt: Schema.NullOr(Schema.Number),
  maxAgeMs: Schema.Number
}) {
  override get message() {
    return this.refreshedAt === null
      ? `aggregate "${this.aggregate}" has not been refreshed yet (maxAgeMs ${this.maxAgeMs})`
      : `aggregate "${this.aggregate}" was last refreshed at ${new Date(this.refreshedAt).toISOString()}, older than maxAgeMs ${this.maxAgeMs}`
  }
}

/**
 * `read` of an incremental aggregate whose state is not built yet (its first build, or a rebuild
 * after its definition changed) when the build failed or did not finish within the read's
 * `buildWaitMs`. A read never answers from a state that is not built: its rows would be wrong.
 */
export class AggregateNotReady extends Schema.TaggedError<AggregateNotReady>()("AggregateNotReady", {
  aggregate: Schema.String,
  /** Why: the build's error, or that it did not finish within the wait. */
  reason: Schema.String
}) {
  override get message() {
    return `aggregate "${this.aggregate}" is not built yet: ${this.reason}`
  }
}

/** An aggregate build read the analytics sink and the configured provider cannot answer. */
export class AnalyticsCapabilityNotSupported
  extends Schema.TaggedError<AnalyticsCapabilityNotSupported>()("AnalyticsCapabilityNotSupported", {
    provider: Schema.String,
    capability: Schema.String
  })
{
  override get message() {
    return `analytics provider "${this.provider}" does not support ${this.capability} (configure an analytics provider)`
  }
}

/** A name that is not a registered aggregate. */
export class AggregateNotFound extends Schema.TaggedError<AggregateNotFound>()("AggregateNotFound", {
  aggregate: Schema.String
}) {
  override get message() {
    return `no aggregate named "${this.aggregate}" is registered`
  }
}

/** A `sync` aggregate whose first refresh failed: boot stops. */
export class AggregateBootFailed extends Schema.TaggedError<AggregateBootFailed>()("AggregateBootFailed", {
  aggregate: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `aggregate "${this.aggregate}" (bootRefresh: sync) could not complete its first refresh: ${this.reason}`
  }
}
