/**
 * The lane of one index: its committed changes waiting for the engine, coalesced per row, and the
 * rows of the batches sent and not yet acknowledged.
 *
 * A row has at most one entry: a later change replaces the event (its latest committed state
 * wins; insert → update → delete is one delete) and adds its marker. A row whose batch is in flight
 * is held back: its next change goes in a later batch, sent once the earlier one is acknowledged,
 * so a row's later write never overtakes its earlier one, whatever order the engine applies
 * concurrent requests in.
 */
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import type { Resolved } from "./Options.js"

/** A row's pending change. */
export interface Queued {
  readonly rowId: string
  /** The latest change of the row. */
  event: ChangeEvent
  /** Whether the index may hold a document of the row from before these changes. */
  readonly previous: boolean
  /** The pending-sync markers of the coalesced changes. */
  readonly refs: Array<string>
  /** When the oldest of the coalesced changes committed (epoch ms). */
  readonly since: number
}

/** The lane of `index`. */
export class Lane {
  /** Waiting rows, oldest first. */
  readonly queue = new Map<string, Queued>()
  /** Rows of batches in flight → when their oldest change committed. */
  readonly sending = new Map<string, number>()
  /** Batches in flight. */
  batches = 0
  /** Rows whose failure could not be recorded: committed, not indexed, kept only by a marker (or not at all). */
  readonly unprotected = new Set<string>()
  constructor(readonly index: Resolved) {}

  /** Adds a committed change of a row (marker `ref`, if it has one). */
  offer(event: ChangeEvent, ref: string | undefined): void {
    const existing = this.queue.get(event.id)
    if (existing !== undefined) {
      existing.event = event
      if (ref !== undefined) existing.refs.push(ref)
      return
    }
    // A row just inserted has no previous document to take out if its document cannot be derived.
    this.queue.set(event.id, { rowId: event.id, event, previous: event.op !== "insert", refs: ref === undefined ? [] : [ref], since: event.at })
  }

  /** Committed changes not yet acknowledged here, and the commit time of the oldest (or null). */
  pending(): { readonly count: number; readonly oldest: number | null } {
    let oldest: number | null = null
    for (const since of this.sending.values()) if (oldest === null || since < oldest) oldest = since
    for (const queued of this.queue.values()) if (oldest === null || queued.since < oldest) oldest = queued.since
    return { count: this.queue.size + this.sending.size, oldest }
  }

  /** Nothing waiting and nothing in flight. */
  idle(): boolean {
    return this.queue.size === 0 && this.batches === 0
  }
}
