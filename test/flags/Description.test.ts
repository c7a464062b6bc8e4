/**
 * The flag `description` (spec 2.11: documentation): listed on the inspect surface (`GET /list`,
 * null for a flag without one), patched by an override like any other field, refused at
 * declaration when it is not a string, and never part of the evaluation.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { defineApp } from "../../src/app/App.js"
import { evaluateVariant, flagsPlugin } from "../../src/flags/index.js"
import type { Flag } from "../../src/flags/index.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Serve from "../support/Serve.js"

const token = "description-token"
process.env.FW_INSPECT_TOKEN = token

const listed = (url: string) =>
  Effect.promise(() =>
    fetch(`${url}/_fw/inspect/plugins/flags/list`, { headers: { authorization: `Bearer ${token}` } })
      .then((response) => response.json() as Promise<{ flags: ReadonlyArray<{ key: string; description: string | null }> }>)
  )

describe("flag description", () => {
  it.scopedLive("listed on the inspect surface (null without one), and patched by an override", () =>
    Effect.gen(function*() {
      const flags = flagsPlugin({ flags: { beta: { rollout: 50, description: "the beta report, for acme first" }, plain: true } })
      const served = yield* Serve.serve(defineApp({ plugins: [flags] }), Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal)))
      const descriptions = Effect.map(listed(served.url), (body) => Object.fromEntries(body.flags.map((flag) => [flag.key, flag.description])))
      assert.deepStrictEqual(yield* descriptions, { beta: "the beta report, for acme first", plain: null })
      const overridden = yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/plugins/flags/override`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ flag: "beta", override: { description: "now for everyone" } })
        })
      )
      assert.strictEqual(overridden.status, 200)
      assert.deepStrictEqual(yield* descriptions, { beta: "now for everyone", plain: null })
    }))

  it("refused at declaration when not a string; never part of the evaluation", () => {
    assert.throws(() => flagsPlugin({ flags: { beta: { description: 42 } as unknown as Flag } }), /flag "beta": description must be a string/)
    const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme" })
    for (let i = 0; i < 50; i++) {
      const subject = { ...alice, id: `u${i}` }
      assert.deepStrictEqual(
        evaluateVariant("beta", { rollout: 50, description: "one text" }, subject, 0),
        evaluateVariant("beta", { rollout: 50, description: "another text" }, subject, 0)
      )
    }
  })
})
