/**
 * A replica whose LISTEN connection goes deaf: the connection stays open, the replica's queries on
 * it still reach PostgreSQL, but nothing comes back (a half-dead network middlebox). The replica
 * must notice, listen again on a fresh connection, receive what the others commit, and still
 * close without hanging.
 *
 * Replica B reaches PostgreSQL through a proxy (test/support/DeafProxy.ts) that makes its LISTEN
 * connection deaf; replica A writes directly. B's catch-up poll is set to 10 minutes, so within
 * the test only a working LISTEN can deliver to it.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Queue, Redacted, Schedule, Schema, Scope } from "effect"
import type { ChangeEvent } from "../../src/kernel/changes/ChangeEvent.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as DeafProxy from "../support/DeafProxy.js"
import * as Pg from "../support/Pg.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })

const replica = (url: string, options: ChangeTap.FleetOptions) =>
  Store.layerSql.pipe(
    Layer.provideMerge(ChangeTap.layerFleet(options)),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) }))
  )

/** Replica B in a scope of its own (so its closing can be bounded), with the events it receives. */
const replicaB = (url: string, options: ChangeTap.FleetOptions) =>
  Effect.gen(function*() {
    const bScope = yield* Scope.make()
    const b = yield* Layer.buildWithScope(replica(url, options), bScope)
    const received = yield* Queue.unbounded<ChangeEvent>()
    yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) =>
      tap.subscribe({ name: "b", onEvent: (event) => Queue.offer(received, event) })).pipe(
        Effect.provide(b),
        Scope.extend(bScope)
      )
    return { bScope, received }
  })

describe.skipIf(Pg.serverUrl === null)("a deaf LISTEN connection (PostgreSQL, fleet scope)", () => {
  it.scopedLive("is replaced by a fresh one: changes committed elsewhere arrive again, and the replica still closes", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const proxy = yield* DeafProxy.make(url)
      const a = yield* Layer.build(replica(url, { pollMs: 600_000 }))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      // B is built in a scope of its own, so that its closing can be bounded (and fail the test).
      const { bScope, received } = yield* replicaB(proxy.url, { pollMs: 600_000, listenCheckMs: 300 })
      const storeA = yield* Effect.provide(Store.Store, a)
      const next = Queue.take(received).pipe(
        Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => "no change event reached B within 15 s" })
      )

      yield* storeA.insert(Notes, { id: "before", text: "heard" })
      assert.strictEqual((yield* next).id, "before")

      assert.strictEqual(proxy.deafen(), 1, "B's one LISTEN connection is made deaf")
      yield* storeA.insert(Notes, { id: "deaf1", text: "while deaf" })
      assert.strictEqual((yield* next).id, "deaf1")
      // B listens on a fresh connection (under load its first try may fail; it retries at each check).
      yield* Effect.sync(proxy.listening).pipe(
        Effect.repeat({ until: (n) => n >= 2, schedule: Schedule.spaced("50 millis") }),
        Effect.timeoutFail({ duration: "15 seconds", onTimeout: () => "B did not listen on a fresh connection within 15 s" })
      )
      // Delivery did not come from a single lucky read: the fresh connection keeps hearing.
      yield* storeA.insert(Notes, { id: "deaf2", text: "after" })
      assert.strictEqual((yield* next).id, "deaf2")

      // Closing B does not wait for an answer that never comes (UNLISTEN on the deaf connection).
      const closed = yield* Scope.close(bScope, Exit.void).pipe(Effect.timeout("20 seconds"), Effect.exit)
      assert.isTrue(Exit.isSuccess(closed), "B's scope closes within 20 s")
    }), 90_000)

  it.scopedLive("does not hold up the replica's closing, and the periodic read keeps delivering meanwhile", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const proxy = yield* DeafProxy.make(url)
      const a = yield* Layer.build(replica(url, { pollMs: 600_000 }))
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(a))
      // No heartbeat within the test: the deaf connection is still in place when B closes.
      const { bScope, received } = yield* replicaB(proxy.url, { pollMs: 300, listenCheckMs: 600_000 })
      const storeA = yield* Effect.provide(Store.Store, a)
      assert.strictEqual(proxy.deafen(), 1)
      yield* storeA.insert(Notes, { id: "deaf", text: "read, not heard" })
      const event = yield* Queue.take(received).pipe(Effect.timeout("15 seconds"))
      assert.strictEqual(event.id, "deaf")

      const closed = yield* Scope.close(bScope, Exit.void).pipe(Effect.timeout("20 seconds"), Effect.exit)
      assert.isTrue(Exit.isSuccess(closed), "B's scope closes within 20 s")
    }), 90_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
