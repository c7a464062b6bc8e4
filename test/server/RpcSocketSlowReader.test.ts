/**
 * A WebSocket client that sends calls but does not read their answers: what the server holds
 * unsent for it is bounded (`UnsentBound`, by the app's body cap). A client that pipelines calls
 * and reads is slowed to its reading pace and gets every answer; one whose answers keep coming
 * while it reads none is closed with 1008 and a reason, which the server logs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Schema } from "effect"
import WebSocket from "ws"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** Each answer is 16 KiB of text; the app's body cap is 64 KiB. */
const answerBytes = 16 * 1024
const cap = 64 * 1024
/** Far more answers than the loopback's socket buffers hold (64 MiB in all). */
const calls = 4_000

/**
 * The app served (`big.now` answers at once, `big.later` once `gate` opens), one WebSocket to it,
 * and the number of calls started. `ended` is the socket's close, or (when the server kept
 * everything) the arrival of the last of `calls` answers.
 */
const session = Effect.gen(function*() {
  const started = { count: 0 }
  const finished = { count: 0 }
  const gate = yield* Deferred.make<void>()
  const big = () => "x".repeat(answerBytes)
  const app = defineApp({
    http: { maxBodyBytes: cap },
    procedures: [
      query("big.now", {
        input: Schema.Struct({}),
        output: Schema.String,
        handler: () => Effect.sync(() => (started.count++, big()))
      }),
      query("big.later", {
        input: Schema.Struct({}),
        output: Schema.String,
        handler: () => Effect.sync(() => started.count++).pipe(Effect.zipRight(Deferred.await(gate)), Effect.map(big), Effect.ensuring(Effect.sync(() => finished.count++)))
      })
    ]
  })
  const served = yield* Serve.serve(app, memory)
  const socket = yield* Effect.acquireRelease(
    Effect.async<WebSocket, Error>((resume) => {
      const socket = new WebSocket(served.wsUrl)
      socket.on("open", () => resume(Effect.succeed(socket)))
      socket.on("error", (error) => resume(Effect.fail(error)))
    }),
    (socket) => Effect.sync(() => socket.terminate())
  )
  let answers = 0
  const ended = new Promise<{ readonly code: number; readonly reason: string }>((resolve) => {
    socket.on("close", (code, reason) => resolve({ code, reason: reason.toString() }))
    socket.on("message", () => {
      if (++answers === calls) resolve({ code: 0, reason: "every answer arrived" })
    })
  })
  const send = (tag: string) => {
    for (let i = 0; i < calls; i++) socket.send(JSON.stringify({ _tag: "Request", id: String(i), tag, payload: {}, headers: [] }))
  }
  return { served, socket, started, finished, gate, ended, send, answers: () => answers }
})

const droppedLog = "the client does not read its answers"

describe("rpc over the WebSocket: a client that does not read its answers", () => {
  it.scopedLive("is closed with 1008 and a reason once its unsent answers pass the bound; the server logs why", () =>
    Effect.gen(function*() {
      const { answers, ended, finished, gate, send, served, socket, started } = yield* session
      // The client stops reading from its TCP socket, and sends calls whose answers come later.
      socket.pause()
      send("big.later")
      yield* Effect.async<void>((resume) => {
        const check = () => started.count >= calls ? resume(Effect.void) : setTimeout(check, 10)
        check()
      })
      // Every call answers now: 64 MiB for a client that reads nothing.
      yield* Deferred.succeed(gate, undefined)
      // Every call has answered (or the client was dropped meanwhile).
      yield* Effect.async<void>((resume) => {
        const check = () => finished.count >= calls ? resume(Effect.void) : setTimeout(check, 10)
        check()
      })
      socket.resume()
      const { code, reason } = yield* Effect.promise(() => ended)
      assert.strictEqual(code, 1008)
      assert.include(reason, droppedLog)
      assert.isTrue(served.logs.some((line) => line.startsWith("WARN") && line.includes(droppedLog)))
      assert.isBelow(answers(), calls)
    }), 60_000)

  it.scopedLive("a client that pipelines calls and reads is slowed to its pace, never dropped, and gets every answer", () =>
    Effect.gen(function*() {
      const { ended, send, served } = yield* session
      // Sent at once: answered far faster than the socket sends the answers.
      send("big.now")
      const { code, reason } = yield* Effect.promise(() => ended)
      assert.deepStrictEqual({ code, reason }, { code: 0, reason: "every answer arrived" })
      assert.isFalse(served.logs.some((line) => line.includes(droppedLog)))
    }), 60_000)
})
