/**
 * A hybrid refresh's `onChange` tables are checked against the app's tables at boot, as an
 * incremental `source` is: a misspelt name (`"order"` for `"orders"`) would otherwise subscribe to
 * a table that never changes, and the aggregate would silently refresh on its interval only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Schema } from "effect"
import { defineAggregate } from "../../src/aggregates/index.js"
import { base, Orders, scheduler, tiers } from "./support.js"

const Row = Schema.Struct({ k: Schema.String })
const memory = tiers.find((tier) => tier.name === "memory")!

const hybrid = (onChange: ReadonlyArray<string | typeof Orders>) =>
  defineAggregate({ name: "watching", refresh: { interval: "1h", onChange, debounceMs: 10 }, output: Row, build: () => Effect.succeed([]) })

describe("hybrid refresh: onChange tables", () => {
  it.scoped("a table that is not one of the app's fails the boot with TableNotDeclared naming it", () =>
    Effect.gen(function*() {
      const ctx = yield* base(memory)
      const exit = yield* Effect.exit(scheduler("memory", ctx, [hybrid(["orders", "order"])]))
      assert.isTrue(Exit.isFailure(exit))
      const text = Exit.isFailure(exit) ? String(exit.cause) : ""
      assert.include(text, "TableNotDeclared")
      assert.include(text, `aggregate "watching" uses table "order", which the app does not declare: add it to the tables of defineApp({ tables: [...] })`)
    }))

  it.scoped("the app's tables, by name or by value, boot", () =>
    Effect.gen(function*() {
      const ctx = yield* base(memory)
      const s = yield* scheduler("memory", ctx, [hybrid(["events", Orders])])
      yield* s.booted
      assert.strictEqual((yield* s.meta("watching")).lastError, null)
    }))
})
