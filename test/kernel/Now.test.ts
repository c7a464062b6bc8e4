/**
 * `Now.later`: an effect waiting for a fiber keeps, through `Now`'s combinators, what it is once
 * that fiber ends (what the server applies at the fiber's end), and its effect form is unchanged.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import * as Now from "../../src/kernel/Now.js"

describe("Now.later", () => {
  it.effect("the combinators keep the fiber and apply their continuation to its exit, as their effect form does", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<number, string>()
      const fiber = yield* Effect.fork(Deferred.await(gate))
      const waiting = Now.later(Fiber.join(fiber), fiber, (exit) => exit as Exit.Exit<number, string>)
      const answered = Now.catchAllCause(
        Now.map(Now.flatMap(waiting, (n) => n > 0 ? Exit.succeed(n * 2) : Exit.fail("negative")), (n) => `n=${n}`),
        (cause) => Exit.succeed(`failed: ${Cause.squash(cause)}`)
      )
      const pending = Now.laterOf(answered)
      assert.isDefined(pending)
      assert.strictEqual(pending!.fiber, fiber)
      // What the server applies at the fiber's end: an exit, no fiber needed.
      assert.deepStrictEqual(pending!.then(Exit.succeed(21)), Exit.succeed("n=42"))
      assert.deepStrictEqual(pending!.then(Exit.succeed(-1)), Exit.succeed("failed: negative"))
      assert.deepStrictEqual(pending!.then(Exit.fail("gone")), Exit.succeed("failed: gone"))
      // The effect form is the same computation.
      yield* Deferred.succeed(gate, 21)
      assert.strictEqual(yield* answered, "n=42")
    }))

  it("an effect not made by `later` has none, and neither has what is made from it", () => {
    const plain = Now.map(Effect.sleep(1), () => 1)
    assert.isUndefined(Now.laterOf(plain))
    assert.isUndefined(Now.laterOf(Now.either(Effect.succeed(1))))
  })
})
