/**
 * The options of `searchPlugin` (spec 2.1, 2.2) and their checks at configuration time.
 */
import type * as Table from "../kernel/schema/Table.js"
import type { BackendOption } from "./Backend.js"
import { SearchConfigInvalid } from "./Errors.js"
import type { Document, FieldType, IndexSpec } from "./SearchBackend.js"
import { fieldPattern } from "./SearchBackend.js"

/** One index: which table it mirrors and how a row becomes a document. */
export interface IndexOptions<T extends Table.Any = Table.Any> {
  /** The mirrored table (beyond the spec's fields: reindex and repair read it). */
  readonly table: T
  /** The engine index name. */
  readonly index: string
  /** The document field carrying the tenant; every query is filtered on it. */
  readonly tenantField: string
  /** If present, the only fields a caller may filter, facet or highlight on; never the tenant field. */
  readonly queryableFields?: ReadonlyArray<string>
  /** Fields searched by `q` (engineA needs them); default every string field but the tenant field. */
  readonly searchableFields?: ReadonlyArray<string>
  /** Field types for engines that need a schema. */
  readonly fields?: Readonly<Record<string, FieldType>>
  /**
   * The document of a row: a string `id` equal to the row's id, the tenant in `tenantField`
   * (equal to the row's tenant on a tenant table), other fields. It may throw: the row then goes
   * to the drift ledger as a permanent failure.
   */
  readonly map: (row: Table.Row<T>) => Document
}

/** Declares an index with the row type of its table (for typed `map`). */
export const searchIndex = <T extends Table.Any>(table: T, options: Omit<IndexOptions<T>, "table">): IndexOptions<T> => ({
  ...options,
  table
})

/** Sync tuning (spec 2.2). */
export interface SyncOptions {
  readonly retries?: number
  readonly retryBaseDelayMs?: number
  readonly retryMaxDelayMs?: number
  readonly resyncIntervalMs?: number
  readonly resyncBatchSize?: number
  readonly reindexBatchSize?: number
  readonly statsFlushIntervalMs?: number
  readonly statsFlushMaxBuffered?: number
  /** Most changes of one index in one engine request (default 1000). */
  readonly batchMaxDocuments?: number
  /** Most bytes (documents as JSON) of one engine request (default 4 MiB; a larger document goes alone). */
  readonly batchMaxBytes?: number
  /** Batches of one index sent and not yet acknowledged at most (default 4). */
  readonly batchesInFlight?: number
}

/** Options of `searchPlugin`. */
export interface Options {
  /** Default `"memory"`. */
  readonly backend?: BackendOption
  /**
   * Name → index. The name is what `search.query` callers pass as `index`.
   * Each value's `map` takes its table's row (declare with `searchIndex` for typing).
   */
  // `never` as the row type lets an index of any table be listed: a function of a narrower row
  // type is assignable to one taking `never`.
  readonly indexes: Readonly<Record<string, IndexOptions<Table.Any>>>
  /** Widens the engineParams allow-list (document-selecting keys stay dropped). */
  readonly allowedEngineParams?: ReadonlyArray<string>
  /** Exactly one process serves search; the memory index is re-seeded at start. */
  readonly singleProcessMemoryIndex?: boolean
  readonly sync?: SyncOptions
  /** This replica's name in `_fw_search_stats` (default env `FW_REPLICA_ID`, else host name and pid). */
  readonly replicaId?: string
  /** The plugin name (default `search`); inspect routes mount under `/_fw/inspect/plugins/<name>`. */
  readonly name?: string
}

/** Sync options with every default applied. */
export type Sync = Required<SyncOptions>

/** The defaults of spec 2.2 and 8. */
export const defaults: Sync = {
  retries: 5,
  retryBaseDelayMs: 200,
  retryMaxDelayMs: 10_000,
  resyncIntervalMs: 60_000,
  resyncBatchSize: 200,
  reindexBatchSize: 1000,
  statsFlushIntervalMs: 5000,
  statsFlushMaxBuffered: 1000,
  batchMaxDocuments: 1000,
  batchMaxBytes: 4 * 1024 * 1024,
  batchesInFlight: 4
}

/** A declared index, checked. */
export interface Resolved {
  readonly name: string
  readonly table: Table.Any
  readonly spec: IndexSpec
  readonly queryableFields: ReadonlySet<string> | undefined
  readonly map: (row: unknown) => Document
}

const nonNegativeInteger = (value: number) => Number.isInteger(value) && value >= 0

/** Applies defaults and checks the options; throws `SearchConfigInvalid`. */
export const check = (options: Options): { readonly sync: Sync; readonly indexes: ReadonlyArray<Resolved> } => {
  const sync: Sync = { ...defaults, ...options.sync }
  for (const [key, value] of Object.entries(sync)) {
    if (!nonNegativeInteger(value)) throw new SearchConfigInvalid(`sync.${key} must be a non-negative integer, got ${value}`)
  }
  for (const key of ["retryBaseDelayMs", "retryMaxDelayMs", "resyncBatchSize", "reindexBatchSize", "statsFlushMaxBuffered", "batchMaxDocuments", "batchMaxBytes", "batchesInFlight"] as const) {
    if (sync[key] === 0) throw new SearchConfigInvalid(`sync.${key} must be at least 1`)
  }
  if (options.indexes === undefined || Object.keys(options.indexes).length === 0) {
    throw new SearchConfigInvalid("searchPlugin needs at least one index")
  }
  const engineNames = new Set<string>()
  const indexes = Object.entries(options.indexes).map(([name, index]): Resolved => {
    if (!/^[A-Za-z][A-Za-z0-9_-]*$/.test(name)) throw new SearchConfigInvalid(`index name "${name}" must be an identifier`)
    if (index.table?._tag !== "Table") throw new SearchConfigInvalid(`index "${name}": table must be a declared table`)
    if (typeof index.index !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(index.index)) {
      throw new SearchConfigInvalid(`index "${name}": index (the engine index name) must be letters, digits, _ or -`)
    }
    if (engineNames.has(index.index)) throw new SearchConfigInvalid(`engine index "${index.index}" is used by two indexes`)
    engineNames.add(index.index)
    if (typeof index.tenantField !== "string" || !fieldPattern.test(index.tenantField)) {
      throw new SearchConfigInvalid(`index "${name}": tenantField is required and must be a field name`)
    }
    if (typeof index.map !== "function") throw new SearchConfigInvalid(`index "${name}": map is required`)
    for (const field of [...(index.queryableFields ?? []), ...(index.searchableFields ?? [])]) {
      if (!fieldPattern.test(field)) throw new SearchConfigInvalid(`index "${name}": "${field}" is not a field name`)
    }
    if (index.queryableFields?.some((field) => field === index.tenantField || field.startsWith(`${index.tenantField}.`))) {
      throw new SearchConfigInvalid(`index "${name}": queryableFields must not list the tenant field "${index.tenantField}"`)
    }
    return {
      name,
      table: index.table,
      spec: {
        index: index.index,
        tenantField: index.tenantField,
        ...(index.searchableFields ? { searchableFields: index.searchableFields } : {}),
        ...(index.queryableFields ? { queryableFields: index.queryableFields } : {}),
        ...(index.fields ? { fields: index.fields } : {})
      },
      queryableFields: index.queryableFields ? new Set(index.queryableFields) : undefined,
      map: index.map as (row: unknown) => Document
    }
  })
  return { sync, indexes }
}
