/**
 * Flag toggles across real replicas (`pluginsApp.ts`, `flagsPlugin({store: "sql"})`, fleet change
 * scope): a toggle through replica A's inspect route is honoured on replica B — B's gated
 * `beta.report` answers `FlagDisabled`, then succeeds again after a toggle back on B — and B's live
 * `flags.evaluate` subscriber (WebSocket) receives each new set; A's subscriber sees B's toggle too.
 * A toggle after the override was cleared is honoured on both.
 * Without the fleet scope (each replica's changes its own) B would keep serving the old state.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Queue, Stream } from "effect"
import * as path from "node:path"
import * as Client from "../../src/client/Client.js"
import { flagsEvaluate } from "../../src/flags/index.js"
import * as flagTables from "../../src/flags/tables.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import { SamlReplay } from "../../src/saml/tables.js"
import * as Pg from "../support/Pg.js"
import { report } from "./pluginsApp.js"
import * as Fleet from "./support.js"

const inspectToken = "fleet-inspect-token-0123456789"
const caller = { headers: { authorization: "Bearer fleet" } }

/** Toggles `flag` through `url`'s inspect route; the flag's state after the flip. */
const toggle = (url: string, flag: string, actor: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/_fw/inspect/plugins/flags/toggle`, {
      method: "POST",
      headers: { authorization: `Bearer ${inspectToken}`, "content-type": "application/json" },
      body: JSON.stringify({ flag, actor })
    })
    const body = await response.text()
    if (response.status !== 200) throw new Error(`toggle on ${url}: ${response.status} ${body}`)
    return (JSON.parse(body) as { readonly after: { readonly enabled: boolean } }).after.enabled
  })

/** Clears `flag`'s override through `url`'s inspect route (back to the code definition). */
const clear = (url: string, flag: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/_fw/inspect/plugins/flags/override`, {
      method: "POST",
      headers: { authorization: `Bearer ${inspectToken}`, "content-type": "application/json" },
      body: JSON.stringify({ flag, actor: "ops", override: null })
    })
    if (response.status !== 200) throw new Error(`clear on ${url}: ${response.status} ${await response.text()}`)
  })

/** A replica's clients: `report` over HTTP (its answer or its error's tag) and `flags.evaluate` live over WebSocket. */
const connect = (url: string) =>
  Effect.gen(function*() {
    const http = yield* Client.connect([report], Client.layerHttp(`${url}/rpc`))
    const ws = yield* Client.connect([flagsEvaluate], Client.layerWebSocket(`${url.replace("http:", "ws:")}/rpc`))
    const pushed = yield* Queue.unbounded<boolean | undefined>()
    yield* ws.live(flagsEvaluate, {}, caller).pipe(Stream.runForEach((set) => Queue.offer(pushed, set.beta)), Effect.forkScoped)
    const gated = Effect.map(Effect.either(http.call(report, {}, caller)), (answer) => Either.isRight(answer) ? "ok" : answer.left._tag)
    /** The next pushed `beta` value (undefined when none comes within 10 s). */
    const next = Queue.take(pushed).pipe(Effect.timeout("10 seconds"), Effect.orElseSucceed(() => undefined))
    return { gated, next }
  })

describe.skipIf(Pg.serverUrl === null)("flag toggles across replicas (real processes)", () => {
  it.scopedLive("a toggle on A gates B's procedure and reaches B's live flags.evaluate; a toggle on B reaches A", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([SamlReplay, ...flagTables.all]).pipe(Effect.provide(Pg.layerClient(url)))
      const appPath = yield* Effect.promise(() => Fleet.bundleApp("pluginsApp.ts"))
      const env = { DATABASE_URL: url, FW_SAML_FIXTURES: path.join(import.meta.dirname, "..", "saml", "fixtures"), FW_INSPECT_TOKEN: inspectToken }
      const [a, b] = yield* Effect.all([Fleet.spawnApp("a", appPath, env), Fleet.spawnApp("b", appPath, env)], { concurrency: "unbounded" })
      const [onA, onB] = yield* Effect.all([connect(a.url), connect(b.url)])
      assert.deepStrictEqual([yield* onA.next, yield* onB.next], [true, true], "the initial sets")
      assert.deepStrictEqual([yield* onA.gated, yield* onB.gated], ["ok", "ok"])

      // Off on A: B's gated call is refused, B's subscriber is pushed the new set.
      assert.isFalse(yield* toggle(a.url, "beta", "ops-a"))
      const pushedB = yield* onB.next
      const gatedB = yield* Fleet.eventually(onB.gated, (answer) => answer === "FlagDisabled")
      assert.deepStrictEqual([pushedB, gatedB, yield* onA.next, yield* onA.gated], [false, "FlagDisabled", false, "FlagDisabled"])

      // On again on B: A follows.
      assert.isTrue(yield* toggle(b.url, "beta", "ops-b"))
      const pushedA = yield* onA.next
      const gatedA = yield* Fleet.eventually(onA.gated, (answer) => answer === "ok")
      assert.deepStrictEqual([pushedA, gatedA, yield* onB.next, yield* onB.gated], [true, "ok", true, "ok"])

      // The override cleared on A (beta back to its code definition, on), then toggled off on A:
      // both replicas follow the toggle (the clear must not reset the flag's version, or the
      // toggle after it would look older than what the replicas hold and be ignored).
      yield* clear(a.url, "beta")
      assert.isFalse(yield* toggle(a.url, "beta", "ops-a"))
      const afterClear = yield* Effect.all([
        Fleet.eventually(onA.gated, (answer) => answer === "FlagDisabled"),
        Fleet.eventually(onB.gated, (answer) => answer === "FlagDisabled")
      ], { concurrency: "unbounded" })
      assert.deepStrictEqual(afterClear, ["FlagDisabled", "FlagDisabled"], "a toggle after a clear is honoured on both replicas")
      console.log(`fleet flags: 2 replicas, 3 toggles and a clear: each honoured by the other's gate and pushed to its live flags.evaluate`)
    }), { timeout: 90_000 })
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
