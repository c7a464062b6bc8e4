/**
 * One batch of index writes (issue 37): the operations on distinct rows of one index, sent in one
 * engine request (`SearchBackendShape.write`, else a `remove` and an `upsert`), with failures
 * isolated per document. A document the engine refuses alone fails only its row; when an engine
 * refuses the whole request for one bad document (engineB's task, engineC's batch, a SQL
 * statement), the batch is split in halves until the refused documents stand alone, so the other
 * rows still land. A transient failure of the request fails the batch as a whole (the caller
 * retries it).
 */
import { Effect } from "effect"
import type { SearchBackendError } from "./Errors.js"
import type { Document, WriteOp, WriteResult } from "./SearchBackend.js"

/** Where a batch can go: a live backend's index, or a fresh index being built. */
export interface Target {
  readonly write?: ((ops: ReadonlyArray<WriteOp>) => Effect.Effect<WriteResult, SearchBackendError>) | undefined
  readonly upsert: (docs: ReadonlyArray<Document>) => Effect.Effect<void, SearchBackendError>
  readonly remove: (ids: ReadonlyArray<string>) => Effect.Effect<void, SearchBackendError>
}

/** A refused operation of a batch. */
export interface Refused {
  readonly id: string
  readonly error: SearchBackendError
}

const none: WriteResult = { refused: [] }

/** The batch in one request (removals, then upserts, when the target has no batch write). */
const once = (target: Target, ops: ReadonlyArray<WriteOp>): Effect.Effect<WriteResult, SearchBackendError> => {
  if (ops.length === 0) return Effect.succeed(none)
  if (target.write !== undefined) return target.write(ops)
  const removed: Array<string> = []
  const docs: Array<Document> = []
  for (const op of ops) {
    if (op.doc === null) removed.push(op.id)
    else docs.push(op.doc)
  }
  return Effect.as(
    Effect.zipRight(removed.length === 0 ? Effect.void : target.remove(removed), docs.length === 0 ? Effect.void : target.upsert(docs)),
    none
  )
}

/**
 * Writes `ops` (distinct ids) to `target`: the refused operations, or a transient failure of the
 * request. A permanent failure of a request of several operations splits it (every operation is
 * idempotent, so a half that was partly applied is simply written again).
 */
export const write = (target: Target, ops: ReadonlyArray<WriteOp>): Effect.Effect<ReadonlyArray<Refused>, SearchBackendError> =>
  Effect.catchIf(
    Effect.map(once(target, ops), (result) => result.refused),
    (error) => error.kind === "permanent",
    (error) => {
      if (ops.length <= 1) return Effect.succeed(ops.map((op) => ({ id: op.id, error })))
      const half = Math.ceil(ops.length / 2)
      return Effect.zipWith(write(target, ops.slice(0, half)), write(target, ops.slice(half)), (a, b) => [...a, ...b])
    }
  )

/** The size of an operation as an engine request carries it (JSON), roughly. */
export const sizeOf = (op: WriteOp): number => op.doc === null ? op.id.length + 16 : JSON.stringify(op.doc).length
