import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Schema } from "effect"
import WebSocket from "ws"
import { defineApp } from "../../src/app/App.js"
import { requireScope } from "../../src/app/Guard.js"
import { query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { subjects, tokenStrategy, whoAmI } from "../app/fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** A call that waits for the test to release it, and records whether it was interrupted. */
const makeApp = (release: Deferred.Deferred<void>, interrupted: Deferred.Deferred<void>) =>
  defineApp({
    auth: [tokenStrategy],
    procedures: [
      whoAmI,
      query("slow.wait", {
        input: Schema.Struct({ answer: Schema.String }),
        output: Schema.String,
        handler: ({ answer }) =>
          Deferred.await(release).pipe(
            Effect.as(answer),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          )
      }),
      query("fast.echo", {
        input: Schema.Struct({ answer: Schema.String }),
        output: Schema.String,
        guards: [requireScope("notes:write")],
        handler: ({ answer }) => Effect.succeed(answer)
      })
    ]
  })

const request = (id: string, tag: string, payload: unknown, headers: ReadonlyArray<[string, string]> = []) =>
  JSON.stringify({ _tag: "Request", id, tag, payload, headers })

/** A WebSocket to `url` (with `headers` on the upgrade): send frames, and take the answers as they come. */
const connect = (url: string, headers: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.async<{ readonly socket: WebSocket; readonly answers: Array<Record<string, unknown>>; readonly closed: Promise<void> }, Error>((resume) => {
      const socket = new WebSocket(url, { headers })
      const answers: Array<Record<string, unknown>> = []
      const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
      socket.on("message", (data) => answers.push(JSON.parse(data.toString()) as Record<string, unknown>))
      socket.on("open", () => resume(Effect.succeed({ socket, answers, closed })))
      socket.on("error", (error) => resume(Effect.fail(error)))
    }),
    ({ socket }) => Effect.sync(() => socket.terminate())
  )

/** Waits (polling the event loop) until `count` answers arrived. */
const answersOf = (answers: ReadonlyArray<Record<string, unknown>>, count: number) =>
  Effect.async<ReadonlyArray<Record<string, unknown>>>((resume) => {
    const check = () => answers.length >= count ? resume(Effect.succeed(answers.slice())) : setImmediate(check)
    check()
  })

/**
 * The app served, and one WebSocket to it (with `headers` on the upgrade); `release` lets
 * `slow.wait` answer, `interrupted` is done once it was interrupted.
 */
const session = (headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const release = yield* Deferred.make<void>()
    const interrupted = yield* Deferred.make<void>()
    const served = yield* Serve.serve(makeApp(release, interrupted), memory)
    const { answers, socket } = yield* connect(served.wsUrl, headers)
    return { release, interrupted, answers, socket }
  })

