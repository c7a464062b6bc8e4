import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, FiberRef, Layer, Logger, Option, Schema } from "effect"
import { defineApp } from "../../src/app/App.js"
import type { Guard } from "../../src/app/Guard.js"
import { query } from "../../src/app/Procedure.js"
import * as Runtime from "../../src/app/Runtime.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Provenance from "../../src/kernel/changes/Provenance.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { subjects, tokenStrategy } from "./fixtures.js"

/** What the guards and the handler saw: the guard's name, the acting subject's id and the provenance's procedure. */
type Seen = Array<string>

const acting = (label: string, seen: Seen) =>
  Effect.flatMap(
    Effect.zip(FiberRef.get(Subject.currentSubject), FiberRef.get(Provenance.current)),
    ([subject, provenance]) =>
      Effect.sync(() => {
        seen.push(`${label}:${Option.match(subject, { onNone: () => "system", onSome: (s) => s.id })}:${provenance.procedure}`)
      })
  )

const makeApp = (seen: Seen) => {
  const effectfulPass: Guard = () => Effect.as(acting("effectful", seen), undefined)
  const syncRefuse: Guard = (ctx) => ctx.headers["x-refuse"] === "yes" ? { status: 409, message: "refused" } : undefined
  const lastEffectful: Guard = () => Effect.as(acting("last", seen), undefined)
  const throws: Guard = () => {
    throw new Error("guard bug")
  }
  // An input with an asynchronous transformation: decoded by the effectful decoder.
  const Slow = Schema.transformOrFail(Schema.String, Schema.String, {
    decode: (s) => Effect.as(Effect.sleep("1 millis"), s.toUpperCase()),
    encode: (s) => Effect.succeed(s)
  })
  return defineApp({
    auth: [tokenStrategy],
    procedures: [
      query("guarded.order", {
        input: Schema.Struct({ n: Schema.Number }),
        output: Schema.Number,
        guards: [() => undefined, effectfulPass, syncRefuse, lastEffectful],
        handler: ({ n }) => Effect.as(acting("handler", seen), n + 1)
      }),
      query("guarded.sync", {
        input: Schema.Struct({ n: Schema.Number }),
        output: Schema.Number,
        guards: [syncRefuse],
        handler: ({ n }) => Effect.as(acting("handler", seen), n * 2)
      }),
      query("guarded.throws", { input: Schema.Struct({}), output: Schema.Number, guards: [throws], handler: () => Effect.succeed(1) }),
      query("input.async", { input: Schema.Struct({ word: Slow }), output: Schema.String, handler: ({ word }) => Effect.succeed(word) })
    ]
  })
}

const withRuntime = <A, E>(seen: Seen, f: (runtime: Runtime.RuntimeShape) => Effect.Effect<A, E>) =>
  Effect.flatMap(Runtime.Runtime, f).pipe(
    Effect.provide(Runtime.layer(makeApp(seen)).pipe(
      Layer.provide(Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))),
      Layer.provide(FetchHttpClient.layer)
    ))
  )

const alice = Headers.fromInput({ authorization: "Bearer tok-alice" })
const refusing = (headers: Headers.Headers) => Headers.set(headers, "x-refuse", "yes")

