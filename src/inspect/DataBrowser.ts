/**
 * The data browser's inspect routes (read-only), behind the inspect gate like every inspect route:
 *
 * - `GET /_fw/inspect/data/tables`: every table (app tables, then the framework's `_fw_` ones) with
 *   its fields (storage kind, whether a sort can use an index), tenant field and indexes;
 * - `GET /_fw/inspect/data/tables/<table>/rows?sort=&dir=&limit=&after=&tenant=&where.<field>=`:
 *   one page of rows, keyset-paged: `next` is an opaque cursor (the last row's sort value and id),
 *   never an offset, so a deep page reads no more rows than the first;
 * - `GET /_fw/inspect/data/tables/<table>/rows/<id>`: one row, and its versions when the row
 *   history plugin is installed.
 *
 * Rows are read as the system (across tenants; `tenant` narrows to one) and answered encoded (as
 * stored: JSON-safe). Sorting is offered on `id` and on fields that lead an index, so a page is an
 * index range read and never a sort of the whole table.
 */
import { HttpLayerRouter, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Schema } from "effect"
import * as HttpResponses from "../app/HttpResponses.js"
import { Runtime } from "../app/Runtime.js"
import { rowHistory } from "../history/RowHistory.js"
import { RowHistory } from "../history/tables.js"
import type { StoreError } from "../kernel/Errors.js"
import * as Columns from "../kernel/schema/Columns.js"
import * as RowCodec from "../kernel/schema/RowCodec.js"
import * as Table from "../kernel/schema/Table.js"
import { Store } from "../kernel/store/Store.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import * as Inspect from "./Inspect.js"

/** Where the data browser's routes live. */
export const prefix = `${Inspect.prefix}/data`

/** Rows per page by default, and at most. */
export const defaultLimit = 50
export const maxLimit = 200

/** One field as the browser describes it. */
export interface FieldInfo {
  readonly name: string
  readonly kind: Columns.Kind
  readonly optional: boolean
  readonly nullable: boolean
  /** True for `id` and for a field that leads an index: sorting by it reads an index range. */
  readonly sortable: boolean
  /** True for a field an equality filter can use (text, number, boolean). */
  readonly filterable: boolean
}

/** The fields of `table`, `id` first. */
export const fieldsOf = (table: Table.Any): ReadonlyArray<FieldInfo> => {
  const leading = new Set(table.indexes.flatMap((index) => index.length > 0 ? [index[0]!] : []))
  return Columns.of(table).map((column) => ({
    name: column.name,
    kind: column.kind,
    optional: column.optional,
    nullable: column.nullable,
    sortable: column.name === "id" || (leading.has(column.name) && column.kind !== "json"),
    filterable: column.kind !== "json"
  }))
}

/** A refusal of the caller's query (400). */
class QueryInvalid extends Schema.TaggedError<QueryInvalid>()("QueryInvalid", { message: Schema.String }) {}

const invalid = (message: string) => Either.left(new QueryInvalid({ message }))

/** The Type-side value of `field` from its encoded form (what `where` compares against). */
const decodeField = (table: Table.Any, field: string, encoded: unknown): Either.Either<unknown, QueryInvalid> => {
  if (encoded === null) return Either.right(null)
  if (field === "id") return typeof encoded === "string" ? Either.right(encoded) : invalid("id: expected text")
  const schema = table.fields[field]
  if (schema === undefined) return invalid(`no field "${field}" in ${table.name}`)
  // Table fields need no context (a table's row schema is `AnyNoContext`).
  const one = Schema.Struct({ [field]: schema }) as unknown as Schema.Schema<Readonly<Record<string, unknown>>>
  const decoded = Schema.decodeUnknownEither(one)({ [field]: encoded })
  return Either.isRight(decoded)
    ? Either.right(decoded.right[field])
    : invalid(`${field}: the value does not fit the field`)
}

/** A typed filter value from the text the operator typed, by the field's storage kind. */
const encodedFromText = (field: FieldInfo, text: string): Either.Either<unknown, QueryInvalid> => {
  switch (field.kind) {
    case "text":
      return Either.right(text)
    case "number": {
      const n = Number(text)
      return text.trim() !== "" && Number.isFinite(n) ? Either.right(n) : invalid(`${field.name}: expected a number`)
    }
    case "boolean":
      return text === "true" ? Either.right(true) : text === "false" ? Either.right(false) : invalid(`${field.name}: expected true or false`)
    case "json":
      return invalid(`${field.name}: JSON fields cannot be filtered`)
  }
}

/** The keyset cursor: where the previous page ended, for one sort. */
interface Cursor {
  readonly sort: string
  readonly dir: "asc" | "desc"
  /** The last row's encoded sort value. */
  readonly value: string | number | boolean | null
  readonly id: string
}

const CursorSchema = Schema.Struct({
  sort: Schema.String,
  dir: Schema.Literal("asc", "desc"),
  value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Null),
  id: Schema.String
})

