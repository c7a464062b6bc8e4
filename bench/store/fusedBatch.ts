/**
 * The group-commit statement of several one-row inserts (`FusedStage.composeBatch`) with row
 * history's version and the fleet outbox row as its parts: PostgreSQL's CPU per row with the parts
 * in their set form (one insert per part for the whole batch) against the per-row form (a CTE per
 * row and part, what a part without a set form gets), for batches of 8 and 32 rows.
 *
 * Each form runs on a connection of its own, its statements prepared by name, in alternating
 * rounds (a loaded shared machine distorts sequential phases far more); the CPU is the backend's
 * own, read from `/proc/<pid>/stat` of `pg_backend_pid()` (the server must run on this machine), so
 * the WAL writer's and other processes' work is left out.
 *
 * `npx tsx bench/store/fusedBatch.ts` (PostgreSQL from FW_TEST_PG_URL or 127.0.0.1:5432).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import pg from "pg"
import { RowHistory } from "../../src/history/tables.js"
import { versionPart } from "../../src/history/VersionStatements.js"
import type { PendingChange } from "../../src/kernel/changes/Delivery.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as FusedStage from "../../src/kernel/store/FusedStage.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import { scratchDatabase } from "../pgDatabase.js"
import { cpuOf, table } from "../support.js"

const Docs = defineTable("docs", { fields: { title: Schema.String, n: Schema.Number } })

/** Batch sizes measured, and the rows each form writes per size (over every round). */
const sizes = [8, 32]
const rowsPerSize = Number(process.env.BENCH_FUSED_ROWS ?? 32_000)
const rounds = 8

/** A way to write a batch's statement: its text and parameters for the rows given. */
export interface Form {
  readonly name: string
  readonly compose: (
    insert: string,
    rows: ReadonlyArray<FusedStage.BatchRow>,
    keys: string
  ) => { readonly text: string; readonly parameters: ReadonlyArray<unknown> }
  /** The parts as the form takes them (the per-row form: without their set form). */
  readonly parts: (parts: ReadonlyArray<FusedStage.Part>) => ReadonlyArray<FusedStage.Part>
}

/** The parts without their set form, under keys of their own (a key names one form). */
const perRowParts = (parts: ReadonlyArray<FusedStage.Part>) =>
  parts.map(({ statementForRows: _, ...part }): FusedStage.Part => ({ ...part, key: `${part.key}:per-row` }))

/** The forms of today's `composeBatch`. */
export const forms: ReadonlyArray<Form> = [
  { name: "per row", compose: FusedStage.composeBatch, parts: perRowParts },
  { name: "set", compose: FusedStage.composeBatch, parts: (parts) => parts }
]

/** The store's multi-row insert of `rows` docs (as `PgFusedInsert` writes it, its lock_timeout included). */
const insertOf = (rows: number) =>
  `INSERT INTO "docs" ("id", "title", "n") VALUES ${
    Array.from({ length: rows }, (_, r) =>
      r === 0
        ? `(CASE WHEN set_config('lock_timeout', '50ms', true) IS NOT NULL THEN $1 END, $2, $3)`
        : `($${3 * r + 1}, $${3 * r + 2}, $${3 * r + 3})`).join(", ")
  } ON CONFLICT ("id") DO NOTHING RETURNING "id"`

/** Measures `chosen` forms; prints server CPU per row and wall time per batch. */
export const run = async (chosen: ReadonlyArray<Form> = forms) => {
  const database = await scratchDatabase("fused")
  const client = PgClient.layer({ url: Redacted.make(database.url) })
  // The real parts: history's version, and the outbox row of a fleet tap on this database.
  const tap = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    yield* SchemaDiffer.apply([Docs, RowHistory])
    const context = yield* Layer.build(ChangeTap.layerFleet())
    return yield* Effect.provide(ChangeTap.ChangeTap, context)
  })).pipe(Effect.provide(client)))
  const connections = await Promise.all(chosen.map(async () => {
    const connection = new pg.Client({ connectionString: database.url })
    await connection.connect()
    const { rows } = await connection.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)
    return { connection, pid: rows[0]!.pid }
  }))
  let serial = 0
  const rowOf = (form: Form): FusedStage.BatchRow => {
    const id = `d${String(serial++).padStart(9, "0")}`
    const after = { id, title: `title ${serial}`, n: serial }
    const change: PendingChange = {
      table: "docs",
      op: "insert",
      id,
      tenantId: null,
      before: null,
      after,
      at: Date.now(),
      provenance: Provenance.system,
      ref: crypto.randomUUID()
    }
    return { values: [id, after.title, after.n], parts: form.parts([versionPart(undefined, change), tap.fuse!([change])]) }
  }
  const batch = async (form: Form, at: number, size: number) => {
    const rows = Array.from({ length: size }, () => rowOf(form))
    const composed = form.compose(insertOf(size), rows, FusedStage.keysOf(rows[0]!.parts)!)
    await connections[at]!.connection.query({
      name: `fused_${at}_${size}`,
      text: composed.text,
      values: composed.parameters as Array<unknown>
    })
  }
  const results: Array<Record<string, string | number>> = []
  try {
    for (const size of sizes) {
      const batches = Math.max(1, Math.round(rowsPerSize / size / rounds))
      // Warm: plans cached, the tables' first pages in.
      for (let at = 0; at < chosen.length; at++) for (let i = 0; i < 50; i++) await batch(chosen[at]!, at, size)
      const cpu = chosen.map(() => 0)
      const wall = chosen.map(() => 0)
      for (let round = 0; round < rounds; round++) {
        for (let at = 0; at < chosen.length; at++) {
          const pid = connections[at]!.pid
          const cpuBefore = cpuOf(pid)
          const started = performance.now()
          for (let i = 0; i < batches; i++) await batch(chosen[at]!, at, size)
          wall[at]! += performance.now() - started
          cpu[at]! += cpuOf(pid) - cpuBefore
        }
      }
      for (let at = 0; at < chosen.length; at++) {
        results.push({
          rows: size,
          form: chosen[at]!.name,
          "server CPU ms/row": Number((cpu[at]! / (batches * rounds * size)).toFixed(4)),
          "wall ms/batch": Number((wall[at]! / (batches * rounds)).toFixed(3))
        })
      }
    }
    table("Group-commit batch (history version + fleet outbox): PostgreSQL backend CPU", results)
  } finally {
    for (const { connection } of connections) await connection.end()
    await database.drop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
