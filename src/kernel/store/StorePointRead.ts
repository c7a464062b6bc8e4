/**
 * The Store's point read (`get`, a row by id) and `visible`, the row a write may act on: a row the
 * caller may see, decoded, answered in as few fiber steps as the tier allows (see `make`).
 */
import { Effect, Either, Exit, Fiber, Option } from "effect"
import * as Driver from "./Driver.js"
import type { RowInvalid, StoreError } from "../Errors.js"
import { StoreUnavailable } from "../Errors.js"
import { noteRead, noteReadIn } from "../changes/ReadTracking.js"
import * as RowCodec from "../schema/RowCodec.js"
import { inSpan, traced } from "./StoreSpan.js"
import type * as Table from "../schema/Table.js"
import * as Telemetry from "../Telemetry.js"
import * as TenantScope from "./TenantScope.js"

/** A point read that found nothing the caller may see. */
const noRow: Exit.Exit<Option.Option<unknown>, never> = Exit.succeed(Option.none())

/** The point read over `driver`, and the visible row by id (for update or not). */
export const make = (driver: Driver.Driver) => {
  /** The stored row `id` if the caller may see it. */
  const visible = (table: Table.Any, id: string, forUpdate: boolean) =>
    RowCodec.isStorableId(id)
      ? Effect.flatMap(TenantScope.of(table), (scope) =>
        Effect.map(
          driver.get(table, id, { forUpdate }),
          Option.filter((row) => TenantScope.sees(scope, row))
        ))
      : Effect.succeedNone

  const getNow = driver.getNow
  const getSend = driver.getSend
  /**
   * A point read. A tier that answers from a server (`getSend`) is sent the read from one
   * `Effect.async`, finished in the tier's callback. A tier that can answer synchronously
   * (`getNow`) does, in this one fiber step: no effect per stage. With a tracer installed, or when
   * the tier cannot answer now, `getAsync`.
   */
  const get = (table: Table.Any, id: string, options?: { readonly forUpdate?: boolean }) =>
    options?.forUpdate === true || (getNow === undefined && getSend === undefined)
      ? traced("get", getAsync)(table, id, options)
      : getSend !== undefined
      ? getSent(getSend, table, id)
      : Effect.withFiberRuntime<Option.Option<unknown>, StoreError>((fiber) => {
        if (Telemetry.isInstalled(fiber.currentTracer)) return inSpan("get", table, getAsync(table, id, options))
        if (unreadableId(id)) {
          noteReadIn(fiber, table.name)
          return Effect.succeedNone
        }
        const row = getNow!(table, id, fiber)
        if (row === Driver.NotNow) return getAsync(table, id, options)
        noteReadIn(fiber, table.name)
        if (row instanceof StoreUnavailable) return Effect.fail(row)
        return row === undefined ? Effect.succeedNone : visibleRow(table, id, TenantScope.ofFiber(fiber, table), row)
      })

  /**
   * `get` on a tier that answers from a server: one `Effect.async` whose registration sends the
   * read and whose callback (the driver's) checks the row's id and tenant and decodes it, so the
   * fiber resumes once, with the outcome (no step per stage). The fiber is the one running the
   * registration (`Fiber.getCurrentFiber`): no `withFiberRuntime` step to reach it. The read waits
   * for no row lock, so an interrupted fiber simply leaves (the answer is then dropped).
   */
  const getSent = (send: NonNullable<Driver.Driver["getSend"]>, table: Table.Any, id: string) =>
    Effect.async<Option.Option<unknown>, StoreError>((resume) => {
      const fiber = Option.getOrUndefined(Fiber.getCurrentFiber())
      if (fiber === undefined) return resume(getAsync(table, id, undefined))
      if (Telemetry.isInstalled(fiber.currentTracer)) return resume(inSpan("get", table, getAsync(table, id, undefined)))
      if (unreadableId(id)) {
        noteReadIn(fiber, table.name)
        return resume(Effect.succeedNone)
      }
      const scope = TenantScope.ofFiber(fiber, table)
      const sent = send(table, id, fiber, (row) => {
        try {
          resume(
            row === undefined
              ? Effect.succeedNone
              : row instanceof StoreUnavailable
              ? Exit.fail(row)
              : visibleRow(table, id, scope, row)
          )
        } catch (defect) {
          // A schema's transformation that throws: a defect, as in any effect.
          resume(Effect.die(defect))
        }
      })
      if (!sent) return resume(getAsync(table, id, undefined))
      noteReadIn(fiber, table.name)
    })

  /**
   * An id no row can have finds nothing. Rather than scanning every id for NUL and lone surrogates
   * (`isStorableId`), a found row must carry exactly the id asked for: stored ids hold neither, so
   * a lossy match (a surrogate bound as U+FFFD) is no match.
   */
  const unreadableId = (id: string) => typeof id !== "string" || id.length > RowCodec.maxIdLength

  /** A row read by id, decoded if the caller may see it: the read's outcome. */
  const visibleRow = (
    table: Table.Any,
    id: string,
    scope: TenantScope.Scope,
    row: Driver.Encoded
  ): Exit.Exit<Option.Option<unknown>, RowInvalid> => {
    if (row.id !== id || !TenantScope.sees(scope, row)) return noRow
    const decoded = RowCodec.of(table).decode(row)
    return Either.isRight(decoded) ? Exit.succeed(Option.some(decoded.right)) : Exit.fail(decoded.left)
  }

  const getAsync = (table: Table.Any, id: string, options?: { readonly forUpdate?: boolean }) =>
    Effect.zipRight(
      noteRead(table.name),
      Effect.flatMap(visible(table, id, options?.forUpdate === true), (row) =>
        Option.isNone(row)
          ? Effect.succeedNone
          : Effect.map(RowCodec.of(table).decode(row.value), Option.some))
    )

  return { get, visible }
}