const encodeCursor = (cursor: Cursor) => Buffer.from(JSON.stringify(cursor)).toString("base64url")

const decodeCursor = (text: string): Either.Either<Cursor, QueryInvalid> => {
  try {
    return Either.mapLeft(
      Schema.decodeUnknownEither(CursorSchema)(JSON.parse(Buffer.from(text, "base64url").toString("utf8"))),
      () => new QueryInvalid({ message: "after: not a cursor of this browser" })
    )
  } catch {
    return invalid("after: not a cursor of this browser")
  }
}

/** A page request, checked against the table. */
export interface PageRequest {
  readonly sort: string
  readonly dir: "asc" | "desc"
  readonly limit: number
  /** Equality conditions (Type side), the tenant's included. */
  readonly where: Readonly<Record<string, unknown>>
  readonly after: Cursor | undefined
}

/** Reads a page request from the query string. */
export const pageRequest = (table: Table.Any, params: URLSearchParams): Either.Either<PageRequest, QueryInvalid> => {
  const fields = fieldsOf(table)
  const sort = params.get("sort") || "id"
  const sortField = fields.find((f) => f.name === sort)
  if (sortField === undefined) return invalid(`sort: no field "${sort}" in ${table.name}`)
  if (!sortField.sortable) return invalid(`sort: "${sort}" leads no index of ${table.name} (sorting by it would read the whole table)`)
  const dirText = params.get("dir") || "asc"
  if (dirText !== "asc" && dirText !== "desc") return invalid("dir: asc or desc")
  const limitText = params.get("limit")
  const limit = limitText === null || limitText === "" ? defaultLimit : Number(limitText)
  if (!Number.isInteger(limit) || limit < 1 || limit > maxLimit) return invalid(`limit: a whole number from 1 to ${maxLimit}`)
  const where: Record<string, unknown> = {}
  for (const [key, text] of params) {
    if (!key.startsWith("where.")) continue
    const name = key.slice("where.".length)
    const field = fields.find((f) => f.name === name)
    if (field === undefined) return invalid(`where: no field "${name}" in ${table.name}`)
    const encoded = encodedFromText(field, text)
    if (Either.isLeft(encoded)) return Either.left(encoded.left)
    const value = decodeField(table, name, encoded.right)
    if (Either.isLeft(value)) return Either.left(value.left)
    where[name] = value.right
  }
  const tenant = params.get("tenant")
  if (tenant !== null && tenant !== "") {
    if (table.tenantField === undefined) return invalid(`tenant: ${table.name} has no tenant field`)
    where[table.tenantField] = tenant
  }
  const afterText = params.get("after")
  let after: Cursor | undefined
  if (afterText !== null && afterText !== "") {
    const cursor = decodeCursor(afterText)
    if (Either.isLeft(cursor)) return Either.left(cursor.left)
    if (cursor.right.sort !== sort || cursor.right.dir !== dirText) return invalid("after: the cursor belongs to another sort")
    after = cursor.right
  }
  // An equality filter on the sort field fixes its value: the order is then the id's.
  const effectiveSort = sort in where ? "id" : sort
  return Either.right({ sort: effectiveSort, dir: effectiveSort === "id" && sort !== "id" ? "asc" : dirText, limit, where, after })
}

/** The filters ANDed with a page's range conditions (a filter on the same field becomes its `eq`). */
const merge = (where: Readonly<Record<string, unknown>>, extra: Readonly<Record<string, unknown>>) => {
  const merged: Record<string, unknown> = { ...where }
  for (const [field, condition] of Object.entries(extra)) {
    merged[field] = field in where ? { eq: where[field], ...(condition as object) } : condition
  }
  return merged
}

/** One page: rows in order, and the cursor of the next page (null on the last). */
export interface Page {
  readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly next: string | null
}

/**
 * One keyset page. The order is the store's: the sort field (nulls first ascending, last
 * descending), ties by id ascending. After a cursor `(v, id)` the page continues with the rows of
 * value `v` after `id`, then the rows past `v`, then (descending) the null values: at most three
 * index range reads, each limited to what the page still needs, whatever the page's depth.
 */
