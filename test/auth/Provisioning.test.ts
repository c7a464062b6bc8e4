/**
 * The default find-or-provision over the Store, on the memory tier, SQLite and PostgreSQL: the first
 * login creates the user and the organisation, later logins find the user (by the provider's id, or
 * by a verified email), colleagues share the provider's organisation, a user without one gets a
 * tenant of their own, and concurrent first logins meet on one user and one organisation.
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Provisioning from "../../src/auth/Provisioning.js"
import { Organizations, Users } from "../../src/auth/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import * as Pg from "../support/Pg.js"
import { unicodeVariants } from "../support/UnicodeIdentities.js"

const profile = (email: string, organizationId: string | null, externalId = email, emailVerified = true): Provisioning.Profile => ({
  provider: "idp_a",
  externalId,
  email,
  emailVerified,
  firstName: "First",
  lastName: "Last",
  organizationId
})

const sqlTier = (client: Layer.Layer<SqlClient.SqlClient, unknown>) => () =>
  Store.layerSql.pipe(
    Layer.provide(ChangeTap.layerLocal),
    Layer.provide(Layer.effectDiscard(SchemaDiffer.apply([Users, Organizations])).pipe(Layer.provideMerge(client))),
    Layer.orDie
  )

const tiers: Record<string, () => Layer.Layer<Store.Store>> = {
  memory: () => Store.layerMemory.pipe(Layer.provide(ChangeTap.layerLocal)),
  sqlite: sqlTier(SqliteClient.layer({ filename: ":memory:" })),
  ...(Pg.serverUrl === null ? {} : { postgresql: sqlTier(Pg.layerFreshClient) })
}
if (Pg.serverUrl === null) console.warn(Pg.skipReason)

for (const [tier, store] of Object.entries(tiers)) {
  describe(`findOrProvision on ${tier}`, () => {
    it.effect("provisions on first login and finds by email afterwards", () =>
      Effect.gen(function*() {
        const ada = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01"))
        assert.deepStrictEqual([ada.type, ada.metadata.provider, ada.metadata.email], ["user", "idp_a", "ada@acme.test"])
        assert.isString(ada.tenantId)
        assert.deepStrictEqual(yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01")), ada)
        // Found by a verified email even when the provider's ids differ (a re-created account), in any ASCII case.
        assert.deepStrictEqual(yield* Provisioning.findOrProvision(profile("Ada@ACME.test", null, "user_99")), ada)
        const store = yield* Store.Store
        const [users, organizations] = yield* Effect.all([store.count(Users), store.count(Organizations)]).pipe(Subject.asSystem)
        assert.deepStrictEqual([users, organizations], [1, 1])
        const user = yield* store.get(Users, ada.id).pipe(Subject.asSystem)
        assert.strictEqual(user._tag === "Some" && user.value.externalId, "ada@acme.test")
      }).pipe(Effect.provide(store())))

    it.effect("no normalisation merges two provider identities: Unicode spaces and U+FEFF are refused, not stripped", () =>
      Effect.gen(function*() {
        const ada = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01", "user_01"))
        for (const email of unicodeVariants) {
          const refused = yield* Effect.flip(Provisioning.findOrProvision(profile(email.replace("alice@example.test", "ada@acme.test"), null, `other:${email}`)))
          assert.instanceOf(refused, Provisioning.ProvisioningRefused, JSON.stringify(email))
        }
        for (const email of ["ada@acme.test\u200b", "ad\u200da@acme.test", " ada@acme.test", "ada@acme.test\n", "ada@acme.test\ud800", "ada@@acme.test", "@acme.test"]) {
          const refused = yield* Effect.flip(Provisioning.findOrProvision(profile(email, null, `other:${email}`)))
          assert.instanceOf(refused, Provisioning.ProvisioningRefused, JSON.stringify(email))
        }
        // Unicode case folding would map these onto ASCII addresses: they stay distinct users.
        const kelvin = yield* Provisioning.findOrProvision(profile("\u212Aevin@acme.test", null, "user_k1"))
        const kevin = yield* Provisioning.findOrProvision(profile("kevin@acme.test", null, "user_k2"))
        const dotted = yield* Provisioning.findOrProvision(profile("\u0130da@acme.test", null, "user_i1"))
        assert.strictEqual(new Set([ada.id, kelvin.id, kevin.id, dotted.id]).size, 4)
        assert.strictEqual(kelvin.metadata.email, "\u212Aevin@acme.test")
        const store = yield* Store.Store
        assert.strictEqual(yield* store.count(Users).pipe(Subject.asSystem), 4)
      }).pipe(Effect.provide(store())))

    it.effect("colleagues share the provider's organisation; a user without one gets their own tenant", () =>
      Effect.gen(function*() {
        const ada = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01"))
        const grace = yield* Provisioning.findOrProvision(profile("grace@acme.test", "org_01"))
        const solo = yield* Provisioning.findOrProvision(profile("solo@example.test", null))
        const other = yield* Provisioning.findOrProvision(profile("bob@globex.test", "org_02"))
        assert.strictEqual(grace.tenantId, ada.tenantId)
        assert.notStrictEqual(solo.tenantId, ada.tenantId)
        assert.notStrictEqual(other.tenantId, ada.tenantId)
        const store = yield* Store.Store
        assert.strictEqual(yield* store.count(Organizations).pipe(Subject.asSystem), 3)
      }).pipe(Effect.provide(store())))

    it.effect("runs as the system even when called for a tenant-scoped subject", () =>
      Effect.gen(function*() {
        const ada = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01"))
        const elsewhere = Subject.make({ type: "user", id: "someone", tenantId: "another-tenant" })
        const again = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01")).pipe(Subject.actingAs(elsewhere))
        assert.deepStrictEqual(again, ada)
      }).pipe(Effect.provide(store())))

    it.effect("an unverified email that belongs to an existing account is refused; the provider's own id still finds its user", () =>
      Effect.gen(function*() {
        const ada = yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01", "user_01", false))
        const intruder = yield* Effect.flip(Provisioning.findOrProvision(profile("ada@acme.test", "org_evil", "user_66", false)))
        assert.instanceOf(intruder, Provisioning.ProvisioningRefused)
        assert.deepStrictEqual(yield* Provisioning.findOrProvision(profile("ada@acme.test", "org_01", "user_01", false)), ada)
      }).pipe(Effect.provide(store())))

    it.effect("concurrent first logins meet on one user and one organisation", () =>
      Effect.gen(function*() {
        const logins = yield* Effect.all(
          [
            ...Array.from({ length: 4 }, () => profile("ada@acme.test", "org_01", "user_01")),
            ...Array.from({ length: 4 }, () => profile("grace@acme.test", "org_01", "user_02"))
          ].map(Provisioning.findOrProvision),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(new Set(logins.map((subject) => subject.id)).size, 2)
        assert.strictEqual(new Set(logins.map((subject) => subject.tenantId)).size, 1)
        const store = yield* Store.Store
        const [users, organizations] = yield* Effect.all([store.count(Users), store.count(Organizations)]).pipe(Subject.asSystem)
        assert.deepStrictEqual([users, organizations], [2, 1])
      }).pipe(Effect.provide(store())))
  })
}
