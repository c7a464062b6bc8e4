/**
 * A slow listener on the writing replica delays neither the callers nor the other listeners, there
 * or on other replicas. Proven by order, not by timing: every call answered and every other
 * listener received every change while the slow one (2 s per event) had handled only a few.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import { create, Docs } from "./app.js"
import * as Fleet from "./support.js"

const writes = 20

const slowHandled = (replica: Fleet.Replica) =>
  Effect.promise(() => fetch(`${replica.url}/_slow`).then((r) => r.json() as Promise<{ handled: number }>)).pipe(
    Effect.map((body) => body.handled)
  )

describe.skipIf(Pg.serverUrl === null)("fleet: a slow listener (real processes)", () => {
  it.scopedLive("holds up neither the callers nor the other listeners, on its replica or another", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      const [slow, other] = yield* Effect.all([
        Fleet.start("slow", url, { FW_SLOW_LISTENER_MS: "2000" }),
        Fleet.start("other", url)
      ], { concurrency: "unbounded" })
      const expected = Array.from({ length: writes }, (_, i) => `d${i}:t${i}`)
      yield* Effect.forEach(expected, (_, i) => slow.client.call(create, { id: `d${i}`, title: `t${i}` }), {
        concurrency: 4,
        discard: true
      })
      const problems: Array<string> = []
      for (const replica of [slow, other]) {
        const received = yield* Fleet.eventually(Fleet.eventsOf(replica), (events) => events.length >= writes)
        problems.push(...Fleet.deliveryProblems(replica.name, received, expected))
      }
      const handled = yield* slowHandled(slow)
      console.log(`slow listener: ${writes} calls answered and delivered everywhere while it had handled ${handled}`)
      assert.deepStrictEqual(problems, [])
      assert.isBelow(handled, writes, "the calls and the other listeners did not wait for the slow listener")
      // And the slow listener is really there, working through its events.
      assert.isAbove(yield* Fleet.eventually(slowHandled(slow), (n) => n > handled), handled)
    }), 120_000)
})
