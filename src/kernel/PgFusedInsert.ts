/**
 * `Driver.insertFusedNow` on PostgreSQL: a one-row insert and its stagers' parts as one
 * autocommitted statement (see `FusedStage`), run straight on a reserved connection (see
 * `PgDirect`), else through the client's pool — one round trip either way.
 */
import { Statement } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import type { Fiber } from "effect"
import { Effect, Option, Predicate } from "effect"
import * as Driver from "./Driver.js"
import { CommitUnknown, DuplicateRow } from "./Errors.js"
import * as FusedStage from "./FusedStage.js"
import * as PgDirect from "./PgDirect.js"
import * as SqlFailure from "./SqlFailure.js"
import type * as Table from "./Table.js"

/** What the fused insert needs of the driver: the table's one-row insert and its parameters. */
export interface RowInsert {
  /** `INSERT … VALUES ($1, …) ON CONFLICT ("id") DO NOTHING RETURNING "id"`. */
  readonly text: (table: Table.Any) => string
  readonly values: (table: Table.Any, row: Driver.Encoded) => ReadonlyArray<unknown>
}

type Outcome = undefined | DuplicateRow | CommitUnknown | FusedStage.Refused

/**
 * `insertFusedNow` running its statement with `point` (a point statement of `PgDirectDriver`:
 * on a reserved connection, else through the client's pool).
 */
export const make = (
  point: <A extends object>(text: string, parameters: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>, SqlError>,
  row: RowInsert
) =>
(
  table: Table.Any,
  encoded: Driver.Encoded,
  parts: ReadonlyArray<FusedStage.Part>,
  fiber: Fiber.RuntimeFiber<unknown, unknown>
): Driver.NotNow | Driver.Later<Outcome> => {
  // A statement transformer sees the client's statements: take the transaction as before.
  if (Option.isSome(fiber.getFiberRef(Statement.currentTransformer))) return Driver.NotNow
  const fused = FusedStage.compose(row.text(table), row.values(table, encoded), parts)
  // Planning the CTE costs the server more than running it: a text built once is prepared by name.
  if (fused.reused) PgDirect.prepare(fused.text)
  const statement = point<Readonly<Record<string, unknown>>>(fused.text, fused.parameters)
  return new Driver.Later(Effect.match(statement, {
    onFailure: (error): Outcome =>
      SqlFailure.refusedByServer(error)
        ? FusedStage.Refused
        : new CommitUnknown({ message: `the connection failed during a one-statement write: ${error.message}` }),
    onSuccess: (rows): Outcome => {
      const first = rows[0]
      // ON CONFLICT DO NOTHING: a taken id inserts nothing, so no part wrote either.
      if (first === undefined) return new DuplicateRow({ table: table.name, id: encoded.id as string })
      for (const { column, part } of fused.returning) {
        const returned = first[column]
        if (Predicate.isRecord(returned)) part.onResult!(returned)
      }
      return undefined
    }
  }))
}
