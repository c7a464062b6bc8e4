/**
 * One answer for a body that could not be read, shared by `POST /rpc` and `POST /rpc/<tag>`
 * (`BodyLimit.refusedResponse`): 413 past the cap, 400 for a broken read, anything else goes on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit } from "effect"
import * as BodyLimit from "../../src/http/BodyLimit.js"

describe("a body that could not be read", () => {
  it.effect("PayloadTooLarge is 413 with the limit, BodyReadFailed 400; another cause is not answered", () =>
    Effect.gen(function*() {
      const tooLarge = yield* BodyLimit.refusedResponse(Cause.fail(new BodyLimit.PayloadTooLarge({ limit: 256 })))
      assert.strictEqual(tooLarge.status, 413)
      assert.strictEqual(tooLarge.headers["connection"], "close")
      const broken = yield* BodyLimit.refusedResponse(Cause.fail(new BodyLimit.BodyReadFailed({ message: "aborted" })))
      assert.strictEqual(broken.status, 400)
      const other = yield* Effect.exit(BodyLimit.refusedResponse(Cause.die("boom")))
      assert.isTrue(Exit.isFailure(other) && Cause.isDie(other.cause))
    }))
})
