import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Schema } from "effect"
import { connect } from "node:net"
import WebSocket from "ws"
import { defineApp } from "../../src/app/App.js"
import { query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

// An output whose encoding is asynchronous (encoded by the effectful encoder), and one that fails its schema.
const Later = Schema.transformOrFail(Schema.String, Schema.String, {
  decode: (s) => Effect.succeed(s),
  encode: (s) => Effect.as(Effect.sleep("1 millis"), `encoded:${s}`)
})
const app = defineApp({
  procedures: [
    query("out.later", { input: Schema.Struct({}), output: Later, handler: () => Effect.succeed("x") }),
    query("out.wrong", {
      input: Schema.Struct({}),
      output: Schema.Number,
      handler: () => Effect.succeed("not a number" as unknown as number)
    }),
    query("out.wrongAfterLog", {
      input: Schema.Struct({}),
      output: Schema.Number,
      // Logs under its call's trace id (as the call's span and its changes' provenance carry it).
      handler: (_, ctx) =>
        Effect.as(Effect.annotateLogs(Effect.logInfo("the handler ran"), { traceId: ctx.traceId }), "not a number" as unknown as number)
    }),
    query("out.payload", {
      input: Schema.UndefinedOr(Schema.Struct({ a: Schema.Number })),
      output: Schema.String,
      handler: (input) => Effect.succeed(input === undefined ? "none" : `a=${input.a}`)
    })
  ]
})

/** A query that waits for the test to release it, and records that it started and whether it was interrupted. */
const waitingApp = (started: Deferred.Deferred<void>, release: Deferred.Deferred<void>, interrupted: Deferred.Deferred<void>) =>
  defineApp({
    procedures: [
      query("slow.wait", {
        input: Schema.Struct({ answer: Schema.String }),
        output: Schema.String,
        handler: ({ answer }) =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Deferred.await(release)),
            Effect.as(answer),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          )
      })
    ]
  })

const post = (url: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    return { status: response.status, body: await response.json() as ReadonlyArray<Record<string, unknown>> }
  })

