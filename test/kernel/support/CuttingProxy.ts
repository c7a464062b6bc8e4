/**
 * A TCP proxy to PostgreSQL that, once armed, cuts the first connection sending a chunk with
 * `marker` just after forwarding it: the server has the statement, its answer is dropped and the
 * caller's connection cut (a COMMIT, or a one-statement write, whose answer was lost).
 */
import { Effect } from "effect"
import * as net from "node:net"

/** The proxy on a free port, closed with the scope. */
export const cuttingProxy = (target: URL, marker: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly server: net.Server; readonly arm: () => void }>((resume) => {
      let armed = false
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        client.on("error", () => upstream.destroy())
        upstream.on("error", () => client.destroy())
        upstream.on("data", (chunk) => client.write(chunk))
        upstream.on("close", () => client.destroy())
        client.on("close", () => upstream.destroy())
        client.on("data", (chunk: Buffer) => {
          upstream.write(chunk)
          if (armed && chunk.includes(marker)) {
            armed = false
            // The server has the statement; the answer is dropped and the caller's connection cut.
            upstream.removeAllListeners("data")
            setTimeout(() => client.destroy(), 300)
          }
        })
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ port: (server.address() as net.AddressInfo).port, server, arm: () => void (armed = true) })))
    }),
    ({ server }) => Effect.sync(() => server.close())
  )