export const page = (store: StoreShape, table: Table.Any, request: PageRequest): Effect.Effect<Page, StoreError | QueryInvalid> =>
  Effect.gen(function*() {
    const { sort, dir, limit, where, after } = request
    // One row more than the page tells whether there is a next page, without a count.
    const want = limit + 1
    const find = (extra: Record<string, unknown>, n: number, direction: "asc" | "desc", orderBy: string) =>
      store.find(table, { where: merge(where, extra), orderBy, direction, limit: n } as never) as Effect.Effect<
        ReadonlyArray<Record<string, unknown>>,
        StoreError
      >
    const rows: Array<Record<string, unknown>> = []
    if (after === undefined) {
      rows.push(...yield* find({}, want, dir, sort))
    } else if (sort === "id") {
      rows.push(...yield* find({ id: dir === "asc" ? { gt: after.id } : { lt: after.id } }, want, dir, "id"))
    } else {
      const value = decodeField(table, sort, after.value)
      if (Either.isLeft(value)) return yield* Effect.fail(value.left)
      const v = value.right
      // The rest of the rows sharing the cursor's value (ties go by id ascending in both directions).
      rows.push(...yield* find({ [sort]: { eq: v }, id: { gt: after.id } }, want, "asc", "id"))
      if (v === null) {
        // Ascending, nulls come first: then every non-null value.
        if (dir === "asc" && rows.length < want) rows.push(...yield* find({ [sort]: { neq: null } }, want - rows.length, "asc", sort))
      } else {
        if (rows.length < want) rows.push(...yield* find({ [sort]: dir === "asc" ? { gt: v } : { lt: v } }, want - rows.length, dir, sort))
        // Descending, nulls come last.
        if (dir === "desc" && rows.length < want && RowCodec.of(table).nullable.has(sort)) {
          rows.push(...yield* find({ [sort]: { eq: null } }, want - rows.length, "asc", "id"))
        }
      }
    }
    const codec = RowCodec.of(table)
    const encoded = rows.slice(0, limit).map((row) => Either.getOrThrow(codec.encode(row)))
    const last = encoded[encoded.length - 1]
    const next = rows.length > limit && last !== undefined
      ? encodeCursor({ sort, dir, value: (last[sort] ?? null) as Cursor["value"], id: String(last.id) })
      : null
    return { rows: encoded, next }
  })

const json = (body: unknown) => HttpServerResponse.unsafeJson(body)

const storeFailure = (error: StoreError | QueryInvalid) =>
  error._tag === "QueryInvalid"
    ? HttpResponses.error(400, "QueryInvalid", error.message)
    : error._tag === "UnknownField" || error._tag === "RowInvalid"
    ? HttpResponses.error(400, error._tag, error.message)
    : HttpResponses.error(503, error._tag, "the store could not answer")

/** The data browser's routes. */
export const routes = HttpLayerRouter.use((router) =>
  Effect.gen(function*() {
    const runtime = yield* Runtime
    const store = yield* Store
    const tables = [...runtime.app.tables].sort((a, b) =>
      Number(Table.isFrameworkTable(a)) - Number(Table.isFrameworkTable(b)) || a.name.localeCompare(b.name)
    )
    const byName = new Map(tables.map((table) => [table.name, table]))
    const history = byName.has(RowHistory.name)
    const tableOf = Effect.map(HttpRouter.params, (params) => Option.fromNullable(byName.get(params.table ?? "")))
    const notFound = (params: Readonly<Record<string, string | undefined>>) =>
      HttpResponses.error(404, "TableNotFound", `no table "${params.table ?? ""}"`)

    yield* router.add("GET", `${prefix}/tables`, Inspect.gated(runtime, Effect.sync(() =>
      json({
        history,
        tables: tables.map((table) => ({
          name: table.name,
          group: Table.isFrameworkTable(table) ? "framework" : "app",
          tenantField: table.tenantField ?? null,
          fields: fieldsOf(table),
          indexes: table.indexes
        }))
      }))))

    yield* router.add("GET", `${prefix}/tables/:table/rows`, Inspect.gated(runtime, Effect.gen(function*() {
      const found = yield* tableOf
      if (Option.isNone(found)) return notFound(yield* HttpRouter.params)
      const table = found.value
      const request = yield* HttpServerRequest.HttpServerRequest
      const params = new URL(request.url, "http://inspect.invalid").searchParams
      const parsed = pageRequest(table, params)
      if (Either.isLeft(parsed)) return storeFailure(parsed.left)
      return yield* Subject.asSystem(page(store, table, parsed.right)).pipe(
        Effect.map((result) => json({ table: table.name, sort: parsed.right.sort, dir: parsed.right.dir, ...result })),
        Effect.catchAll((error) => Effect.succeed(storeFailure(error)))
      )
    })))

    yield* router.add("GET", `${prefix}/tables/:table/rows/:id`, Inspect.gated(runtime, Effect.gen(function*() {
      const params = yield* HttpRouter.params
      const found = yield* tableOf
      if (Option.isNone(found)) return notFound(params)
      const table = found.value
      const id = params.id ?? ""
      return yield* Effect.gen(function*() {
        const row = yield* store.get(table, id)
        const versions = history && !Table.isFrameworkTable(table) ? yield* rowHistory(store, table, id, null) : null
        if (Option.isNone(row) && (versions === null || versions.length === 0)) {
          return HttpResponses.error(404, "RowNotFound", `no row "${id}" in ${table.name}`)
        }
        return json({
          table: table.name,
          row: Option.isSome(row) ? Either.getOrThrow(RowCodec.of(table).encode(row.value)) : null,
          history: versions !== null,
          versions
        })
      }).pipe(Subject.asSystem, Effect.catchAll((error) => Effect.succeed(storeFailure(error))))
    })))
  })
)
