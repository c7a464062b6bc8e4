/**
 * An override names flag fields only: a JSON body's own `__proto__` key (JSON.parse makes it an
 * ordinary key) is an unknown field and refused whole, not assigned as the prototype of the patched
 * definition, where its fields would be read as the flag's own while escaping the unknown-field
 * check and never showing in the override the inspect list and the audit trail print.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as FlagRegistry from "../../src/flags/FlagRegistry.js"
import * as Subject from "../../src/kernel/Subject.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })

describe("flag overrides: keys", () => {
  it.effect("a __proto__ key in an override body is refused as an unknown field; the definition stands", () =>
    Effect.gen(function*() {
      const registry = FlagRegistry.make({ flags: { beta: { rollout: 100 } } })
      for (const body of ['{"__proto__": {"enabled": false}}', '{"__proto__": {"colour": "red"}}', '{"rollout": 100, "__proto__": {"rollout": 0}}']) {
        const exit = yield* Effect.exit(registry.override("beta", JSON.parse(body) as Record<string, unknown>, { type: "user", id: "ops" }))
        assert.isTrue(Exit.isFailure(exit), body)
        if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
          assert.strictEqual(exit.cause.error._tag, "OverrideRefused", body)
          assert.match(String((exit.cause.error as { readonly reason?: string }).reason), /unknown field "__proto__"/)
        }
        assert.isTrue(yield* registry.isEnabled(alice, "beta"), body)
        assert.strictEqual(registry.resolved("beta")!.rollout, 100)
      }
    }))
})
