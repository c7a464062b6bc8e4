/**
 * A replica process whose LISTEN connection goes deaf (open, but nothing PostgreSQL sends reaches
 * it: a half-dead middlebox) still receives every change the others commit, by LISTEN again on a
 * fresh connection, and still stops when told to.
 *
 * Replica B reaches PostgreSQL through a TCP proxy in this process (test/support/DeafProxy.ts) and
 * reads the outbox only every 10 minutes: within the test, only a working LISTEN delivers to it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as DeafProxy from "../support/DeafProxy.js"
import * as Pg from "../support/Pg.js"
import { create, Docs } from "./app.js"
import * as Fleet from "./support.js"

describe.skipIf(Pg.serverUrl === null)("fleet: a deaf LISTEN connection (real processes)", () => {
  it.scopedLive("is replaced: every change committed elsewhere reaches the replica, which still stops on SIGTERM", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([Docs, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      const proxy = yield* DeafProxy.make(url)
      const [a, b] = yield* Effect.all([
        Fleet.start("a", url),
        Fleet.start("b", proxy.url, { FW_POLL_MS: "600000" })
      ], { concurrency: "unbounded" })
      const expected: Array<string> = []
      const write = (i: number) =>
        Effect.zipRight(a.client.call(create, { id: `d${i}`, title: `t${i}` }), Effect.sync(() => void expected.push(`d${i}:t${i}`)))

      yield* write(0)
      const heard = yield* Fleet.eventually(Fleet.eventsOf(b), (events) => events.length >= 1)
      assert.deepStrictEqual(heard, ["d0:t0"])

      assert.strictEqual(proxy.deafen(), 1, "B's one LISTEN connection is made deaf")
      // Committed while B is deaf: read by B when it notices (a read runs at once then).
      for (let i = 1; i <= 10; i++) yield* write(i)
      const whileDeaf = yield* Fleet.eventually(Fleet.eventsOf(b), (events) => events.length >= expected.length)
      assert.deepStrictEqual(Fleet.deliveryProblems("b", whileDeaf, expected), [])
      // Committed after that: only a fresh LISTEN connection (or the read once it listens) delivers them.
      for (let i = 11; i <= 20; i++) yield* write(i)
      const after = yield* Fleet.eventually(Fleet.eventsOf(b), (events) => events.length >= expected.length)
      assert.deepStrictEqual(Fleet.deliveryProblems("b", after, expected), [])
      assert.isAtLeast(proxy.listening(), 2, "B listens on a fresh connection")

      const exited = yield* Effect.async<number | null>((resume) => {
        b.child.once("exit", (code) => resume(Effect.succeed(code)))
        b.child.kill("SIGTERM")
      }).pipe(Effect.timeout("20 seconds"), Effect.option)
      assert.isTrue(exited._tag === "Some", "B stops within 20 s of SIGTERM")
    }), 120_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
