/**
 * The OpenFeature server provider through the real `@openfeature/server-sdk`: targeting, rollout,
 * variants of every type, schedules at a chosen instant, live overrides and toggles, the reason of
 * each deciding step, errors as OpenFeature codes, the context mapping, and evaluations counted as
 * server-side usage (spec 2.11) on SQLite.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode, OpenFeature } from "@openfeature/server-sdk"
import { Effect, Layer, Schema } from "effect"
import { defineFlag, evaluateVariant, FlagUsage } from "../../src/flags/index.js"
import type { Flag } from "../../src/flags/index.js"
import * as FlagRegistry from "../../src/flags/FlagRegistry.js"
import * as tables from "../../src/flags/tables.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as SchemaDiffer from "../../src/kernel/schema/SchemaDiffer.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { Context, FwServerProvider } from "../../src/openfeature/index.js"

const flags = {
  kill: true,
  beta: { targeting: [{ tenantIds: ["acme"] }], description: "the beta report" },
  half: { rollout: 50 },
  byTenant: { rollout: 50, rolloutBy: "tenant" },
  plans: { targeting: [{ metadata: { plan: "pro" } }] },
  off: { enabled: false },
  window: { schedule: { activateAt: 1_000, deactivateAt: "1970-01-01T00:00:02.000Z" } },
  theme: { variants: [{ name: "blue", value: "#00f" }, { name: "plain", value: "#888", weight: 3 }] },
  limit: { variants: [{ name: "low", value: 10 }, { name: "high", value: 100, weight: 0 }] },
  layout: { targeting: [{ tenantIds: ["acme"] }], variants: [{ name: "grid", value: { columns: 3 } }, { name: "list", value: { columns: 1 } }], offVariant: "list" },
  gated: { enabled: false, variants: [{ name: "a", value: "A" }] }
} satisfies Record<string, Flag>

const Fee = defineFlag({ key: "fee", value: Schema.Struct({ cents: Schema.Number }), default: { cents: 0 }, variants: [{ name: "std", value: { cents: 30 } }] })

let domains = 0
/** A client of a fresh domain bound to a provider over a new registry (the SDK's state is global). */
const clientOf = async (registry: FlagRegistry.FlagRegistryShape, now?: () => number) => {
  const domain = `fw-test-${++domains}`
  await OpenFeature.setProviderAndWait(domain, new FwServerProvider(registry, now === undefined ? {} : { now }))
  return OpenFeature.getClient(domain)
}

const alice = Subject.make({ type: "user", id: "alice", tenantId: "acme", metadata: { plan: "pro" } })
const bob = Subject.make({ type: "user", id: "bob", tenantId: "globex", metadata: { plan: "free" } })

