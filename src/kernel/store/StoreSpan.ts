/**
 * The Store's spans: an operation in a `fw.store <op>` span naming its table, built only when a
 * tracer is installed.
 */
import { Effect } from "effect"
import type * as Table from "../schema/Table.js"
import * as Telemetry from "../Telemetry.js"

/** `operation` in a `fw.store <op>` span naming its table. */
export const inSpan = <A, E, R>(op: string, table: Table.Any, operation: Effect.Effect<A, E, R>) =>
  Telemetry.span(`fw.store ${op}`, { "fw.store.operation": op, "fw.store.table": table.name })(operation)

/**
 * A store operation in a `fw.store <op>` span naming its table when a tracer is installed. Without
 * one it costs one check of the fiber's tracer: no span attributes are built per call.
 */
export const traced = <Args extends ReadonlyArray<unknown>, A, E, R>(
  op: string,
  operation: (table: Table.Any, ...args: Args) => Effect.Effect<A, E, R>
) =>
(table: Table.Any, ...args: Args): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    Telemetry.isInstalled(fiber.currentTracer) ? inSpan(op, table, operation(table, ...args)) : operation(table, ...args)
  )