const overSocket = (url: string, frames: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<Record<string, unknown>>, Error>((resume) => {
    const socket = new WebSocket(url)
    const answers: Array<Record<string, unknown>> = []
    socket.on("open", () => frames.forEach((frame) => socket.send(JSON.stringify(frame))))
    socket.on("message", (data) => {
      answers.push(JSON.parse(data.toString()) as Record<string, unknown>)
      if (answers.length === frames.length) {
        socket.close()
        resume(Effect.succeed(answers))
      }
    })
    socket.on("error", (error) => resume(Effect.fail(error)))
    return Effect.sync(() => socket.terminate())
  })

const call = (id: string, tag: string, extra: Record<string, unknown> = { payload: {} }) => ({ _tag: "Request", id, tag, headers: [], ...extra })

describe("rpc answers", () => {
  it.scopedLive("POST /rpc: an async output encoding, an output failing its schema, a message without payload or with extra fields", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const { body, status } = yield* post(served.rpcUrl, [
        call("1", "out.later"),
        call("2", "out.wrong"),
        call("3", "out.payload", { extra: true }),
        call("4", "out.payload", { payload: { a: 1 }, headers: undefined })
      ])
      assert.strictEqual(status, 200)
      assert.deepStrictEqual(body, [
        { _tag: "Exit", requestId: "1", exit: { _tag: "Success", value: "encoded:x" } },
        { _tag: "Exit", requestId: "2", exit: { _tag: "Failure", cause: { _tag: "Die", defect: "the output failed its schema" } } },
        { _tag: "Exit", requestId: "3", exit: { _tag: "Success", value: "none" } },
        { _tag: "Exit", requestId: "4", exit: { _tag: "Success", value: "a=1" } }
      ])
    }))

  it.scopedLive("POST /rpc: a JSON answer whose Content-Length counts bytes, not characters (a multi-byte payload)", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const answer = yield* Effect.promise(async () => {
        const response = await fetch(served.rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(call("1", "out.payload", { payload: { a: 1 }, id: "é☃😀" }))
        })
        const bytes = new Uint8Array(await response.arrayBuffer())
        return { status: response.status, type: response.headers.get("content-type"), length: response.headers.get("content-length"), bytes }
      })
      assert.strictEqual(answer.status, 200)
      assert.strictEqual(answer.type, "application/json")
      assert.strictEqual(answer.length, String(answer.bytes.byteLength))
      assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(answer.bytes)), [
        { _tag: "Exit", requestId: "é☃😀", exit: { _tag: "Success", value: "a=1" } }
      ])
    }))

  it.scopedLive("WebSocket: an output failing its schema is answered as POST /rpc answers it; the detail is logged with the trace id, not sent", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const traced = (id: string, traceId: string) => call(id, "out.wrong", { payload: {}, headers: [["x-fw-trace-id", traceId]] })
      const answers = yield* overSocket(served.wsUrl, [call("1", "out.later"), traced("2", "trace-over-socket")])
      const byId = new Map(answers.map((answer) => [answer.requestId, answer.exit]))
      assert.deepStrictEqual(byId.get("1"), { _tag: "Success", value: "encoded:x" })
      assert.deepStrictEqual(byId.get("2"), { _tag: "Failure", cause: { _tag: "Die", defect: "the output failed its schema" } })
      const { body } = yield* post(served.rpcUrl, traced("3", "trace-over-post"))
      assert.deepStrictEqual(body, [{ _tag: "Exit", requestId: "3", exit: byId.get("2") }])
      // Each is logged once, under its call's trace id, with what the schema refused.
      const logged = served.logs.flatMap((line, i) => line.includes("out.wrong") ? [{ line, traceId: served.logTraceIds[i] }] : [])
      assert.deepStrictEqual(logged.map((entry) => entry.traceId), ["trace-over-socket", "trace-over-post"])
      for (const { line } of logged) {
        assert.match(line, /^ERROR procedure "out\.wrong": the handler's output does not match its schema .*Expected number/)
      }
    }))

  it.scopedLive("without a trace id from the client, an output failing its schema is logged under the trace id the handler had", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      yield* overSocket(served.wsUrl, [call("1", "out.wrongAfterLog")])
      yield* post(served.rpcUrl, call("2", "out.wrongAfterLog"))
      const traceIdsOf = (text: string) => served.logs.flatMap((line, i) => line.includes(text) ? [served.logTraceIds[i]] : [])
      const handler = traceIdsOf("the handler ran")
      assert.strictEqual(handler.length, 2)
      assert.notStrictEqual(handler[0], handler[1])
      assert.deepStrictEqual(traceIdsOf("out.wrongAfterLog"), handler)
    }))

  it.scopedLive("both transports answer the same calls alike: a success, an async encoding, an output failing its schema, an invalid input", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const calls = [
        call("1", "out.payload", { payload: { a: 1 } }),
        call("2", "out.later"),
        call("3", "out.wrong"),
        call("4", "out.payload", { payload: { a: "not a number" } })
      ]
      const overPost = (yield* post(served.rpcUrl, calls)).body
      const overWs = yield* overSocket(served.wsUrl, calls)
      const byId = (answers: ReadonlyArray<Record<string, unknown>>) =>
        [...answers].sort((a, b) => String(a.requestId).localeCompare(String(b.requestId)))
      assert.deepStrictEqual(byId(overWs), byId(overPost))
      assert.deepStrictEqual(byId(overPost).map((answer) => (answer.exit as { _tag: string })._tag), ["Success", "Success", "Failure", "Failure"])
    }))

  it.scopedLive("POST /rpc: a call that waits is answered when it completes; a client gone meanwhile interrupts its handler", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const served = yield* Serve.serve(waitingApp(started, release, interrupted), memory)
      // Answered once released.
      const answered = yield* Effect.fork(post(served.rpcUrl, call("1", "slow.wait", { payload: { answer: "late" } })))
      yield* Deferred.await(started)
      yield* Deferred.succeed(release, undefined)
      const answer = yield* answered.await
      assert.deepStrictEqual(answer._tag === "Success" ? answer.value : answer, {
        status: 200,
        body: [{ _tag: "Exit", requestId: "1", exit: { _tag: "Success", value: "late" } }]
      })
      // A second app instance whose call never completes: the client goes away, the handler is interrupted.
      const started2 = yield* Deferred.make<void>()
      const never = yield* Deferred.make<void>()
      const served2 = yield* Serve.serve(waitingApp(started2, never, interrupted), memory)
      const controller = new AbortController()
      const pending = fetch(served2.rpcUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(call("2", "slow.wait", { payload: { answer: "never" } })),
        signal: controller.signal
      }).catch(() => "aborted")
      yield* Deferred.await(started2)
      controller.abort()
      assert.strictEqual(yield* Effect.promise(() => pending), "aborted")
      yield* Deferred.await(interrupted).pipe(Effect.timeout("5 seconds"))
    }))

  it.scopedLive("POST /rpc: a client that goes away in the middle of its body leaves the server serving", () =>
    Effect.gen(function*() {
      const served = yield* Serve.serve(app, memory)
      const target = new URL(served.rpcUrl)
      yield* Effect.async<void>((resume) => {
        const socket = connect(Number(target.port), target.hostname)
        socket.on("error", () => {})
        socket.on("close", () => resume(Effect.void))
        socket.write(`POST ${target.pathname} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n[{"_tag":`)
        setTimeout(() => socket.destroy(), 50)
      })
      const answer = yield* post(served.rpcUrl, call("3", "out.payload", { payload: { a: 2 } }))
      assert.deepStrictEqual(answer, { status: 200, body: [{ _tag: "Exit", requestId: "3", exit: { _tag: "Success", value: "a=2" } }] })
    }))
})
