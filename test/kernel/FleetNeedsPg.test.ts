/**
 * `ChangeTap.layerFleet` names only `SqlClient` in its type (its declarations must not reach
 * `@effect/sql-pg`, an optional peer a SQLite app does not install: see scripts/pack-check.sh), so
 * the need for PostgreSQL is checked when it is built: another SqlClient fails saying what to provide.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"

describe("ChangeTap.layerFleet on a SqlClient that is not PostgreSQL", () => {
  it.scoped("fails the boot naming what to provide", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(ChangeTap.layerFleet().pipe(Layer.provide(SqliteClient.layer({ filename: ":memory:" })))))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(
        Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "",
        "ChangeTap.layerFleet needs PostgreSQL: provide PgClient.layer from @effect/sql-pg, not another SqlClient"
      )
    }))
})
