/**
 * A TCP proxy to PostgreSQL that can lose the server's answer to a statement: the statement reaches
 * the server (which runs it, and commits it when autocommitted), then the connection is cut before
 * any byte of the answer comes back, as when a network path fails at that moment. The client cannot
 * tell whether the statement ran.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as net from "node:net"

/** A running proxy. */
export interface CutProxy {
  /** The database URL rewritten to go through the proxy. */
  readonly url: string
  /**
   * The next client message containing `marker` (on any connection) reaches the server; that
   * connection is then cut when the server's answer arrives, the answer dropped.
   */
  readonly loseAnswerTo: (marker: string) => void
}

interface Pair {
  readonly client: net.Socket
  readonly upstream: net.Socket
  /** The server's next bytes on this connection are the answer to lose. */
  cut: boolean
}

/** Starts a proxy in front of the database at `url`; stopped (every connection cut) with the scope. */
export const make = (url: string): Effect.Effect<CutProxy, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly proxy: CutProxy; readonly server: net.Server; readonly pairs: Set<Pair> }>((resume) => {
      const target = new URL(url)
      const pairs = new Set<Pair>()
      let armed: string | undefined
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        const pair: Pair = { client, upstream, cut: false }
        pairs.add(pair)
        const close = () => {
          client.destroy()
          upstream.destroy()
          pairs.delete(pair)
        }
        client.on("error", close)
        upstream.on("error", close)
        client.on("close", close)
        upstream.on("close", close)
        client.on("data", (chunk: Buffer) => {
          if (armed !== undefined && chunk.includes(armed)) {
            armed = undefined
            pair.cut = true
          }
          upstream.write(chunk)
        })
        upstream.on("data", (chunk: Buffer) => {
          if (pair.cut) return close()
          client.write(chunk)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const via = new URL(url)
        via.hostname = "127.0.0.1"
        via.port = String((server.address() as net.AddressInfo).port)
        resume(Effect.succeed({
          server,
          pairs,
          proxy: {
            url: via.toString(),
            loseAnswerTo: (marker) => {
              armed = marker
            }
          }
        }))
      })
    }),
    ({ pairs, server }) =>
      Effect.sync(() => {
        for (const pair of pairs) {
          pair.client.destroy()
          pair.upstream.destroy()
        }
        server.close()
      })
  ).pipe(Effect.map(({ proxy }) => proxy))
