/**
 * A TCP proxy to PostgreSQL that can make LISTEN connections deaf: the connection stays open and
 * the client's bytes still reach the server, but nothing the server sends comes back (not even its
 * closing of the connection), as behind a half-dead network middlebox.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as net from "node:net"

/** A running proxy. */
export interface DeafProxy {
  /** The database URL rewritten to go through the proxy. */
  readonly url: string
  /** Makes every connection that has sent a LISTEN so far deaf; connections opened later are not. */
  readonly deafen: () => number
  /** How many connections have sent a LISTEN so far (closed ones included). */
  readonly listening: () => number
}

interface Pair {
  readonly client: net.Socket
  readonly upstream: net.Socket
  listens: boolean
  deaf: boolean
}

/** Starts a proxy in front of the database at `url`; stopped (every connection cut) with the scope. */
export const make = (url: string): Effect.Effect<DeafProxy, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly proxy: DeafProxy; readonly server: net.Server; readonly pairs: Set<Pair> }>((resume) => {
      const target = new URL(url)
      const pairs = new Set<Pair>()
      let listened = 0
      const server = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname)
        const pair: Pair = { client, upstream, listens: false, deaf: false }
        pairs.add(pair)
        client.on("error", () => upstream.destroy())
        upstream.on("error", () => {
          if (!pair.deaf) client.destroy()
        })
        upstream.on("data", (chunk: Buffer) => {
          if (!pair.deaf) client.write(chunk)
        })
        // A deaf connection does not hear the server close it either.
        upstream.on("close", () => {
          if (!pair.deaf) client.destroy()
        })
        client.on("close", () => {
          upstream.destroy()
          pairs.delete(pair)
        })
        client.on("data", (chunk: Buffer) => {
          if (!pair.listens && chunk.includes("LISTEN ")) {
            pair.listens = true
            listened++
          }
          upstream.write(chunk)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const via = new URL(url)
        via.hostname = "127.0.0.1"
        via.port = String((server.address() as net.AddressInfo).port)
        const listeners = () => [...pairs].filter((pair) => pair.listens)
        resume(Effect.succeed({
          server,
          pairs,
          proxy: {
            url: via.toString(),
            listening: () => listened,
            deafen: () => {
              const deafened = listeners()
              for (const pair of deafened) pair.deaf = true
              return deafened.length
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
