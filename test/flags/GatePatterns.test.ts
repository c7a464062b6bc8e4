/**
 * A `gatedBy` pattern decides the same for every tag, whatever flags the regex carries: `g` and
 * `y` make `RegExp.test` stateful (it resumes at `lastIndex`), so after one gated tag the next
 * matching tag would have been tested from the middle and let through ungated.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import type * as Procedure from "../../src/app/Procedure.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as Subject from "../../src/kernel/Subject.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })

const gated = (plugin: ReturnType<typeof flagsPlugin>, tag: string) => {
  const interceptor = plugin.interceptors!.find((candidate) => candidate.kind === "mutation")!
  const call = { tag, subject: alice } as unknown as Procedure.Call
  // The flags interceptor reads no service: only the call and the fiber's clock.
  return Effect.map(Effect.exit(interceptor.intercept(call, Effect.succeed("ran")) as Effect.Effect<unknown, unknown>), Exit.isFailure)
}

describe("gatedBy patterns", () => {
  it.effect("a sticky or global pattern gates every matching tag, not only the first", () =>
    Effect.gen(function*() {
      for (const pattern of ["/^admin\\./y", "/^admin\\./g", "/admin/gy", "/^admin\\./i"]) {
        const plugin = flagsPlugin({ flags: { "admin-tools": false }, gatedBy: { [pattern]: "admin-tools" } })
        for (const tag of ["admin.purge", "admin.drop", "admin.reset", "admin.purge"]) {
          assert.isTrue(yield* gated(plugin, tag), `${pattern} ${tag}`)
        }
        assert.isFalse(yield* gated(plugin, "notes.list"), pattern)
      }
    }))
})
