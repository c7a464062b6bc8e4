/**
 * A write whose COMMIT fails: refused by the server (nothing written) or cut off with its
 * connection (outcome unknown) answer differently.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import pg from "pg"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })

const admin = <A>(url: string, f: (client: pg.Client) => Promise<A>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return await f(client)
    } finally {
      await client.end()
    }
  })

describe.skipIf(Pg.serverUrl === null)("a failed COMMIT (PostgreSQL)", () => {
  it.scopedLive("a connection cut during COMMIT answers CommitUnknown; a COMMIT the server refused answers StoreUnavailable", () =>
    Effect.gen(function*() {
      const url = yield* Pg.freshDatabase
      const layer = Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerFleet({ pollMs: 2_000 })), Layer.provideMerge(Pg.layerClient(url)))
      const context = yield* Layer.build(layer)
      yield* SchemaDiffer.apply([Notes]).pipe(Effect.provide(context))
      yield* admin(url, async (c) => {
        await c.query(`CREATE FUNCTION fw_commit_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.text = 'stall' THEN PERFORM pg_advisory_lock(7); PERFORM pg_advisory_unlock(7); END IF;
          IF NEW.text = 'refuse' THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23514'; END IF;
          RETURN NULL; END $$`)
        await c.query(`CREATE CONSTRAINT TRIGGER fw_commit_check AFTER INSERT ON notes DEFERRABLE INITIALLY DEFERRED
          FOR EACH ROW EXECUTE FUNCTION fw_commit_check()`)
      })
      const store = yield* Effect.provide(Store.Store, context)
      const refused = yield* Effect.flip(store.insert(Notes, { id: "r", text: "refuse" }))
      assert.strictEqual(refused._tag, "StoreUnavailable")

      const locker = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => locker.connect())
      yield* Effect.promise(() => locker.query("SELECT pg_advisory_lock(7)"))
      const write = yield* Effect.fork(store.insert(Notes, { id: "s", text: "stall" }))
      // Once the COMMIT waits inside PostgreSQL, its connection is cut.
      yield* admin(url, async (c) => {
        for (let i = 0; i < 500; i++) {
          const { rows } = await c.query(
            `SELECT pg_terminate_backend(pid) AS gone FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`
          )
          if (rows.length > 0) return
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
        throw new Error("the commit never stalled")
      })
      const outcome = yield* Effect.flip(Fiber.join(write))
      yield* Effect.promise(() => locker.end())
      assert.strictEqual(outcome._tag, "CommitUnknown")
    }), 60_000)
})

if (Pg.serverUrl === null) console.warn(Pg.skipReason)
