/**
 * Incremental maintenance inside the database (SQLite and PostgreSQL), the pg_ivm way: row-level
 * `AFTER` triggers on the source table adjust the aggregate's group rows in `_fw_aggregate_rows`
 * within the very statement that writes the source row. A write stays one statement (no
 * transaction opened for it, no round trip per group), a rollback or a crash takes the delta with
 * it, and writes that bypass the Store are maintained too.
 *
 * Per row: leaving a group subtracts (`n`, `c`, `s`), entering one adds, and for min/max a value
 * that beats the extreme replaces it. When the removed value was the extreme (nothing better came
 * in), that one group is rescanned (`MIN`/`MAX` over the group: an index on the group columns and
 * the value column makes it a lookup). On PostgreSQL the upsert takes the group row's lock until
 * commit, and the rescan, a later statement of the trigger function, reads a fresh snapshot, so
 * concurrent writers of one group stay exact. A row moving between groups locks the two group rows
 * in the order of their ids, not old before new: two rows moving between the same groups in
 * opposite directions at once took them in opposite orders and deadlocked (one write failed
 * `40P01`, each time PostgreSQL's deadlock check ran, after a second's wait).
 *
 * A group's key (and its id) is the JSON array of its values as the database writes it
 * (`json_array` / `jsonb_build_array`); the full rebuild computes it with the same expression, so
 * both always agree.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import type { StoreUnavailable } from "../kernel/Errors.js"
import { unavailable } from "../kernel/drivers/sql/SqlDriver.js"
import type * as Table from "../kernel/schema/Table.js"
import type { Op } from "./Aggregate.js"

/** What the triggers need of a resolved incremental shape (`Incremental.Shape`). */
export interface Shape {
  readonly name: string
  readonly table: Table.Any
  readonly op: Op
  readonly column: string | undefined
  readonly groupBy: ReadonlyArray<string>
}

type Dialect = "pg" | "sqlite"

const quote = (identifier: string) => `"${identifier.replaceAll(`"`, `""`)}"`
/** A string literal (aggregate names and columns are identifiers, checked at definition and boot). */
const literal = (text: string) => `'${text.replaceAll(`'`, `''`)}'`

/** The group key of a row (`row` is `NEW.`, `OLD.` or `""` for the table's own columns). */
export const keyExpression = (dialect: Dialect, shape: Pick<Shape, "groupBy">, row: string) => {
  const columns = shape.groupBy.map((c) => `${row}${quote(c)}`).join(", ")
  if (shape.groupBy.length === 0) return `'[]'`
  return dialect === "pg" ? `jsonb_build_array(${columns})::text` : `json_array(${columns})`
}

/** The group's values as a JSON object (stored in `row`). */
export const groupExpression = (dialect: Dialect, shape: Pick<Shape, "groupBy">, row: string) => {
  if (shape.groupBy.length === 0) return dialect === "pg" ? `'{}'::jsonb` : `'{}'`
  const pairs = shape.groupBy.map((c) => `${literal(c)}, ${row}${quote(c)}`).join(", ")
  return dialect === "pg" ? `jsonb_build_object(${pairs})` : `json_object(${pairs})`
}

/** The id of a group's state row. */
export const idExpression = (dialect: Dialect, shape: Pick<Shape, "name" | "groupBy">, row: string) =>
  `${literal(`${shape.name}|i|`)} || ${keyExpression(dialect, shape, row)}`

/** Names of the database objects of one aggregate. */
export const objectNames = (name: string) => ({
  /** PostgreSQL: the trigger and its function. */
  pg: `_fw_agg_${name}`,
  /** SQLite: one trigger per operation. */
  sqlite: [`_fw_agg_${name}_ins`, `_fw_agg_${name}_upd`, `_fw_agg_${name}_del`]
})

