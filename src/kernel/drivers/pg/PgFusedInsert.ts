/**
 * `Driver.insertFusedNow` on PostgreSQL: a one-row insert and its stagers' parts as one
 * autocommitted statement (see `FusedStage`), run straight on a reserved connection (see
 * `PgDirect`), else through the client's pool — one round trip either way.
 *
 * Group commit: the fused inserts of one table (and the same stagers) a process sends share a
 * lane with one statement on the server at a time (`lanesInFlight`); the inserts that arrive while
 * it runs wait, and the next statement carries every one waiting (`FusedStage.composeBatch`): one
 * round trip, one execution of a prepared statement, one transaction and one WAL flush for all of
 * them. An insert that finds the lane free is sent at once, alone, so a quiet process adds no
 * wait. A table with triggers on insert keeps one statement per insert (see `triggersText`).
 * Each row still answers for itself: a taken id is its own `DuplicateRow`. A batch is one
 * transaction, so a row the server refuses (a clashing history version, a deadlock) refuses the
 * batch: every row of it is then written again alone, in a transaction, as a refused single insert
 * is; and a connection lost before the answer leaves every row of the batch `CommitUnknown`.
 */
import { Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fiber } from "effect"
import { Effect, Option, Predicate } from "effect"
import * as Columns from "../../schema/Columns.js"
import * as Driver from "../../store/Driver.js"
import { CommitUnknown, DuplicateRow } from "../../Errors.js"
import * as FusedStage from "../../store/FusedStage.js"
import * as PgDirect from "./PgDirect.js"
import * as SqlFailure from "../sql/SqlFailure.js"
import type * as Table from "../../schema/Table.js"

/** What the fused insert needs of the driver: the table's row inserts and their parameters. */
export interface RowInsert {
  /** `INSERT … VALUES ($1, …) ON CONFLICT ("id") DO NOTHING RETURNING "id"`. */
  readonly text: (table: Table.Any) => string
  /** Its parameters for `row`: the table's columns (`Columns.of`) in order, the id first. */
  readonly values: (table: Table.Any, row: Driver.Encoded) => ReadonlyArray<unknown>
}

