/**
 * The boot scan of the standing engine: every watched table read once, in id-ordered pages, and
 * the changes committed meanwhile held and replayed after it, once each.
 *
 * The change listener is registered before the boot scan (the plugin host subscribes first), so no
 * write is missed between the scan and the listener. Changes arriving during the boot are held,
 * then replayed after it, skipping those the scan already read: a table is read in id-ordered
 * pages, and a change that arrived before the page covering its row was read is in that page.
 */
import { Effect, Either } from "effect"
import type { ChangeEvent } from "../kernel/changes/ChangeEvent.js"
import * as RowCodec from "../kernel/schema/RowCodec.js"
import type { StoreShape } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import type * as Table from "../kernel/schema/Table.js"

/** What the scan of one table feeds: each row, encoded, as an insert. */
export interface Consumer {
  readonly table: Table.Any
  readonly consume: (row: Readonly<Record<string, unknown>>) => void
}

/** Rows per page of the boot scan (and of the cost ledger's pruning). */
export const pageSize = 1000

/** Two encoded rows (or absences) with the same fields and values. */
const sameRow = (a: Readonly<Record<string, unknown>> | null, b: Readonly<Record<string, unknown>> | null): boolean => {
  if (a === null || b === null) return a === b
  const keys = Object.keys(a)
  if (keys.length !== Object.keys(b).length) return false
  return keys.every((key) => key in b && JSON.stringify(a[key]) === JSON.stringify(b[key]))
}

/**
 * Orders ids as the stores do (PostgreSQL `COLLATE "C"` and SQLite compare UTF-8 bytes, the memory
 * tier sorts strings): by code point, which UTF-16 order matches except around surrogates.
 */
export const compareIds = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let i = 0; i < length; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x - y
    if (x > 0xffff) i++
  }
  return a.length - b.length
}

/** One page read by the scan, and where the changes held at the time stood. */
interface PageRead {
  /** The page's last id; null for the last page (it covers every id after the previous one). */
  readonly lastId: string | null
  /** Changes that had arrived when the read was sent: all in the page. */
  readonly sent: number
  /** Changes that had arrived when the page came back: the ones after are not in it. */
  readonly received: number
  /** Rows of the page changed by a change that arrived during the read (encoded), to tell. */
  readonly racing: ReadonlyMap<string, Readonly<Record<string, unknown>>>
}

/** The boot scan over `store`: holds changes from now on until `replay`. */
export const make = (store: StoreShape) => {
  /** Changes that arrived during the boot, in order; null once the boot replayed them. */
  let arrivals: Array<ChangeEvent> | null = []
  /** Per scanned table: the pages read, in id order. */
  const pagesRead = new Map<string, Array<PageRead>>()

  /** Reads `table` page by page (as the system), feeding each row to `consume`. */
  const scan = (table: Table.Any, consume: (row: Readonly<Record<string, unknown>>) => void) =>
    Effect.gen(function*() {
      const pages: Array<PageRead> = []
      pagesRead.set(table.name, pages)
      const codec = RowCodec.of(table)
      let after: string | null = null
      while (true) {
        const options = { orderBy: "id", limit: pageSize, ...(after === null ? {} : { where: { id: { gt: after } } }) }
        const sent = arrivals!.length
        const rows = (yield* store.find(table, options as never)) as ReadonlyArray<Readonly<Record<string, unknown>>>
        const received = arrivals!.length
        const racing = new Map<string, Readonly<Record<string, unknown>>>()
        if (received > sent) {
          const ids = new Set(arrivals!.slice(sent, received).filter((event) => event.table === table.name).map((event) => event.id))
          for (const row of rows) {
            const encoded = ids.has(row.id as string) ? codec.encode(row) : undefined
            if (encoded !== undefined && Either.isRight(encoded)) racing.set(row.id as string, encoded.right)
          }
        }
        for (const row of rows) consume(row)
        const last = rows.length < pageSize
        if (!last) after = rows[rows.length - 1]!.id as string
        pages.push({ lastId: last ? null : after, sent, received, racing })
        if (last) return
      }
    }).pipe(Subject.asSystem)

  /**
   * Whether the boot scan already read the change that arrived `index`-th: it arrived before the
   * read of its row's page was sent, or during that read and the page holds its result (or a later one).
   */
  const scanned = (event: ChangeEvent, index: number) => {
    const pages = pagesRead.get(event.table)
    if (pages === undefined) return false
    const page = pages.find((page) => page.lastId === null || compareIds(event.id, page.lastId) <= 0)
    if (page === undefined || index >= page.received) return false
    if (index < page.sent) return true
    const read = page.racing.get(event.id) ?? null
    for (let i = index; i < page.received; i++) {
      const later = arrivals![i]!
      if (later.table === event.table && later.id === event.id && sameRow(later.after, read)) return true
    }
    return false
  }

  return {
    scan,
    /** Holds a change that arrived during the boot (true); false once the boot replayed them: handle it now. */
    hold: (event: ChangeEvent): boolean => {
      if (arrivals === null) return false
      arrivals.push(event)
      return true
    },
    /** Applies, in arrival order, the held changes the scan missed (those arriving meanwhile join the end), then stops holding. */
    replay: (apply: (event: ChangeEvent) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        for (let index = 0; index < arrivals!.length; index++) {
          const event = arrivals![index]!
          if (!scanned(event, index)) yield* apply(event)
        }
        arrivals = null
        pagesRead.clear()
      })
  }
}
