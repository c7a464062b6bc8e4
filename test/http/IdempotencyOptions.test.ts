/**
 * Idempotency options, on every store tier: `publicApi.idempotent: false` turns the binding off for
 * that one projection (the others stay deduplicated), and a record lives the default `ttlMs` of
 * 24 hours (spec 2.10, section 8): replayed until then, run again from then on.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema, TestClock } from "effect"
import { defineApp } from "../../src/app/App.js"
import { mutation } from "../../src/app/Procedure.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Pg from "../support/Pg.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"
import { bearer, tokenStrategy } from "./fixtures.js"
import { tiers } from "./tiers.js"

if (!Pg.serverUrl) console.warn(Pg.skipReason)

const Bumps = defineTable("idem_bumps", { fields: { tenantId: Schema.String, label: Schema.String }, tenantField: "tenantId" })

const bumper = (tag: string, publicApi: { readonly idempotent?: boolean }) =>
  mutation(tag, {
    input: Schema.Struct({ label: Schema.String }),
    output: Schema.Struct({ id: Schema.String, total: Schema.Number }),
    publicApi,
    handler: ({ label }, { store, subject }) =>
      Effect.gen(function*() {
        const row = yield* store.insert(Bumps, { tenantId: subject.tenantId ?? "", label })
        return { id: row.id, total: yield* store.count(Bumps, { where: { label } }) }
      })
  })

const app = defineApp({
  name: "idempotency-options",
  tables: [Bumps],
  procedures: [bumper("bumps.keyed", {}), bumper("bumps.unkeyed", { idempotent: false })],
  auth: [tokenStrategy],
  idempotency: true
})

const bump = (url: string, path: string, key: string, label: string) =>
  send(`${url}${path}`, jsonBody("POST", { label }, { ...bearer("tok-alice"), "idempotency-key": key }))

const dayMs = 86_400_000

for (const [name, tier] of tiers) {
  describe.skipIf(tier === null)(`idempotency options: ${name}`, () => {
    it.scopedLive("publicApi.idempotent: false runs every request; the sibling projection replays", () =>
      Effect.gen(function*() {
        const { url } = yield* Serve.serve(app, tier!(), { applySchema: true })
        const keyed = [yield* bump(url, "/v1/bumps/keyed", "same-key", "k"), yield* bump(url, "/v1/bumps/keyed", "same-key", "k")]
        assert.deepStrictEqual(keyed.map((answer) => answer.status), [200, 200])
        assert.strictEqual(keyed[1]!.headers.get("idempotency-replayed"), "true")
        assert.strictEqual(keyed[1]!.text, keyed[0]!.text)
        const unkeyed = [yield* bump(url, "/v1/bumps/unkeyed", "same-key", "u"), yield* bump(url, "/v1/bumps/unkeyed", "same-key", "u")]
        assert.deepStrictEqual(unkeyed.map((answer) => answer.status), [200, 200])
        assert.isNull(unkeyed[1]!.headers.get("idempotency-replayed"))
        assert.deepStrictEqual(unkeyed.map((answer) => (answer.json() as { total: number }).total), [1, 2])
      }))

    it.scoped("a record lives the default ttlMs of 24 hours", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(Date.UTC(2026, 10, 24, 12))
        const { url } = yield* Serve.serve(app, tier!(), { applySchema: true })
        const first = yield* bump(url, "/v1/bumps/keyed", "day-key", "d")
        assert.strictEqual((first.json() as { total: number }).total, 1)
        yield* TestClock.adjust(dayMs - 1)
        const replayed = yield* bump(url, "/v1/bumps/keyed", "day-key", "d")
        assert.strictEqual(replayed.headers.get("idempotency-replayed"), "true")
        assert.strictEqual(replayed.text, first.text)
        yield* TestClock.adjust(1)
        const rerun = yield* bump(url, "/v1/bumps/keyed", "day-key", "d")
        assert.isNull(rerun.headers.get("idempotency-replayed"))
        assert.strictEqual((rerun.json() as { total: number }).total, 2)
      }))
  })
}