describe("runtime calls", () => {
  it.live("guards run in order, the effectful ones acting for the caller; the first refusal stops the rest and the handler", () => {
    const seen: Seen = []
    return withRuntime(seen, (runtime) =>
      Effect.gen(function*() {
        const procedure = runtime.app.procedures.get("guarded.order")!
        assert.strictEqual(yield* runtime.call(procedure, { input: { n: 1 }, headers: alice }), 2)
        assert.deepStrictEqual(seen, ["effectful:alice:guarded.order", "last:alice:guarded.order", "handler:alice:guarded.order"])
        seen.length = 0
        const refused = yield* Effect.flip(runtime.call(procedure, { input: { n: 1 }, headers: refusing(alice) }))
        assert.deepStrictEqual({ tag: refused._tag, status: (refused as { status?: number }).status }, { tag: "GuardRefused", status: 409 })
        assert.deepStrictEqual(seen, ["effectful:alice:guarded.order"])
      }))
  })

  it.live("a call acts for its caller, as the system when cross-tenant, and leaves the calling fiber's subject and provenance as they were", () => {
    const seen: Seen = []
    return withRuntime(seen, (runtime) =>
      Effect.gen(function*() {
        const procedure = runtime.app.procedures.get("guarded.sync")!
        const outer = Subject.make({ type: "user", id: "outer", tenantId: "t0", scopes: [] })
        const outerProvenance = { traceId: "outer-trace", subjectId: "outer", procedure: "outer.proc" }
        const inside = Effect.gen(function*() {
          assert.strictEqual(yield* runtime.call(procedure, { input: { n: 2 }, headers: Headers.empty, subject: subjects["tok-bob"]! }), 4)
          assert.strictEqual(yield* runtime.call(procedure, { input: { n: 3 }, headers: Headers.empty, subject: subjects["tok-bob"]!, crossTenant: true }), 6)
          yield* Effect.flip(runtime.call(procedure, { input: { n: 3 }, headers: refusing(Headers.empty), subject: subjects["tok-bob"]! }))
          return [yield* FiberRef.get(Subject.currentSubject), yield* FiberRef.get(Provenance.current)] as const
        }).pipe(Subject.actingAs(outer), Provenance.withProvenance(outerProvenance))
        const [subjectAfter, provenanceAfter] = yield* inside
        assert.deepStrictEqual(seen, ["handler:bob:guarded.sync", "handler:system:guarded.sync"])
        assert.deepStrictEqual(subjectAfter, Option.some(outer))
        assert.deepStrictEqual(provenanceAfter, outerProvenance)
      }))
  })

  it.live("a call on a fiber of its own (ownsFiber) acts for its caller the same, guards and handler alike, on that fiber only", () => {
    const seen: Seen = []
    return withRuntime(seen, (runtime) =>
      Effect.gen(function*() {
        const order = runtime.app.procedures.get("guarded.order")!
        const sync = runtime.app.procedures.get("guarded.sync")!
        const own = <A, E>(effect: Effect.Effect<A, E>) => Effect.flatMap(Effect.fork(effect), Fiber.join)
        assert.strictEqual(yield* own(runtime.call(order, { input: { n: 1 }, headers: alice, ownsFiber: true })), 2)
        assert.strictEqual(yield* own(runtime.call(sync, { input: { n: 3 }, headers: Headers.empty, subject: subjects["tok-bob"]!, crossTenant: true, ownsFiber: true })), 6)
        const refused = yield* Effect.flip(own(runtime.call(sync, { input: { n: 3 }, headers: refusing(alice), ownsFiber: true })))
        assert.strictEqual(refused._tag, "GuardRefused")
        assert.deepStrictEqual(seen, [
          "effectful:alice:guarded.order",
          "last:alice:guarded.order",
          "handler:alice:guarded.order",
          "handler:system:guarded.sync"
        ])
        // The caller's own fiber was never touched.
        assert.deepStrictEqual(yield* FiberRef.get(Subject.currentSubject), Option.none())
      }))
  })

  it.live("a guard that throws is an InternalError (logged), as any defect; an invalid input is InputInvalid; an async input schema decodes", () => {
    const seen: Seen = []
    const logs: Array<string> = []
    return withRuntime(seen, (runtime) =>
      Effect.gen(function*() {
        const throws = yield* Effect.flip(runtime.call(runtime.app.procedures.get("guarded.throws")!, { input: {}, headers: alice }))
        assert.strictEqual(throws._tag, "InternalError")
        assert.isTrue(logs.some((line) => line.includes("guarded.throws")))
        // A caller known at once (a given subject): the guards are checked as the call is made, and a
        // guard that throws is still the call's defect, never an exception out of `call`.
        const given = yield* Effect.flip(Effect.suspend(() =>
          runtime.call(runtime.app.procedures.get("guarded.throws")!, { input: {}, headers: alice, subject: subjects["tok-alice"]! })
        ))
        assert.strictEqual(given._tag, "InternalError")
        const invalid = yield* Effect.flip(runtime.call(runtime.app.procedures.get("guarded.sync")!, { input: { n: "x" }, headers: alice }))
        assert.strictEqual(invalid._tag, "InputInvalid")
        assert.include((invalid as { message: string }).message, "n")
        const word = yield* runtime.call(runtime.app.procedures.get("input.async")!, { input: { word: "hi" }, headers: alice })
        assert.strictEqual(word, "HI")
        const wrong = yield* Effect.flip(runtime.call(runtime.app.procedures.get("input.async")!, { input: { word: 1 }, headers: alice }))
        assert.strictEqual(wrong._tag, "InputInvalid")
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => {
        logs.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
      })))))
  })
})