describe("OpenFeature server provider", () => {
  it("targeting: a matching rule is TARGETING_MATCH, no match is DEFAULT; the context maps to the Subject", async () => {
    const client = await clientOf(FlagRegistry.make({ flags }))
    const yes = await client.getBooleanDetails("beta", false, { targetingKey: "alice", tenantId: "acme" })
    assert.deepInclude(yes, { value: true, variant: "on", reason: "TARGETING_MATCH" })
    assert.deepStrictEqual(yes.flagMetadata, { fwStep: "on", description: "the beta report" })
    const no = await client.getBooleanDetails("beta", true, { targetingKey: "bob", tenantId: "globex" })
    assert.deepInclude(no, { value: false, variant: "off", reason: "DEFAULT" })
    assert.strictEqual(no.flagMetadata.fwStep, "notTargeted")
    // Metadata attributes compare strictly, as in fw rules.
    assert.isTrue(await client.getBooleanValue("plans", false, { targetingKey: "carol", plan: "pro" }))
    assert.isFalse(await client.getBooleanValue("plans", false, { targetingKey: "carol", plan: "Pro" }))
    // A kill-switch `true`: nothing restricts, nothing is timed.
    assert.deepInclude(await client.getBooleanDetails("kill", false, {}), { value: true, reason: "STATIC" })
    assert.deepInclude(await client.getBooleanDetails("off", true, { targetingKey: "alice" }), { value: false, reason: "DISABLED" })
  })

  it("rollout: every unit gets fw's answer (SPLIT either way); no targetingKey is no unit (DEFAULT); rolloutBy tenant reads tenantId", async () => {
    const registry = FlagRegistry.make({ flags })
    const client = await clientOf(registry)
    let on = 0
    for (let i = 0; i < 400; i++) {
      const subject = Subject.make({ type: "user", id: `u${i}`, tenantId: `t${i % 7}` })
      const details = await client.getBooleanDetails("half", false, Context.fromSubject(subject))
      assert.strictEqual(details.value, evaluateVariant("half", flags.half, subject, 0)!.enabled)
      assert.strictEqual(details.reason, "SPLIT")
      if (details.value) on++
      assert.strictEqual(
        await client.getBooleanValue("byTenant", false, { targetingKey: `other${i}`, tenantId: subject.tenantId }),
        evaluateVariant("byTenant", flags.byTenant, subject, 0)!.enabled
      )
    }
    assert.isTrue(on > 150 && on < 250, `${on} of 400 on`)
    const anonymous = await client.getBooleanDetails("half", true, {})
    assert.deepInclude(anonymous, { value: false, reason: "DEFAULT" })
    assert.strictEqual(anonymous.flagMetadata.fwStep, "noUnit")
  })

  it("variants: string, number and object values with the variant's name; off serves offVariant, else the default", async () => {
    const client = await clientOf(FlagRegistry.make({ flags, typedFlags: [Fee] }))
    for (const subject of [alice, bob, Subject.make({ type: "user", id: "zed", tenantId: null })]) {
      const context = Context.fromSubject(subject)
      const expected = evaluateVariant("theme", flags.theme, subject, 0)!
      assert.deepInclude(await client.getStringDetails("theme", "", context), { value: expected.value as string, variant: expected.name, reason: "SPLIT" })
    }
    assert.deepInclude(await client.getNumberDetails("limit", 0, { targetingKey: "alice" }), { value: 10, variant: "low", reason: "STATIC" })
    const grid = await client.getObjectDetails("layout", {}, Context.fromSubject(alice))
    assert.deepInclude(grid, { variant: "grid", reason: "TARGETING_MATCH" })
    assert.deepStrictEqual(grid.value, { columns: 3 })
    const list = await client.getObjectDetails("layout", {}, Context.fromSubject(bob))
    assert.deepInclude(list, { variant: "list", reason: "DEFAULT" })
    assert.deepStrictEqual(list.value, { columns: 1 })
    // Boolean reads of a variant flag: on unless it serves its offVariant.
    assert.isTrue(await client.getBooleanValue("layout", false, Context.fromSubject(alice)))
    assert.isFalse(await client.getBooleanValue("layout", true, Context.fromSubject(bob)))
    const gated = await client.getStringDetails("gated", "fallback", { targetingKey: "alice" })
    assert.deepInclude(gated, { value: "fallback", reason: "DISABLED" })
    assert.isUndefined(gated.variant)
    // A typed flag: its declared (encoded) value.
    assert.deepStrictEqual(await client.getObjectValue("fee", {}, { targetingKey: "alice" }), { cents: 30 })
  })

  it("schedule at a chosen instant: DISABLED before activateAt and from deactivateAt, on inside the window", async () => {
    let now = 999
    const client = await clientOf(FlagRegistry.make({ flags }), () => now)
    const read = () => client.getBooleanDetails("window", false, { targetingKey: "alice" })
    assert.deepInclude(await read(), { value: false, reason: "DISABLED", flagMetadata: { fwStep: "notYetActive" } })
    now = 1_000
    assert.deepInclude(await read(), { value: true, reason: "DEFAULT", flagMetadata: { fwStep: "on" } })
    now = 2_000
    assert.deepInclude(await read(), { value: false, reason: "DISABLED", flagMetadata: { fwStep: "expired" } })
  })

  it("live overrides and toggles apply to the next evaluation", async () => {
    const registry = FlagRegistry.make({ flags })
    const client = await clientOf(registry)
    const ops = { type: "user", id: "ops" }
    await Effect.runPromise(registry.override("theme", { variants: [{ name: "red", value: "#f00" }] }, ops))
    assert.deepInclude(await client.getStringDetails("theme", "", { targetingKey: "alice" }), { value: "#f00", variant: "red", reason: "STATIC" })
    await Effect.runPromise(registry.override("beta", { targeting: [] }, ops))
    assert.deepInclude(await client.getBooleanDetails("beta", false, { targetingKey: "bob", tenantId: "globex" }), { value: true, reason: "STATIC" })
    await Effect.runPromise(registry.toggle("beta", ops))
    assert.deepInclude(await client.getBooleanDetails("beta", true, { targetingKey: "bob" }), { value: false, reason: "DISABLED" })
    await Effect.runPromise(registry.clearOverride("theme", ops))
    assert.include(["#00f", "#888"], await client.getStringValue("theme", "", { targetingKey: "alice" }))
  })

  it("errors as OpenFeature codes: FLAG_NOT_FOUND, TYPE_MISMATCH, INVALID_CONTEXT — the caller's default, reason ERROR", async () => {
    const client = await clientOf(FlagRegistry.make({ flags }))
    assert.deepInclude(await client.getBooleanDetails("nope", true, {}), { value: true, reason: "ERROR", errorCode: ErrorCode.FLAG_NOT_FOUND })
    assert.deepInclude(await client.getStringDetails("beta", "d", { targetingKey: "alice" }), { value: "d", reason: "ERROR", errorCode: ErrorCode.TYPE_MISMATCH })
    assert.deepInclude(await client.getNumberDetails("theme", 7, { targetingKey: "alice" }), { value: 7, reason: "ERROR", errorCode: ErrorCode.TYPE_MISMATCH })
    assert.deepInclude(await client.getObjectDetails("limit", { a: 1 }, { targetingKey: "alice" }), { reason: "ERROR", errorCode: ErrorCode.TYPE_MISMATCH })
    const invalid = await client.getBooleanDetails("beta", false, { targetingKey: "alice", tenantId: 42 })
    assert.deepInclude(invalid, { value: false, reason: "ERROR", errorCode: ErrorCode.INVALID_CONTEXT })
    assert.include(invalid.errorMessage ?? "", "tenantId must be a string or null")
  })

  it("Context.fromSubject inverts subjectOf; metadata cannot replace a reserved attribute", () => {
    const subject = Subject.make({ type: "service", id: "svc-1", tenantId: "acme", metadata: { plan: "pro", tenantId: "evil", n: 50 } })
    const context = Context.fromSubject(subject)
    assert.deepStrictEqual(context, { plan: "pro", n: 50, targetingKey: "svc-1", subjectType: "service", tenantId: "acme" })
    assert.deepStrictEqual(Context.subjectOf(context), { ...subject, metadata: { plan: "pro", n: 50 } })
    assert.deepStrictEqual(Context.subjectOf(Context.fromSubject(Subject.anonymous)), Subject.anonymous)
  })

  it.scoped("evaluations count as server-side usage (source openfeature); unknown keys and refused reads do not", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const registry = FlagRegistry.make({ flags, store: "sql" })
      yield* registry.attach(store)
      const client = yield* Effect.promise(() => clientOf(registry, () => 86_400_000 + 5))
      yield* Effect.promise(async () => {
        await client.getBooleanValue("beta", false, { targetingKey: "alice", tenantId: "acme" })
        await client.getBooleanValue("beta", false, { targetingKey: "bob" })
        await client.getStringValue("theme", "", { targetingKey: "alice" })
        await client.getBooleanValue("nope", false, {})
        await client.getStringValue("beta", "", { targetingKey: "alice" })
      })
      yield* registry.flushUsage
      const rows = yield* store.find(FlagUsage, { orderBy: "flag" })
      assert.deepStrictEqual(rows.map((row) => [row.flag, row.day, row.source, row.count, row.lastSeenAt]), [
        ["beta", "1970-01-02", "openfeature", 2, 86_400_005],
        ["theme", "1970-01-02", "openfeature", 1, 86_400_005]
      ])
    }).pipe(Effect.provide(
      Store.layerSql.pipe(
        Layer.provideMerge(ChangeTap.layerLocal),
        Layer.provide(Layer.effectDiscard(SchemaDiffer.apply(tables.all)).pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))),
        Layer.orDie
      )
    )))
})
