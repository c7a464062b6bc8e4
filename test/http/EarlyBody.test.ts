import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createServer, type IncomingMessage } from "node:http"
import { connect } from "node:net"
import * as EarlyBody from "../../src/http/EarlyBody.js"

/** What the route saw: what `take` gave, and how many times it had been called 20 ms later. */
interface Seen {
  readonly collected: EarlyBody.Collected | undefined
  readonly calls: number
}

/**
 * A node:http server whose handler collects each request's body with `EarlyBody.collect` (cap
 * `limit`) and reports what `take` then gives, with how many times `then` was called by then.
 */
const collecting = (limit: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly next: () => Promise<Seen>; readonly close: () => void }>((resume) => {
      const results: Array<Promise<Seen>> = []
      const server = createServer((request: IncomingMessage, response) => {
        results.push(new Promise((resolve) => {
          let calls = 0
          EarlyBody.collect(request, limit, () => {
            calls++
            const collected = EarlyBody.take(request)
            // `then` runs once: a second call would see nothing left to take.
            setTimeout(() => resolve({ collected, calls }), 20)
            response.end("ok")
          })
        }))
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({ port, next: () => firstOf(results), close: () => server.close() }))
      })
    }),
    ({ close }) => Effect.sync(close)
  )

/** The first request's result, once it came in. */
const firstOf = <A>(results: ReadonlyArray<Promise<A>>): Promise<A> =>
  new Promise((resolve) => {
    const check = () => results[0] !== undefined ? resolve(results[0]) : setTimeout(check, 5)
    check()
  })

/** Sends a POST head and then `pieces` (each after a pause) on a raw socket; `abort` destroys the socket after the last piece. */
const send = (port: number, head: string, pieces: ReadonlyArray<string>, abort = false) =>
  Effect.sync(() => {
    const socket = connect(port, "127.0.0.1")
    socket.on("error", () => {})
    socket.write(`POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\n${head}\r\n`)
    pieces.forEach((piece, i) => setTimeout(() => {
      socket.write(piece)
      if (abort && i === pieces.length - 1) setTimeout(() => socket.destroy(), 20)
    }, 20 * (i + 1)))
    return socket
  })

const text = (collected: EarlyBody.Collected | undefined) =>
  collected?._tag === "Body" ? new TextDecoder().decode(collected.body) : collected?._tag

describe("early bodies", () => {
  it.scopedLive("a body arriving in pieces is collected whole, then the route is called once", () =>
    Effect.gen(function*() {
      const server = yield* collecting(1024)
      yield* send(server.port, "content-length: 11\r\n", ["hello", " ", "world"])
      const { collected, calls } = yield* Effect.promise(server.next)
      assert.strictEqual(text(collected), "hello world")
      assert.strictEqual(calls, 1)
    }))

  it.scopedLive("a chunked body passing the cap: TooLarge, the route called before the upload ends", () =>
    Effect.gen(function*() {
      const server = yield* collecting(8)
      const chunk = (data: string) => `${data.length.toString(16)}\r\n${data}\r\n`
      // The last chunk never comes: the route is called on the overflow, not on the end.
      yield* send(server.port, "transfer-encoding: chunked\r\n", [chunk("12345"), chunk("67890")])
      const { collected, calls } = yield* Effect.promise(server.next)
      assert.strictEqual(text(collected), "TooLarge")
      assert.strictEqual(calls, 1)
    }))

  it.scopedLive("a declared Content-Length over the cap: the route is called at once with nothing collected (the reader refuses it)", () =>
    Effect.gen(function*() {
      const server = yield* collecting(8)
      yield* send(server.port, "content-length: 100\r\n", [])
      const { collected, calls } = yield* Effect.promise(server.next)
      assert.isUndefined(collected)
      assert.strictEqual(calls, 1)
    }))

  it.scopedLive("a client that goes away mid-body: Failed, the route called once", () =>
    Effect.gen(function*() {
      const server = yield* collecting(1024)
      yield* send(server.port, "content-length: 100\r\n", ["only part"], true)
      const { collected, calls } = yield* Effect.promise(server.next)
      assert.strictEqual(collected?._tag, "Failed")
      assert.strictEqual(calls, 1)
    }))
})