/** The statements of the trigger bodies: remove `OLD`, add `NEW`, rescan `OLD`'s group. */
const bodies = (dialect: Dialect, shape: Shape) => {
  const t = "_fw_aggregate_rows"
  const x = shape.column === undefined ? null : quote(shape.column)
  const extreme = shape.op === "min" || shape.op === "max"
  const beats = shape.op === "min" ? "<" : ">"
  const q = (column: string) => dialect === "pg" ? `${t}.${column}` : column
  const counted = (row: string) => shape.op === "count" ? "1" : `(CASE WHEN ${row}${x} IS NULL THEN 0 ELSE 1 END)`
  const upsert = (row: string, sign: 1 | -1) => {
    const n = sign === 1 ? "1" : "-1"
    const c = sign === 1 ? counted(row) : `-${counted(row)}`
    const summed = x !== null && (shape.op === "sum" || shape.op === "avg")
    const s = !summed ? "0" : sign === 1 ? `COALESCE(${row}${x}, 0)` : `-COALESCE(${row}${x}, 0)`
    const v = extreme && sign === 1 ? `${row}${x}` : "NULL"
    const update = [`n = ${q("n")} + excluded.n`, `c = ${q("c")} + excluded.c`]
    if (summed) update.push(`s = ${q("s")} + excluded.s`)
    if (extreme) {
      update.push(sign === 1
        ? `v = CASE WHEN ${q("c")} + excluded.c = 0 THEN NULL WHEN excluded.v IS NOT NULL AND (${q("v")} IS NULL OR excluded.v ${beats} ${q("v")}) THEN excluded.v ELSE ${q("v")} END`
        : `v = CASE WHEN ${q("c")} + excluded.c = 0 THEN NULL ELSE ${q("v")} END`)
    }
    return `INSERT INTO ${t} (id, aggregate, generation, key, row, n, c, s, v) VALUES (${idExpression(dialect, shape, row)}, ${
      literal(shape.name)
    }, 0, ${keyExpression(dialect, shape, row)}, ${groupExpression(dialect, shape, row)}, ${n}, ${c}, ${s}, ${v}) ON CONFLICT (id) DO UPDATE SET ${
      update.join(", ")
    }`
  }
  // The rescan: only when OLD's value was the extreme and nothing now beats it.
  const rescan = (() => {
    if (!extreme || x === null) return null
    const fn = shape.op === "min" ? "MIN" : "MAX"
    const table = quote(shape.table.name)
    const equal = shape.groupBy.map((c) => dialect === "pg" ? `${quote(c)} = OLD.${quote(c)}` : `${quote(c)} IS OLD.${quote(c)}`)
    const same = shape.groupBy.map((c) => `${quote(c)} IS NOT DISTINCT FROM OLD.${quote(c)}`)
    const where = (conditions: ReadonlyArray<string>) => conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`
    const update = (conditions: ReadonlyArray<string>) =>
      `UPDATE ${t} SET v = (SELECT ${fn}(${x}) FROM ${table}${where(conditions)}) WHERE id = ${idExpression(dialect, shape, "OLD.")}
        AND c > 0 AND v IS NOT NULL AND NOT (v ${beats} OLD.${x})`
    if (dialect === "sqlite" || shape.groupBy.length === 0) return `${update(equal)}`
    // PostgreSQL: `=` uses the source's index; a group with a null value needs IS NOT DISTINCT FROM.
    const nulls = shape.groupBy.map((c) => `OLD.${quote(c)} IS NULL`).join(" OR ")
    return `IF ${nulls} THEN ${update(same)}; ELSE ${update(equal)}; END IF`
  })()
  if (dialect === "sqlite" || extreme) return { remove: upsert("OLD.", -1), add: upsert("NEW.", 1), rescan, stay: null }
  // PostgreSQL, count/sum/avg: the group's row exists but for a group's first row, so a plain
  // UPDATE by id comes first (no insert attempted, no conflict resolved, no group JSON built), the
  // upsert only when it found nothing. An update that keeps its row in its group adds the value's
  // difference in one statement (a count has nothing to add), where remove + add took two upserts.
  const counters = (row: string, sign: 1 | -1) => {
    const minus = sign === 1 ? "" : "-"
    return [`n = n ${sign === 1 ? "+" : "-"} 1`, `c = c + ${minus}${counted(row)}`, ...(x !== null && shape.op !== "count" ? [`s = s + ${minus}COALESCE(${row}${x}, 0)`] : [])]
  }
  const first = (row: string, sign: 1 | -1) =>
    `UPDATE ${t} SET ${counters(row, sign).join(", ")} WHERE id = ${idExpression(dialect, shape, row)}; IF NOT FOUND THEN ${upsert(row, sign)}; END IF`
  const stay = shape.op === "count" || x === null
    ? "RETURN NULL"
    : `UPDATE ${t} SET c = c + ${counted("NEW.")} - ${counted("OLD.")}, s = s + COALESCE(NEW.${x}, 0) - COALESCE(OLD.${x}, 0) WHERE id = ${
      idExpression(dialect, shape, "NEW.")
    }; RETURN NULL`
  return { remove: first("OLD.", -1), add: first("NEW.", 1), rescan, stay }
}

/** The columns whose change matters to the aggregate (an update touching none of them is ignored). */
const watched = (shape: Shape) => [...shape.groupBy, ...(shape.column === undefined ? [] : [shape.column])]

/** The DDL that (re)creates the aggregate's triggers, without the version mark `installAll` adds. */
export const install = (dialect: Dialect, shape: Shape): ReadonlyArray<string> => statements(dialect, shape, "")

/**
 * The version of an aggregate's triggers: a hash of their DDL (source table, op, columns, body).
 * It is stored with the triggers (PostgreSQL: the trigger's comment; SQLite: a comment in each
 * trigger's text, which SQLite keeps), so a boot can tell current triggers from changed ones.
 */
export const versionOf = (dialect: Dialect, shape: Shape) =>
  `fw:${createHash("sha256").update(install(dialect, shape).join("\n")).digest("hex").slice(0, 16)}`

const statements = (dialect: Dialect, shape: Shape, version: string): ReadonlyArray<string> => {
  const { add, remove, rescan, stay } = bodies(dialect, shape)
  const table = quote(shape.table.name)
  const columns = watched(shape)
  const changed = columns.map((c) => `OLD.${quote(c)} IS NOT NEW.${quote(c)}`).join(" OR ")
  if (dialect === "sqlite") {
    const [ins, upd, del] = objectNames(shape.name).sqlite.map(quote) as [string, string, string]
    const rescanStatement = rescan === null ? "" : `${rescan};`
    const mark = version === "" ? "" : `/* ${version} */ `
    return [
      `DROP TRIGGER IF EXISTS ${ins}`,
      `DROP TRIGGER IF EXISTS ${upd}`,
      `DROP TRIGGER IF EXISTS ${del}`,
      `CREATE TRIGGER ${ins} AFTER INSERT ON ${table} BEGIN ${mark}${add}; END`,
      `CREATE TRIGGER ${del} AFTER DELETE ON ${table} BEGIN ${mark}${remove}; ${rescanStatement} END`,
      ...(columns.length === 0 ? [] : [
        `CREATE TRIGGER ${upd} AFTER UPDATE OF ${columns.map(quote).join(", ")} ON ${table} WHEN ${changed}
          BEGIN ${mark}${remove}; ${add}; ${rescanStatement} END`
      ])
    ]
  }
  const name = quote(objectNames(shape.name).pg)
  const rescanBlock = rescan === null ? "" : `IF TG_OP <> 'INSERT' THEN ${rescan}; END IF;`
  const distinct = columns.map((c) => `OLD.${quote(c)} IS DISTINCT FROM NEW.${quote(c)}`).join(" OR ")
  const moved = shape.groupBy.map((c) => `OLD.${quote(c)} IS DISTINCT FROM NEW.${quote(c)}`).join(" OR ")
  const stayBlock = stay === null ? "" : `IF TG_OP = 'UPDATE' AND NOT (${moved || "false"}) THEN ${stay}; END IF;`
  return [
    `CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fw$
BEGIN
  IF TG_OP = 'UPDATE' AND NOT (${distinct || "false"}) THEN RETURN NULL; END IF;
  ${stayBlock}
  IF TG_OP = 'INSERT' THEN ${add};
  ELSIF TG_OP = 'DELETE' THEN ${remove};
  ELSIF ${idExpression(dialect, shape, "NEW.")} < ${idExpression(dialect, shape, "OLD.")} THEN ${add}; ${remove};
  ELSE ${remove}; ${add};
  END IF;
  ${rescanBlock}
  RETURN NULL;
END $fw$`,
    `DROP TRIGGER IF EXISTS ${name} ON ${table}`,
    `CREATE TRIGGER ${name} AFTER INSERT OR DELETE${columns.length === 0 ? "" : ` OR UPDATE OF ${columns.map(quote).join(", ")}`} ON ${table}
      FOR EACH ROW EXECUTE FUNCTION ${name}()`,
    ...(version === "" ? [] : [`COMMENT ON TRIGGER ${name} ON ${table} IS ${literal(version)}`])
  ]
}

/** A trigger of an aggregate found in the database. */
interface Installed {
  readonly name: string
  readonly tbl: string
  /** PostgreSQL: the trigger's comment; SQLite: the trigger's text. */
  readonly mark: string | null
}

/**
 * Makes the database's aggregate triggers exactly those of `shapes`: creates the missing, replaces
 * those whose version differs, and drops those of incremental aggregates no longer declared (their
 * deltas would otherwise keep costing every write). When every trigger is current, a boot runs no
 * DDL at all: re-creating a trigger takes an exclusive lock on the source table on PostgreSQL
 * (blocking its readers and writers while replicas boot), and any schema change on SQLite
 * invalidates every connection's prepared statements. Changes are made one replica at a time on
 * PostgreSQL (an advisory lock, and the check repeated under it).
 *
 * Returns the names of the aggregates whose triggers it created or replaced: their maintained
 * state was kept by other triggers (or by none), so it must be rebuilt.
 */
export const installAll = (shapes: ReadonlyArray<Shape>): Effect.Effect<ReadonlySet<string>, StoreUnavailable, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const dialect: Dialect = sql.onDialectOrElse({ pg: () => "pg" as const, orElse: () => "sqlite" as const })
    const plans = shapes.map((shape) => {
      const version = versionOf(dialect, shape)
      const [ins, upd, del] = objectNames(shape.name).sqlite
      // SQLite: no update trigger when no column matters (an ungrouped count).
      const names = dialect === "pg" ? [objectNames(shape.name).pg] : watched(shape).length === 0 ? [ins!, del!] : [ins!, upd!, del!]
      return { shape, version, names, statements: statements(dialect, shape, version) }
    })
    // PostgreSQL trigger names are per table, so a trigger is known by its table and name.
    const id = (tbl: string, name: string) => dialect === "pg" ? `${tbl}.${name}` : name
    const wanted = new Set(plans.flatMap((plan) => plan.names.map((name) => id(plan.shape.table.name, name))))
    const installed = dialect === "pg"
      ? sql<Installed>`SELECT t.tgname AS name, c.relname AS tbl, obj_description(t.oid, 'pg_trigger') AS mark
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE NOT t.tgisinternal AND n.nspname = current_schema()`
      : sql<Installed>`SELECT name, tbl_name AS tbl, sql AS mark FROM sqlite_master WHERE type = 'trigger'`
    /** What differs from the declaration: triggers to drop, aggregates whose triggers to (re)create. */
    const differences = Effect.map(installed, (all) => {
      const found = all.filter((trigger) => trigger.name.startsWith("_fw_agg_"))
      const byId = new Map(found.map((trigger) => [id(trigger.tbl, trigger.name), trigger]))
      const current = (version: string, trigger: Installed | undefined) =>
        trigger !== undefined && (dialect === "pg" ? trigger.mark === version : (trigger.mark ?? "").includes(`/* ${version} */`))
      return {
        stale: found.filter((trigger) => !wanted.has(id(trigger.tbl, trigger.name))),
        changed: plans.filter((plan) => !plan.names.every((name) => current(plan.version, byId.get(id(plan.shape.table.name, name)))))
      }
    })
    const first = yield* differences
    if (first.stale.length === 0 && first.changed.length === 0) return new Set<string>()
    return yield* sql.withTransaction(Effect.gen(function*() {
      if (dialect === "pg") yield* sql`SELECT pg_advisory_xact_lock(hashtext('_fw_aggregate_rows triggers'))`
      const { changed, stale } = yield* differences
      for (const trigger of stale) {
        if (dialect === "pg") {
          yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${quote(trigger.name)} ON ${quote(trigger.tbl)}`)
          // The function goes too, unless a declared trigger of that name (on another table) uses it.
          if (!plans.some((plan) => plan.names.includes(trigger.name))) yield* sql.unsafe(`DROP FUNCTION IF EXISTS ${quote(trigger.name)}()`)
        } else {
          yield* sql.unsafe(`DROP TRIGGER IF EXISTS ${quote(trigger.name)}`)
        }
      }
      for (const plan of changed) for (const statement of plan.statements) yield* sql.unsafe(statement)
      return new Set(changed.map((plan) => plan.shape.name))
    }))
  }).pipe(Effect.mapError((error: SqlError) => unavailable(error)))