/** The connections the fused insert runs on (see `PgDirectDriver`). */
export interface Connections {
  /** A point statement: on a reserved connection, else through the client's pool. */
  readonly point: <A extends object>(text: string, parameters: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>
  /** Whether `fiber`'s statements outside a transaction run on the reserved connections. */
  readonly reserved: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => boolean
  readonly send: PgDirect.Direct["send"]
}

type Outcome = undefined | DuplicateRow | CommitUnknown | FusedStage.Refused

/**
 * Statements of one lane on the server at once. One: while it runs and commits, the inserts that
 * arrive gather for the next. Fleet bench, saturated (48 in flight over three replicas): 3,212 and
 * 3,252 writes/s with one against 2,824–2,853 with two and 2,729–2,823 with three (server CPU per
 * write 0.16 against 0.20–0.23 ms); paced at 1,000/s the write → event p99 rose from 4 to 6 ms.
 */
const lanesInFlight = 1
/**
 * How long a statement holds its lane's room at most: one that has not answered by then (waiting
 * on another transaction's row lock, a commit stalled) lets the next go, so the lane's other
 * inserts wait for it this long at most, not as long as the lock is held. Under load a batch
 * answers in a few milliseconds.
 */
const slowMs = 20
/** Rows one statement carries at most (its text is prepared once per size). */
const batchRows = 32
/** PostgreSQL's most parameters in one statement. */
const parametersMost = 65_535
/**
 * The most bytes of values one statement carries (estimated: a string's length, a buffer's size,
 * 8 for anything else). Each row's data travels about three times (the row, its history version,
 * its outbox change), and PostgreSQL refuses a message over 1 GB by closing the connection: rows
 * that each write fine alone must not add up to that (review: 32 rows of 12 MB answered
 * `CommitUnknown`, unwritten). A row larger than this goes alone.
 */
const batchBytes = 4 * 1024 * 1024
/**
 * How long a statement of several rows waits for another transaction's row lock before the server
 * cancels it (`55P03`; its rows are then written one by one). It holds its own rows' locks while it
 * waits: a transaction inserting some of the same ids in another order would otherwise deadlock
 * with it, and be the one aborted where one-row inserts would have let it commit (review). Far
 * below `deadlock_timeout` (1 s by default), so the batch gives way before the deadlock is looked
 * for; and the batch's other rows wait this long for a lock that is not theirs, not until it is
 * released.
 */
const batchLockTimeoutMs = 50

const quote = (identifier: string) => `"${identifier.replaceAll(`"`, `""`)}"`

/**
 * The one-row insert for `rows` rows of `table` (placeholders for each row's values in turn, in
 * `Columns.of` order, the id first), by size. The first row's id is written as the side effect of
 * `set_config('lock_timeout', …, true)` then the id: the setting holds for the statement's own
 * transaction (see `batchLockTimeoutMs`), from before its first row takes a lock.
 */
const manyTexts = new WeakMap<Table.Any, Map<number, string>>()
const insertOfMany = (table: Table.Any, rows: number): string => {
  let bySize = manyTexts.get(table)
  if (bySize === undefined) manyTexts.set(table, bySize = new Map())
  let text = bySize.get(rows)
  if (text === undefined) {
    const names = Columns.of(table).map((column) => quote(column.name))
    const tuples: Array<string> = []
    for (let r = 0; r < rows; r++) {
      const first = r * names.length
      tuples.push(`(${
        names.map((_, i) =>
          r === 0 && i === 0
            ? `CASE WHEN set_config('lock_timeout', '${batchLockTimeoutMs}ms', true) IS NOT NULL THEN $1 END`
            : `$${first + i + 1}`
        ).join(", ")
      })`)
    }
    text = `INSERT INTO ${quote(table.name)} (${names.join(", ")}) VALUES ${tuples.join(", ")} ON CONFLICT ("id") DO NOTHING RETURNING "id"`
    bySize.set(rows, text)
  }
  return text
}

/** The estimated bytes of a row's values and its parts' (see `batchBytes`). */
const bytesOf = (row: FusedStage.BatchRow): number => {
  let bytes = 0
  const add = (value: unknown) => {
    bytes += typeof value === "string" ? value.length : value instanceof Uint8Array ? value.byteLength : 8
  }
  for (const value of row.values) add(value)
  for (const part of row.parts) for (const value of part.values) add(value)
  return bytes
}

/** A fused insert waiting in its lane. */
interface Waiting {
  readonly table: Table.Any
  readonly id: string
  readonly row: FusedStage.BatchRow
  /** `bytesOf(row)`. */
  readonly bytes: number
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
  readonly resume: (outcome: Outcome | typeof notSent) => void
}

/** The fused inserts of one table and part keys. */
interface Lane {
  readonly keys: string
  inFlight: number
  waiting: Array<Waiting>
  /**
   * Whether its inserts go together: once the table is known to have no triggers. `undefined`
   * until the first lookup answers: inserts wait in the lane for it.
   */
  grouped: boolean | undefined
  /** When the table's triggers were last looked up (`Date.now()`), 0 never; and whether a lookup is under way. */
  checkedAt: number
  checking: boolean
}

/**
 * Whether the table `$1` has triggers that fire on INSERT (`tgtype` bit 2), a foreign key's check
 * included. Rows written together hold their locks together: a trigger that updates rows shared by
 * many writes (an incremental aggregate's group counters), or a foreign key's check locking parent
 * rows, would then lock several of them in one transaction, in row order, and deadlock with other
 * transactions locking them in another order, where one-row inserts never held two. Such tables
 * keep one statement per insert.
 */
const triggersText =
  `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND (tgtype & 4) <> 0) AS "triggers"`
/** How often a lane looks its table's triggers up again (a trigger made later is seen within this). */
const triggersRecheckMs = 30_000

/** The lane's statement could not go on a reserved connection: each row takes the single path. */
const notSent: unique symbol = Symbol("notSent")

const failedOutcome = (error: SqlError): Outcome =>
  SqlFailure.refusedByServer(error)
    ? FusedStage.Refused
    : new CommitUnknown({ message: `the connection failed during a one-statement write: ${error.message}` })

const byId = (a: Waiting, b: Waiting) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0

/** `insertFusedNow` on `connections`. */
export const make = (connections: Connections, row: RowInsert) => {
  // By the table's insert text (built once per table), then the parts' keys: no per-write key
  // string of the whole insert text to build and hash.
  const lanes = new Map<string, Map<string, Lane>>()

  /** One row, one statement: as the batch of one it is, text shared with every single write. */
  const composeOne = (table: Table.Any, values: ReadonlyArray<unknown>, parts: ReadonlyArray<FusedStage.Part>) => {
    const fused = FusedStage.compose(row.text(table), values, parts)
    // Planning the CTE costs the server more than running it: a text built once is prepared by name.
    if (fused.reused) PgDirect.prepare(fused.text)
    return fused
  }

  const answerOne = (fused: FusedStage.Fused, table: Table.Any, id: string) =>
  (error: SqlError | undefined, rows: ReadonlyArray<Readonly<Record<string, unknown>>>): Outcome => {
    if (error !== undefined) return failedOutcome(error)
    const first = rows[0]
    // ON CONFLICT DO NOTHING: a taken id inserts nothing, so no part wrote either.
    if (first === undefined) return new DuplicateRow({ table: table.name, id })
    for (const { column, part } of fused.returning) {
      const returned = first[column]
      if (Predicate.isRecord(returned)) part.onResult!(returned)
    }
    return undefined
  }

  /** The single path: the row's statement through `point` (a reserved connection, else the pool). */
  const single = (table: Table.Any, values: ReadonlyArray<unknown>, parts: ReadonlyArray<FusedStage.Part>, id: string) => {
    const fused = composeOne(table, values, parts)
    const answer = answerOne(fused, table, id)
    return Effect.match(connections.point<Readonly<Record<string, unknown>>>(fused.text, fused.parameters), {
      onFailure: (error) => answer(error, []),
      onSuccess: (rows) => answer(undefined, rows)
    })
  }

  /** The next statement's rows: the first waiting, in order, with distinct ids, within the limits. */
  const take = (lane: Lane): Array<Waiting> => {
    const first = lane.waiting[0]!
    const perRow = first.row.values.length + first.row.parts.reduce((n, part) => n + part.values.length, 0)
    const most = Math.max(1, Math.min(batchRows, Math.floor(parametersMost / Math.max(1, perRow))))
    if (lane.waiting.length === 1) {
      lane.waiting = []
      return [first]
    }
    const batch: Array<Waiting> = []
    const ids = new Set<string>()
    const left: Array<Waiting> = []
    let bytes = 0
    for (const waiting of lane.waiting) {
      const fits = batch.length === 0 || (batch.length < most && bytes + waiting.bytes <= batchBytes)
      if (fits && !ids.has(waiting.id)) {
        ids.add(waiting.id)
        batch.push(waiting)
        bytes += waiting.bytes
      } else {
        left.push(waiting)
      }
    }
    lane.waiting = left
    return batch
  }

  /**
   * Room in `lane` for one statement, given back by the function returned (at the answer), or
   * after `slowMs` if the answer has not come: a statement waiting on a lock or a stalled commit
   * must not hold back the lane's later inserts (each would wait for it).
   */
  const occupy = (lane: Lane): () => void => {
    lane.inFlight++
    let held = true
    const release = () => {
      if (!held) return
      held = false
      lane.inFlight--
      pump(lane)
    }
    const timer = setTimeout(release, slowMs)
    timer.unref()
    return () => {
      clearTimeout(timer)
      release()
    }
  }

  const sendOne = (lane: Lane, waiting: Waiting) => {
    const release = occupy(lane)
    const fused = composeOne(waiting.table, waiting.row.values, waiting.row.parts)
    const answer = answerOne(fused, waiting.table, waiting.id)
    const sent = connections.send(waiting.fiber, fused.text, fused.parameters, (error, rows) => {
      release()
      waiting.resume(answer(error, rows))
    }, undefined)
    if (!sent) {
      release()
      waiting.resume(notSent)
    }
  }

  const sendBatch = (lane: Lane, batch: Array<Waiting>) => {
    const release = occupy(lane)
    // One order for every batch of the table: two batches taking the same ids' locks cannot deadlock.
    batch.sort(byId)
    const table = batch[0]!.table
    const fused = FusedStage.composeBatch(insertOfMany(table, batch.length), batch.map((w) => w.row), lane.keys)
    PgDirect.prepare(fused.text)
    const sent = connections.send(batch[0]!.fiber, fused.text, fused.parameters, (error, rows) => {
      release()
      const first = rows[0]
      // Every inserted row's parts learn their results before any row resumes.
      const inserted = error === undefined && first !== undefined ? fused.answer(first) : undefined
      for (let i = 0; i < batch.length; i++) {
        const waiting = batch[i]!
        if (inserted === undefined) {
          waiting.resume(error !== undefined ? failedOutcome(error) : FusedStage.Refused)
        } else {
          waiting.resume(inserted[i] ? undefined : new DuplicateRow({ table: table.name, id: waiting.id }))
        }
      }
    }, undefined)
    if (!sent) {
      release()
      for (const waiting of batch) waiting.resume(notSent)
    }
  }

  /** Looks the lane's table's triggers up, in the background, when not done within `triggersRecheckMs`. */
  const checkTriggers = (lane: Lane, table: Table.Any, fiber: Fiber.RuntimeFiber<unknown, unknown>) => {
    if (lane.checking || Date.now() - lane.checkedAt < triggersRecheckMs) return
    lane.checking = true
    const checked = (grouped: boolean) => {
      lane.checking = false
      lane.checkedAt = Date.now()
      lane.grouped = grouped
      if (grouped) return pump(lane)
      // Those that waited for the first lookup go alone.
      const waiting = lane.waiting
      lane.waiting = []
      for (const one of waiting) one.resume(notSent)
    }
    const sent = connections.send(fiber, triggersText, [`"${table.name.replaceAll(`"`, `""`)}"`], (error, rows) => {
      checked(error === undefined && rows[0]?.triggers === false)
    }, undefined)
    if (!sent) checked(false)
  }

  /** Sends the lane's waiting rows while it has room on the server. */
  const pump = (lane: Lane) => {
    while (lane.grouped === true && lane.inFlight < lanesInFlight && lane.waiting.length > 0) {
      const batch = take(lane)
      if (batch.length === 1) sendOne(lane, batch[0]!)
      else sendBatch(lane, batch)
    }
  }

  return (
    table: Table.Any,
    encoded: Driver.Encoded,
    parts: ReadonlyArray<FusedStage.Part>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ): Driver.NotNow | Driver.Later<Outcome> => {
    // A statement transformer sees the client's statements: take the transaction as before.
    if (Option.isSome(fiber.getFiberRef(Statement.currentTransformer))) return Driver.NotNow
    const values = row.values(table, encoded)
    const id = encoded.id as string
    const keys = FusedStage.keysOf(parts)
    // Texts built per write, and statements the client runs (a tracer's spans), go alone.
    if (keys === undefined || !connections.reserved(fiber)) return new Driver.Later(single(table, values, parts, id))
    const text = row.text(table)
    let byKeys = lanes.get(text)
    if (byKeys === undefined) lanes.set(text, byKeys = new Map())
    let lane = byKeys.get(keys)
    if (lane === undefined) {
      byKeys.set(keys, lane = { keys, inFlight: 0, waiting: [], grouped: undefined, checkedAt: 0, checking: false })
    }
    checkTriggers(lane, table, fiber)
    if (lane.grouped === false) return new Driver.Later(single(table, values, parts, id))
    const mine = lane
    return new Driver.Later(
      Effect.flatMap(
        Effect.async<Outcome | typeof notSent>((resume) => {
          // The lookup may have answered since (triggers found): alone then.
          if (mine.grouped === false) return resume(Effect.succeed(notSent))
          const row = { values, parts }
          const waiting: Waiting = {
            table,
            id,
            row,
            bytes: bytesOf(row),
            fiber,
            resume: (outcome) => resume(Effect.succeed(outcome))
          }
          mine.waiting.push(waiting)
          pump(mine)
          // Awaited uninterruptibly by the store; should that change, a row not yet sent leaves its lane.
          return Effect.sync(() => {
            mine.waiting = mine.waiting.filter((other) => other !== waiting)
          })
        }),
        (outcome) => outcome === notSent ? single(table, values, parts, id) : Effect.succeed(outcome)
      )
    )
  }
}
