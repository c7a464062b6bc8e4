import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { request as httpRequest } from "node:http"
import { connect } from "node:net"
import { defineApp } from "../../src/app/App.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Serve from "../support/Serve.js"
import { bearer, makeApp } from "./fixtures.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const MiB = 1024 * 1024

/**
 * Uploads `totalBytes` in 1 MiB chunks (chunked transfer unless `contentLength`), generated as it
 * goes (never held whole), stopping as soon as an answer arrives. Resolves with the status, the
 * `Connection` header and how much was written.
 */
const upload = (
  url: string,
  totalBytes: number,
  options: { readonly contentLength?: boolean; readonly headers?: Record<string, string>; readonly method?: string } = {}
) =>
  Effect.promise(() =>
    new Promise<{ status: number; connection: string | undefined; sentBytes: number; body: string }>((resolve) => {
      const target = new URL(url)
      const chunk = Buffer.alloc(Math.min(MiB, totalBytes), 0x20)
      let sent = 0
      let answered = false
      const headers: Record<string, string> = { "content-type": "application/json", ...options.headers }
      if (options.contentLength) headers["content-length"] = String(totalBytes)
      else headers["transfer-encoding"] = "chunked"
      const req = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, method: options.method ?? "PUT", headers }, (res) => {
        answered = true
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (d: string) => (body += d))
        res.on("end", () => {
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, sentBytes: sent, body })
          req.destroy()
        })
      })
      req.on("error", () => resolve({ status: 0, connection: undefined, sentBytes: sent, body: "" }))
      const pump = () => {
        while (sent < totalBytes && !answered) {
          const size = Math.min(chunk.length, totalBytes - sent)
          sent += size
          if (!req.write(size === chunk.length ? chunk : chunk.subarray(0, size))) return void req.once("drain", pump)
        }
        if (sent >= totalBytes) req.end()
      }
      pump()
    })
  )

/** A JSON array of strings of about `bytes` bytes. */
const arrayBody = (bytes: number) => JSON.stringify(Array.from({ length: Math.ceil(bytes / 12) }, () => "abcdefghij"))

const sink = defineRestRoute({
  method: "PUT",
  path: "/sink",
  handler: () => Effect.succeed({ ok: true })
})
const roomy = defineRestRoute({
  method: "PUT",
  path: "/roomy",
  maxBodyBytes: 2 * MiB,
  handler: () => Effect.succeed({ ok: true })
})

/** Sends a POST with its body in pieces, each after a pause, on a raw socket; resolves with the raw answer. */
const postInPieces = (url: string, pieces: ReadonlyArray<string>) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const target = new URL(url)
      const length = Buffer.byteLength(pieces.join(""))
      const socket = connect(Number(target.port), target.hostname)
      let answer = ""
      socket.setEncoding("utf8")
      socket.on("data", (data: string) => {
        answer += data
        if (/\r\n\r\n[\s\S]*\]$/.test(answer)) {
          socket.end()
          resolve(answer)
        }
      })
      socket.on("error", reject)
      socket.write(`POST ${target.pathname} HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`)
      pieces.forEach((piece, i) => setTimeout(() => socket.write(piece), 30 * (i + 1)))
    })
  )

