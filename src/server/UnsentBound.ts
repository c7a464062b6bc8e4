/**
 * The bound on what an rpc WebSocket holds unsent. Answers are written without waiting for the
 * client to read them (`RpcSocket`), so a client that sends calls and never reads their answers
 * would make the server buffer every one of them. Two steps keep that bounded:
 *
 * - past `maxUnsentBytes` unsent (the app's body cap), the socket's frames are no longer read
 *   until what is unsent has been sent (the TCP socket's `drain`): a client that pipelines calls
 *   faster than it takes the answers is slowed to its reading pace, never dropped;
 * - past `dropFactor` times that (answers of calls it already sent keep coming), the client is
 *   dropped: closed with `closeCode` and a reason saying why, which the server logs too.
 *
 * This reaches into the `ws` socket object the platform does not expose (as `FrameCap` does); if
 * its shape ever changes, there is no bound (as before it).
 */

/** What the bound needs of the `ws` library's socket object. */
interface Throttled {
  readonly readyState: number
  /** Bytes handed to the socket and not yet sent. */
  readonly bufferedAmount: number
  readonly pause: () => void
  readonly resume: () => void
  readonly close: (code: number, reason: string) => void
}

/** What the bound needs of the TCP socket under it. */
interface Drainable {
  readonly writableNeedDrain: boolean
  readonly on: (event: "drain", listener: () => void) => unknown
}

/** How many times the bound a client may hold unsent before it is dropped. */
export const dropFactor = 4

/** The close code of a client dropped for not reading its answers (RFC 6455 §7.4.1: policy violation). */
export const closeCode = 1008

/** The close reason (and log message) of a client dropped for not reading its answers. */
export const reasonOf = (maxUnsentBytes: number): string =>
  `the client does not read its answers: over ${dropFactor * maxUnsentBytes} bytes unsent`

/** `WebSocket.OPEN`. */
const wsOpen = 1

/** The bound of one socket. */
export interface UnsentBound {
  /** Stops reading the socket's frames while more than the bound is unsent (call after writing). */
  readonly throttle: () => void
  /** Whether more than `dropFactor` times the bound is unsent: then the socket was closed with the reason. */
  readonly dropped: () => boolean
}

/** The bound of the `ws` socket `ws` over `nodeSocket`; `undefined` when either lacks what it needs. */
export const make = (ws: unknown, nodeSocket: unknown, maxUnsentBytes: number): UnsentBound | undefined => {
  if (typeof ws !== "object" || ws === null || typeof nodeSocket !== "object" || nodeSocket === null) return undefined
  const socket = ws as Partial<Throttled>
  const tcp = nodeSocket as Partial<Drainable>
  if (
    typeof socket.bufferedAmount !== "number" || typeof socket.pause !== "function" || typeof socket.resume !== "function" ||
    typeof socket.close !== "function" || typeof tcp.writableNeedDrain !== "boolean" || typeof tcp.on !== "function"
  ) return undefined
  const throttled = ws as Throttled
  const drainable = nodeSocket as Drainable
  let paused = false
  drainable.on("drain", () => {
    if (!paused) return
    paused = false
    throttled.resume()
  })
  return {
    throttle: () => {
      // Only a socket that will emit `drain` is paused (Node emits it once a refused write is sent).
      if (paused || throttled.bufferedAmount <= maxUnsentBytes || !drainable.writableNeedDrain) return
      paused = true
      throttled.pause()
    },
    dropped: () => {
      if (throttled.bufferedAmount <= dropFactor * maxUnsentBytes) return false
      if (throttled.readyState === wsOpen) throttled.close(closeCode, reasonOf(maxUnsentBytes))
      return true
    }
  }
}
