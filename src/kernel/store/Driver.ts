/**
 * The tier contract under `Store.make`: a small set of operations over encoded (JSON-safe) rows.
 * Everything else — schema encoding, tenant scoping, change events, read tracking — lives once in
 * `StoreRuntime`, so every tier behaves the same.
 */
import type { Effect, Either, Fiber, Option } from "effect"
import type { CommitUnknown, DuplicateRow, StoreUnavailable } from "../Errors.js"
import type * as FusedStage from "./FusedStage.js"
import type * as Table from "../schema/Table.js"

/**
 * What a synchronous driver step (`getNow`, `insertNow`) answers when it cannot act at this
 * moment; the store then runs the operation's effect instead.
 */
export const NotNow: unique symbol = Symbol.for("@fw/framework/Driver/NotNow")
/** The type of `NotNow`. */
export type NotNow = typeof NotNow

/**
 * What `insertFusedNow` answers when the outcome needs a round trip to a server but none of the
 * client's per-statement work (PostgreSQL, see `PgDirect`): the effect that yields it.
 */
export class Later<A> {
  constructor(readonly effect: Effect.Effect<A, StoreUnavailable>) {}
}

/** A row in its encoded form: what the table schema's `encode` produces. */
export type Encoded = Readonly<Record<string, unknown>>

/** Comparison operators of a normalised condition. */
export type Operator = "eq" | "neq" | "gt" | "gte" | "lt" | "lte" | "in" | "nin"

/**
 * One normalised condition on an encoded value. A null never satisfies a comparison (SQL
 * semantics), except `eq null` (the value is null) and `neq null` (the value is not null).
 */
export interface Clause {
  readonly field: string
  readonly op: Operator
  readonly value: unknown
}

/** A normalised read. Ties in `orderBy` are broken by `id` ascending, so paging is stable. */
export interface Query {
  readonly where: ReadonlyArray<Clause>
  readonly orderBy: string
  readonly direction: "asc" | "desc"
  readonly limit?: number | undefined
  readonly offset?: number | undefined
}

/** A keyset page: matching rows with `id > after` (all when null), ordered by id, at most `limit`. */
export interface Page {
  readonly where: ReadonlyArray<Clause>
  readonly after: string | null
  readonly limit: number
}

/**
 * A storage tier. Every method fails only with `StoreUnavailable` (and `insert` with `DuplicateRow`).
 * A write called outside `transaction` must be atomic by itself (the store runs a one-statement
 * write without a transaction when the change tap stages nothing).
 */