describe("body caps", () => {
  it.scopedLive("a POST /rpc body that arrives after its headers, in pieces, is read whole", () =>
    Effect.gen(function*() {
      const { rpcUrl } = yield* Serve.serve(makeApp({}), memory)
      const message = JSON.stringify({ _tag: "Request", id: "late", tag: "no.such", payload: {}, headers: [] })
      const answer = yield* postInPieces(rpcUrl, [message.slice(0, 10), message.slice(10)])
      assert.match(answer, /^HTTP\/1\.1 200/)
      assert.include(answer, `"requestId":"late"`)
      assert.include(answer, "ProcedureNotFound")
    }))


  it.scopedLive("Content-Length over the cap is 413 before reading, with Connection: close", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(makeApp({ maxBodyBytes: 64 * 1024 }), memory)
      const result = yield* upload(`${url}/echo`, 32 * MiB, { contentLength: true, method: "POST" })
      assert.strictEqual(result.status, 413)
      assert.strictEqual(result.connection, "close")
      assert.deepStrictEqual(JSON.parse(result.body), {
        _tag: "PayloadTooLarge",
        message: "request body exceeds the limit of 65536 bytes",
        limit: 65536
      })
    }))

  it.scopedLive("a chunked body is cut at the cap: 413 with Connection: close", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(makeApp({ maxBodyBytes: 64 * 1024 }), memory)
      const result = yield* upload(`${url}/echo`, 32 * MiB, { method: "POST" })
      assert.strictEqual(result.status, 413)
      assert.strictEqual(result.connection, "close")
      assert.isBelow(result.sentBytes, 32 * MiB)
    }))

  it.scopedLive("routes sharing a path share one read and the widest cap of the group", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(makeApp(), memory)
      // POST /v2/notes declares 256 bytes, PUT /v2/notes 4 KiB: the group reads up to 4 KiB.
      const body = JSON.stringify({ text: "x".repeat(1000), rank: 1 })
      const post = yield* Effect.promise(() =>
        fetch(`${url}/v2/notes`, { method: "POST", headers: { "content-type": "application/json", ...bearer("tok-alice") }, body })
      )
      assert.strictEqual(post.status, 200)
      const tooBig = yield* Effect.promise(() =>
        fetch(`${url}/v2/notes`, { method: "PUT", headers: { "content-type": "application/json" }, body: arrayBody(5000) })
      )
      assert.strictEqual(tooBig.status, 413)
      assert.strictEqual((yield* Effect.promise(() => tooBig.json())).limit, 4096)
    }))

  it.scopedLive("the app-wide cap, FW_MAX_BODY_BYTES over it, and a per-route cap over both", () =>
    Effect.gen(function*() {
      const app = defineApp({ name: "caps", restRoutes: [sink, roomy], http: { maxBodyBytes: 1000 } })
      const { url } = yield* Serve.serve(app, memory)
      const put = (path: string, bytes: number) =>
        Effect.promise(() =>
          fetch(`${url}${path}`, { method: "PUT", headers: { "content-type": "application/json" }, body: arrayBody(bytes) })
        ).pipe(Effect.map((r) => r.status))
      assert.strictEqual(yield* put("/sink", 900), 200)
      assert.strictEqual(yield* put("/sink", 1200), 413)
      assert.strictEqual(yield* put("/roomy", MiB), 200)
      process.env.FW_MAX_BODY_BYTES = "4000"
      const overridden = yield* Serve.serve(app, memory).pipe(Effect.ensuring(Effect.sync(() => delete process.env.FW_MAX_BODY_BYTES)))
      const status = yield* Effect.promise(() =>
        fetch(`${overridden.url}/sink`, { method: "PUT", headers: { "content-type": "application/json" }, body: arrayBody(3000) })
      )
      assert.strictEqual(status.status, 200)
    }))

  it.scopedLive("a 1 GiB chunked upload against the 8 MiB default: 413, and the server does not buffer it", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(defineApp({ name: "sink", restRoutes: [sink] }), memory)
      global.gc?.()
      const before = process.memoryUsage()
      const result = yield* upload(`${url}/sink`, 1024 * MiB)
      const after = process.memoryUsage()
      assert.strictEqual(result.status, 413, JSON.stringify({ ...result, body: result.body.slice(0, 200) }))
      assert.strictEqual(result.connection, "close")
      assert.isBelow(result.sentBytes, 1024 * MiB, "the server answered before the upload ended")
      const grewMiB = (after.rss - before.rss) / MiB
      const heapMiB = (after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers) / MiB
      console.log(`1 GiB upload: client wrote ${(result.sentBytes / MiB).toFixed(0)} MiB; rss +${grewMiB.toFixed(1)} MiB, heap+buffers +${heapMiB.toFixed(1)} MiB`)
      assert.isBelow(grewMiB, 48, `server memory grew by ${grewMiB.toFixed(1)} MiB`)
    }))
})
