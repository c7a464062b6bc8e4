/**
 * The framework-agnostic flag state of `@fw/framework/client` (what `useFlags`/`useFlag` read): the
 * live `flags.evaluate` set arrives over the socket and a toggle on the inspect surface pushes the
 * new set.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { defineApp } from "../../src/app/App.js"
import type { FlagSet } from "../../src/client/Flags.js"
import type { LiveState } from "../../src/client/index.js"
import { Flags } from "../../src/client/index.js"
import { flagsPlugin } from "../../src/flags/index.js"
import * as Serve from "../support/Serve.js"
import { memory, mountAs, parts } from "./fixtures.js"

const inspectToken = "client-flags-token"
process.env.FW_INSPECT_TOKEN = inspectToken

describe("Flags: the caller's live flag set in the client", () => {
  it.scopedLive("arrives, and a toggle on the server pushes the new set", () =>
    Effect.gen(function*() {
      const flags = flagsPlugin({ flags: { beta: false, stable: true } })
      const served = yield* Serve.serve(defineApp({ ...parts, name: "client-flags", plugins: [flags] }), memory)
      const fw = yield* mountAs(served.rpcUrl)
      const live = Flags.live(fw.apis.main)
      const states: Array<LiveState<FlagSet>> = []
      const stop = live.subscribe(() => states.push(live.getSnapshot()))
      yield* Effect.addFinalizer(() => Effect.sync(stop))
      const until = (predicate: (state: LiveState<FlagSet>) => boolean) =>
        Effect.promise(() =>
          new Promise<void>((resolve) => {
            const check = () => predicate(live.getSnapshot()) ? resolve() : setTimeout(check, 10)
            check()
          })
        )
      assert.isFalse(Flags.isEnabled(live.getSnapshot(), "stable"), "false before the first result")
      yield* until((state) => state.status === "live")
      assert.isTrue(Flags.isEnabled(live.getSnapshot(), "stable"))
      assert.isFalse(Flags.isEnabled(live.getSnapshot(), "beta"))
      assert.isFalse(Flags.isEnabled(live.getSnapshot(), "unknown"))
      const toggled = yield* Effect.promise(() =>
        fetch(`${served.url}/_fw/inspect/plugins/flags/toggle`, {
          method: "POST",
          headers: { authorization: `Bearer ${inspectToken}`, "content-type": "application/json" },
          body: JSON.stringify({ flag: "beta", actor: "ops" })
        })
      )
      assert.strictEqual(toggled.status, 200)
      yield* until((state) => Flags.isEnabled(state, "beta"))
      assert.isTrue(states.length >= 2)
    }))
})