export interface Driver {
  readonly dialect: "memory" | "sqlite" | "pg"
  /**
   * Inserts rows (batched as the tier sees fit: one multi-row statement per chunk on SQL). Fails
   * `DuplicateRow` when an id exists; then none of a single statement's rows are written.
   * `CommitUnknown`: one row outside a transaction (autocommitted) on a server whose connection
   * failed before the answer (the row may be written).
   */
  readonly insert: (
    table: Table.Any,
    rows: ReadonlyArray<Encoded>
  ) => Effect.Effect<void, DuplicateRow | StoreUnavailable | CommitUnknown>
  /** Replaces the whole row with the same id. */
  readonly replace: (table: Table.Any, row: Encoded) => Effect.Effect<void, StoreUnavailable>
  /** Removes the row with `id`. */
  readonly delete: (table: Table.Any, id: string) => Effect.Effect<void, StoreUnavailable>
  /** Removes the rows with these ids (absent ones are skipped), one statement per chunk on SQL. */
  readonly deleteMany: (table: Table.Any, ids: ReadonlyArray<string>) => Effect.Effect<void, StoreUnavailable>
  /**
   * Reads one row by id. `forUpdate`: the caller will write it in the current transaction, so the
   * tier locks it against concurrent writers (PostgreSQL `FOR UPDATE`; the others serialise writers).
   */
  readonly get: (
    table: Table.Any,
    id: string,
    options?: { readonly forUpdate?: boolean }
  ) => Effect.Effect<Option.Option<Encoded>, StoreUnavailable>
  /**
   * A point read answered synchronously within `fiber` (its transaction included), for tiers that
   * can (rows in the process, or an embedded database): the store then reads in one fiber step.
   * `undefined`: no such row. `NotNow`: the tier cannot answer synchronously at this moment (say
   * another fiber's transaction holds the connection), so the store takes `get`. The store calls
   * it only when no tracer is installed, so a tier that bypasses its client here loses no span.
   * A tier that must wait for a server offers `getSend` instead.
   * The row is only checked (id, tenant) and decoded: it may carry columns the table does not declare.
   */
  readonly getNow?: (
    table: Table.Any,
    id: string,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ) => Encoded | undefined | NotNow | StoreUnavailable
  /**
   * A point read sent now within `fiber` to a tier that answers from a server (PostgreSQL), under
   * the same conditions as `getNow`: `answer` is called once, from the tier's own callback (at once
   * for an id no row can have), with the row (`undefined`: no such row) or the failure, so the
   * store finishes the read there and its fiber resumes with the outcome. `false`: nothing was
   * sent (as `NotNow`); the store takes `get`. `answer` must not throw. The row is as `getNow`'s.
   */
  readonly getSend?: (
    table: Table.Any,
    id: string,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    answer: (row: Encoded | undefined | StoreUnavailable) => void
  ) => boolean
  /**
   * A one-row insert done synchronously within `fiber` (inside its transaction, if any; else atomic
   * by itself), as `insert` would: `undefined` once written, else the failure, or `NotNow` (nothing
   * written; the store takes `insert`). Called under the same conditions as `getNow`.
   */
  readonly insertNow?: (
    table: Table.Any,
    row: Encoded,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ) => undefined | NotNow | DuplicateRow | StoreUnavailable
  /**
   * A one-row insert sent now within `fiber` to a tier that answers from a server (PostgreSQL),
   * as `insertNow` would do it and under the same conditions: `answer` is called once, from the
   * tier's own callback, with `undefined` once written, else the failure, so the store finishes
   * the insert there: `CommitUnknown` when, outside a transaction (autocommitted), the connection
   * failed before the answer (the row may be written). `false`: nothing was sent; the store takes
   * `insert`. `answer` must not throw. An interrupted caller's statement is not cancelled: the
   * store awaits it uninterruptibly.
   */
  readonly insertSend?: (
    table: Table.Any,
    row: Encoded,
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    answer: (written: undefined | DuplicateRow | StoreUnavailable | CommitUnknown) => void
  ) => boolean
  /**
   * A one-row insert outside a transaction fused with the stagers' `parts` into one autocommitted
   * statement (see `FusedStage`), for a tier that can (PostgreSQL). `NotNow`: not now (a statement
   * transformer is installed); else the effect of the outcome: `undefined` once committed (each
   * part's `onResult` called), `DuplicateRow` (the id is taken; nothing written), `Refused`
   * (nothing written; run the insert in a transaction), or `CommitUnknown` (the connection failed
   * before the answer). Called under the same conditions as `getNow`.
   */
  readonly insertFusedNow?: (
    table: Table.Any,
    row: Encoded,
    parts: ReadonlyArray<FusedStage.Part>,
    fiber: Fiber.RuntimeFiber<unknown, unknown>
  ) => NotNow | Later<undefined | DuplicateRow | CommitUnknown | FusedStage.Refused>
  readonly find: (table: Table.Any, query: Query) => Effect.Effect<ReadonlyArray<Encoded>, StoreUnavailable>
  /**
   * A short transaction run synchronously within `fiber`, outside any transaction of its own: BEGIN,
   * `body` with statements that answer at once, then COMMIT — or ROLLBACK when `body` answers a
   * `Left`, which is returned. `NotNow`: nothing was run (say another fiber's transaction is open);
   * the store then takes `transaction`. Called under the same conditions as `getNow`.
   */
  readonly transactNow?: <A, E>(
    fiber: Fiber.RuntimeFiber<unknown, unknown>,
    body: (now: Now) => Either.Either<A, E>
  ) => Either.Either<A, E | StoreUnavailable | CommitUnknown> | NotNow
  readonly count: (table: Table.Any, where: ReadonlyArray<Clause>) => Effect.Effect<number, StoreUnavailable>
  readonly page: (table: Table.Any, page: Page) => Effect.Effect<ReadonlyArray<Encoded>, StoreUnavailable>
  /**
   * Runs `effect` in a transaction; nested calls are savepoints. `CommitUnknown` when the
   * connection failed during COMMIT (the outcome is unknown).
   */
  readonly transaction: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StoreUnavailable | CommitUnknown, R>
}

/** The statements of a `transactNow` body, answered synchronously inside its transaction. */
export interface Now {
  /** Inserts one row, as `insert` would. */
  readonly insert: (table: Table.Any, row: Encoded) => undefined | DuplicateRow | StoreUnavailable
  /** Reads as `find` would. */
  readonly find: (table: Table.Any, query: Query) => ReadonlyArray<Encoded> | StoreUnavailable
}