describe("rpc over the WebSocket", () => {
  it.scopedLive("an Interrupt of a running call interrupts its handler and is answered as an interrupted Exit", () =>
    Effect.gen(function*() {
      const { interrupted, answers, socket } = yield* session()
      socket.send(request("1", "slow.wait", { answer: "late" }))
      socket.send(JSON.stringify({ _tag: "Interrupt", requestId: "1" }))
      yield* Deferred.await(interrupted)
      const [exit] = yield* answersOf(answers, 1)
      assert.strictEqual(exit!._tag, "Exit")
      assert.strictEqual(exit!.requestId, "1")
      // The rpc server's encoding of an interrupted handler: a cause made only of interrupts (by the client).
      const failure = exit!.exit as { readonly _tag: string; readonly cause: unknown }
      assert.strictEqual(failure._tag, "Failure")
      const tags = JSON.stringify(failure.cause).match(/"_tag":"\w+"/g) ?? []
      assert.includeMembers(tags, ['"_tag":"Interrupt"'])
      assert.isTrue(tags.every((tag) => ['"_tag":"Interrupt"', '"_tag":"Sequential"', '"_tag":"Empty"', '"_tag":"Runtime"'].includes(tag)))
      assert.include(JSON.stringify(failure.cause), '"id":-499')
    }))

  it.scopedLive("closing the socket interrupts the calls still running on it", () =>
    Effect.gen(function*() {
      const { interrupted, answers, socket } = yield* session()
      socket.send(request("1", "slow.wait", { answer: "late" }))
      // The call has started once a later call on the same socket is answered.
      socket.send(request("2", "auth.whoAmI", {}))
      yield* answersOf(answers, 1)
      socket.terminate()
      yield* Deferred.await(interrupted)
    }))

  it.scopedLive("a request reusing the id of a running call starts when that call is done", () =>
    Effect.gen(function*() {
      const { release, answers, socket } = yield* session({ authorization: "Bearer tok-alice" })
      socket.send(request("1", "slow.wait", { answer: "first" }))
      socket.send(request("1", "fast.echo", { answer: "second" }))
      socket.send(request("2", "fast.echo", { answer: "other" }))
      const [other] = yield* answersOf(answers, 1)
      assert.deepStrictEqual(other, { _tag: "Exit", requestId: "2", exit: { _tag: "Success", value: "other" } })
      yield* Deferred.succeed(release, undefined)
      const all = yield* answersOf(answers, 3)
      assert.deepStrictEqual(all.slice(1), [
        { _tag: "Exit", requestId: "1", exit: { _tag: "Success", value: "first" } },
        { _tag: "Exit", requestId: "1", exit: { _tag: "Success", value: "second" } }
      ])
    }))

  it.scopedLive("frames are answered in order (a bare null too, the socket kept); message headers override the upgrade's; guards and failures as on POST /rpc", () =>
    Effect.gen(function*() {
      const { answers, socket } = yield* session({ authorization: "Bearer tok-alice" })
      const frames = [
        request("1", "auth.whoAmI", {}),
        request("2", "auth.whoAmI", {}, [["Authorization", "Bearer tok-bob"]]),
        request("3", "fast.echo", { answer: 5 }),
        request("4", "fast.echo", { answer: "x" }, [["authorization", "Bearer tok-carol"]]),
        request("5", "fast.echo", { answer: "y" }, [["authorization", "Bearer tok-bad"]]),
        "[]",
        "null",
        request("6", "nope.missing", {}),
        ...Array.from({ length: 24 }, (_, i) => request(String(10 + i), "fast.echo", { answer: `n${i}` }))
      ]
      socket.send(frames.join(""), { fin: true })
      for (const frame of frames.slice(1)) socket.send(frame)
      socket.send(frames[0]!)
      // The first send was one frame of many messages glued together: not JSON, one Defect.
      const all = yield* answersOf(answers, frames.length + 1)
      const [glued, ...rest] = all
      assert.strictEqual(glued!._tag, "Defect")
      const byId = rest.map((answer) => answer._tag === "Exit" ? String(answer.requestId) : String(answer._tag))
      assert.deepStrictEqual(byId, ["2", "3", "4", "5", "Defect", "Defect", "6", ...Array.from({ length: 24 }, (_, i) => String(10 + i)), "1"])
      const exitOf = (id: string) => rest.find((answer) => answer.requestId === id)!.exit as Record<string, unknown>
      const who = (id: string) => (exitOf(id).value as { readonly id: string; readonly tenantId: string }).id
      assert.strictEqual(who("1"), subjects["tok-alice"]!.id)
      assert.strictEqual(who("2"), subjects["tok-bob"]!.id)
      assert.include(JSON.stringify(exitOf("3")), "InputInvalid")
      assert.include(JSON.stringify(exitOf("4")), "GuardRefused")
      assert.include(JSON.stringify(exitOf("5")), "Unauthenticated")
      assert.include(JSON.stringify(exitOf("6")), "ProcedureNotFound")
      assert.deepStrictEqual(exitOf("33"), { _tag: "Success", value: "n23" })
    }))

  it.scopedLive("requests reusing one id wait for each other: with three, never two of them run at once, and closing the socket interrupts them all", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const hold = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      let running = 0
      let most = 0
      let held = 0
      const begun: Array<string> = []
      const base = makeApp(release, interrupted)
      const app = defineApp({
        auth: [tokenStrategy],
        procedures: [
          ...base.procedures.values(),
          query("slow.hold", {
            input: Schema.Struct({ answer: Schema.String }),
            output: Schema.String,
            handler: ({ answer }) =>
              Effect.suspend(() => {
                running++
                begun.push(answer)
                most = Math.max(most, running)
                return Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(hold))
              }).pipe(
                Effect.as(answer),
                Effect.onInterrupt(() => Effect.sync(() => held++)),
                Effect.ensuring(Effect.sync(() => running--))
              )
          })
        ]
      })
      const served = yield* Serve.serve(app, memory)
      const { answers, socket } = yield* connect(served.wsUrl)
      socket.send(request("1", "slow.wait", { answer: "first" }))
      socket.send(request("1", "slow.hold", { answer: "second" }))
      socket.send(request("1", "slow.hold", { answer: "third" }))
      // Every frame was handled once a later call on the same socket is answered.
      socket.send(request("2", "auth.whoAmI", {}))
      yield* answersOf(answers, 1)
      yield* Deferred.succeed(release, undefined)
      yield* Deferred.await(started)
      yield* answersOf(answers, 2)
      // The rpc server runs one call per id at a time: the third waits for the second.
      assert.strictEqual(most, 1)
      assert.deepStrictEqual(begun, ["second"])
      socket.terminate()
      // Closing the socket interrupts whichever of them is running; none is left running for nobody.
      yield* Effect.async<void>((resume) => {
        const check = () => running === 0 ? resume(Effect.void) : setTimeout(check, 5)
        check()
      }).pipe(Effect.timeout("2 seconds"), Effect.orDie)
      assert.strictEqual(held, 1)
      assert.deepStrictEqual(begun, ["second"])
    }))
})
