/**
 * Idempotency across real replicas: a key whose handler is running on one replica is answered 409
 * everywhere for as long as its owner lives (its lease is renewed, however long the handler takes),
 * and once the owner is killed -9 the lease lapses and a retry runs the handler on another replica,
 * once; later retries get that answer replayed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { RowHistory } from "../../src/history/index.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Pg from "../support/Pg.js"
import { JobGates, JobRuns, Jobs } from "./app.js"
import * as Fleet from "./support.js"

/** The harness's lease: short, so the test waits little for a dead owner's claim to lapse. */
const leaseMs = 1_500

/** The answer to a job request, or Left when none came (the replica died). */
const postJob = (url: string, key: string, id: string) =>
  Effect.tryPromise(async () => {
    const response = await fetch(`${url}/jobs`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key, authorization: "Bearer fleet" },
      body: JSON.stringify({ id })
    })
    return { status: response.status, replayed: response.headers.get("idempotency-replayed"), body: await response.text() }
  }).pipe(Effect.timeout("10 seconds"), Effect.either)

const runsOf = (url: string, job: string) =>
  Fleet.withPg(url, (c) => c.query(`SELECT replica FROM job_runs WHERE job = $1`, [job]).then((r) => r.rows.map((row) => row.replica as string)))

describe.skipIf(Pg.serverUrl === null)("fleet idempotency (real processes)", () => {
  it.scopedLive("a key held by a live replica is 409 everywhere; after kill -9 its lease lapses and another replica runs it once", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      yield* SchemaDiffer.apply([JobRuns, Jobs, JobGates, RowHistory]).pipe(Effect.provide(Pg.layerClient(url)))
      yield* Fleet.withPg(url, (c) => c.query(`INSERT INTO job_gates (id) VALUES ('j1')`))
      const env = { FW_LEASE_MS: String(leaseMs) }
      const [a, b] = yield* Effect.all([Fleet.start("a", url, env), Fleet.start("b", url, env)], { concurrency: "unbounded" })

      // a runs the handler, which waits at the gate.
      const first = yield* Effect.fork(postJob(a.url, "key-1", "j1"))
      assert.deepStrictEqual(yield* Fleet.eventually(runsOf(url, "j1"), (runs) => runs.length > 0), ["a"])

      // For three leases, while a lives, every retry on b (and on a) is 409: the lease is renewed.
      const deadline = Date.now() + 3 * leaseMs
      const whileAlive: Array<number | string> = []
      while (Date.now() < deadline) {
        for (const replica of [a, b]) {
          const answer = yield* postJob(replica.url, "key-1", "j1")
          whileAlive.push(answer._tag === "Right" ? answer.right.status : "no answer")
        }
        yield* Effect.sleep("200 millis")
      }
      assert.isTrue(whileAlive.every((status) => status === 409), `answers while the owner lived: ${whileAlive.join(",")}`)
      assert.deepStrictEqual(yield* runsOf(url, "j1"), ["a"], "never twice while the owner lives")

      // kill -9 a mid-handler; open the gate. b answers 409 until the lease lapses, then runs it.
      yield* Fleet.kill(a)
      yield* Fiber.join(first)
      yield* Fleet.withPg(url, (c) => c.query(`DELETE FROM job_gates`))
      const ran = yield* Fleet.eventually(postJob(b.url, "key-1", "j1"), (answer) => answer._tag === "Right" && answer.right.status !== 409)
      assert.isTrue(ran._tag === "Right" && ran.right.status === 200, `b's answer after the lease lapsed: ${JSON.stringify(ran)}`)
      assert.deepStrictEqual(yield* runsOf(url, "j1"), ["a", "b"], "ran again once, on b")

      // Every later retry, on any replica, is the replay.
      const c = yield* Fleet.start("c", url, env)
      for (const replica of [b, c]) {
        const again = yield* postJob(replica.url, "key-1", "j1")
        assert.isTrue(again._tag === "Right" && again.right.status === 200 && again.right.replayed === "true", replica.name)
        if (again._tag === "Right" && ran._tag === "Right") assert.strictEqual(again.right.body, ran.right.body)
      }
      assert.deepStrictEqual(yield* runsOf(url, "j1"), ["a", "b"])
      const jobs = yield* Fleet.withPg(url, (pg) => pg.query(`SELECT id, replica FROM jobs`).then((r) => r.rows))
      assert.deepStrictEqual(jobs, [{ id: "j1", replica: "b" }])
    }), { timeout: 120_000 })
})
