/**
 * Inline change listeners (handled on the writer's fiber before the write returns): run as the
 * system, in order across the changes of one transaction, and a listener that throws while
 * building its handling fails neither the write nor the listener's later changes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, FiberRef, Layer, Option, Schema, Scope } from "effect"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const Notes = defineTable("notes", { fields: { text: Schema.String } })

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

const subscribe = (listener: ChangeTap.Listener) => Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.subscribe(listener))

const alice = Subject.make({ type: "user", id: "alice", tenantId: null })

describe("ChangeTap inline listeners", () => {
  it.scoped("are handled before the write returns, in order, as the system; a listener with nothing to run sees every change", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const seen: Array<string> = []
      const counted: Array<string> = []
      // Handles only the odd-numbered notes with an effect; counts every note synchronously.
      yield* subscribe({
        name: "effects",
        inline: true,
        onEvent: (event) => {
          const text = (event.after?.["text"] ?? "") as string
          return Number(text.slice(1)) % 2 === 1
            ? Effect.flatMap(FiberRef.get(Subject.currentSubject), (subject) =>
              Effect.sync(() => void seen.push(`${text}:${Option.isNone(subject) ? "system" : "user"}`)))
            : Effect.void
        }
      })
      yield* subscribe({
        name: "counter",
        inline: true,
        onEvent: (event) => {
          counted.push(`${event.after?.["text"]}:${seen.length}`)
          return Effect.void
        }
      })
      yield* Subject.actingAs(alice)(Effect.gen(function*() {
        yield* store.insert(Notes, { text: "n0" })
        assert.deepStrictEqual(counted, ["n0:0"])
        yield* store.transaction(Effect.gen(function*() {
          yield* store.insert(Notes, { text: "n1" })
          yield* store.insert(Notes, { text: "n2" })
          yield* store.insert(Notes, { text: "n3" })
        }))
        // The writer is still alice after the listeners ran.
        assert.isTrue(Option.isSome(yield* FiberRef.get(Subject.currentSubject)))
      }))
      assert.deepStrictEqual(seen, ["n1:system", "n3:system"])
      // Each change reached the second listener after the first listener's handling of it ran.
      assert.deepStrictEqual(counted, ["n0:0", "n1:1", "n2:1", "n3:2"])
    }).pipe(Effect.provide(memory)))

  it.scoped("a batch goes to the listeners there were when its turn came, whoever subscribes or leaves while it is handled", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const tap = yield* ChangeTap.ChangeTap
      const leaving = yield* Scope.make()
      const joining = yield* Scope.make()
      const seen: Array<string> = []
      const record = (name: string): ChangeTap.Listener => ({
        name,
        inline: true,
        onEvent: (event) => {
          seen.push(`${name}:${event.after?.["text"]}`)
          return Effect.void
        }
      })
      // Handling n1 (an effect: other fibers may run) removes "leaving" and adds "joining".
      yield* subscribe({
        name: "mover",
        inline: true,
        onEvent: (event) =>
          event.after?.["text"] === "n1"
            ? Effect.zipRight(Scope.close(leaving, Exit.void), Scope.extend(tap.subscribe(record("joining")), joining))
            : Effect.void
      })
      yield* Scope.extend(subscribe(record("leaving")), leaving)
      yield* store.transaction(Effect.gen(function*() {
        yield* store.insert(Notes, { text: "n1" })
        yield* store.insert(Notes, { text: "n2" })
      }))
      yield* store.insert(Notes, { text: "n3" })
      assert.deepStrictEqual(seen, ["leaving:n1", "leaving:n2", "joining:n3"])
      yield* Scope.close(joining, Exit.void)
    }).pipe(Effect.provide(memory)))

  it.scoped("a listener that throws while building its handling fails neither the write nor its later changes", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const handled: Array<string> = []
      yield* subscribe({
        name: "brittle",
        inline: true,
        onEvent: (event) => {
          if (event.after?.["text"] === "poison") throw new Error("the listener threw")
          handled.push(event.after?.["text"] as string)
          return Effect.void
        }
      })
      yield* store.insert(Notes, { text: "a" })
      const poison = yield* store.insert(Notes, { text: "poison" })
      yield* store.insert(Notes, { text: "b" })
      assert.isTrue(Option.isSome(yield* store.get(Notes, poison.id)))
      assert.deepStrictEqual(handled, ["a", "b"])
    }).pipe(Effect.provide(memory)))
})
