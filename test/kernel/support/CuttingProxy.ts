/**
 * A TCP proxy to PostgreSQL that, once armed, cuts the first connection sending a chunk with
 * one of `markers` just after forwarding it: the server has the statement, its answer is dropped and the
 * caller's connection cut (a COMMIT, or a one-statement write, whose answer was lost).
 */
import { Effect } from "effect"
import * as net from "node:net"

/** The proxy on a free port, closed with the scope. */
export const cuttingProxy = (target: URL, ...markers: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly port: number
      /** `target` through the proxy. */
      readonly url: string
      readonly server: net.Server
      readonly arm: () => void
      /** Every chunk the clients sent, as latin1 text (protocol bytes kept one to one). */
      readonly sent: ReadonlyArray<string>
    }>((resume) => {
      let armed = false
      const sent: Array<string> = []
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        client.on("error", () => upstream.destroy())
        upstream.on("error", () => client.destroy())
        upstream.on("data", (chunk) => client.write(chunk))
        upstream.on("close", () => client.destroy())
        client.on("close", () => upstream.destroy())
        client.on("data", (chunk: Buffer) => {
          upstream.write(chunk)
          sent.push(chunk.toString("latin1"))
          if (armed && markers.some((marker) => chunk.includes(marker))) {
            armed = false
            // The server has the statement; the answer is dropped and the caller's connection cut.
            upstream.removeAllListeners("data")
            setTimeout(() => client.destroy(), 300)
          }
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as net.AddressInfo).port
        const via = new URL(target)
        via.hostname = "127.0.0.1"
        via.port = String(port)
        resume(Effect.succeed({ port, url: via.toString(), server, arm: () => void (armed = true), sent }))
      })
    }),
    ({ server }) => Effect.sync(() => server.close())
  )
