/**
 * Applying the declared schema at boot: on a SQL store the schema differ creates what is missing;
 * on the memory store there is nothing to do.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option, Schema } from "effect"
import * as SchemaDiffer from "../kernel/schema/SchemaDiffer.js"
import type * as Table from "../kernel/schema/Table.js"

/** Applying the schema failed (the database is down, or refused a statement). */
export class SchemaApplyFailed extends Schema.TaggedError<SchemaApplyFailed>()("SchemaApplyFailed", {
  message: Schema.String
}) {}

/** Applies `tables` when a `SqlClient` is present, logging each step taken. */
export const apply = (tables: ReadonlyArray<Table.Any>) =>
  Effect.gen(function*() {
    const sql = yield* Effect.serviceOption(SqlClient.SqlClient)
    if (Option.isNone(sql)) return []
    const steps = yield* SchemaDiffer.apply(tables).pipe(
      Effect.provideService(SqlClient.SqlClient, sql.value),
      Effect.mapError((error) => new SchemaApplyFailed({ message: error.message }))
    )
    for (const step of steps) yield* Effect.logInfo(`schema: ${step.description}`)
    return steps
  })

/** A layer that applies `tables` at construction. */
export const layer = (tables: ReadonlyArray<Table.Any>) => Layer.effectDiscard(apply(tables))
