/**
 * Request bodies read before their route runs. A POST body is not buffered yet when Node emits
 * `request` (its bytes come after the headers, even in the same packet), so a route that reads it
 * must wait, and waiting takes a fiber. A directly dispatched route (`DirectRoute`) registered with
 * `wants` instead gets called once its body is in: the server collects it (`collect`, within the
 * route's cap) and calls the route's twin on `end`; `BodyLimit.readCapped` then answers from what
 * was collected (`take`), at once, and a twin whose every other step answers at once needs no
 * fiber at all.
 */
import type { IncomingMessage } from "node:http"

/** What was collected for a request: its body, or why there is none. */
export type Collected =
  | { readonly _tag: "Body"; readonly body: Uint8Array }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Failed"; readonly message: string }

const limits = new WeakMap<object, number>()

/** A body being collected: its chunks so far, and who to call when it is done. */
interface Collecting {
  readonly chunks: Array<Buffer>
  size: number
  readonly limit: number
  readonly then: () => void
}

/**
 * Where a request's collection lives, on the request itself: the listeners below are shared by
 * every request (Node calls them with the request as `this`), so collecting a body makes no
 * closure, and taking the result is a property read rather than a weak map's.
 */
const slot = Symbol("fw.EarlyBody")
interface Carrier extends IncomingMessage {
  [slot]?: Collecting | Collected | undefined
}

/** Registers `direct` (a route's eager twin) as one whose body is collected, up to `limit` bytes, before it is called. */
export const wants = <D extends object>(direct: D, limit: number): D => {
  limits.set(direct, limit)
  return direct
}

/** The body cap of a twin registered with `wants`, if it was. */
export const limitOf = (direct: object): number | undefined => limits.get(direct)

/** Ends a collection: the listeners removed, the result kept for `take`, the route called. */
function done(incoming: Carrier, state: Collecting, result: Collected): void {
  incoming.off("data", onData)
  incoming.off("end", onEnd)
  incoming.off("error", onError)
  incoming.off("aborted", onAborted)
  incoming[slot] = result
  state.then()
}

/** The collection under way on `incoming` (the listeners are removed when it ends: never anything else). */
const collecting = (incoming: Carrier): Collecting => incoming[slot] as Collecting

function onData(this: Carrier, chunk: Buffer): void {
  const state = collecting(this)
  state.size += chunk.length
  if (state.size > state.limit) {
    state.chunks.length = 0
    done(this, state, { _tag: "TooLarge" })
  } else {
    state.chunks.push(chunk)
  }
}

function onEnd(this: Carrier): void {
  const state = collecting(this)
  const { chunks, size } = state
  done(this, state, { _tag: "Body", body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) })
}

function onError(this: Carrier, error: Error): void {
  done(this, collecting(this), { _tag: "Failed", message: error.message })
}

function onAborted(this: Carrier): void {
  done(this, collecting(this), { _tag: "Failed", message: "client aborted the request" })
}

/**
 * Collects the body of `incoming` up to `limit` bytes, then calls `then` (once): on `end` with the
 * body, as soon as the body passes the cap (the rest is left to the reader, which discards it), or
 * on an error or abort. A declared `Content-Length` over the cap calls `then` at once, with
 * nothing collected: the reader refuses it as before.
 */
export const collect = (incoming: IncomingMessage, limit: number, then: () => void): void => {
  const declared = Number(incoming.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limit) return then()
  const state: Collecting = { chunks: [], size: 0, limit, then }
  ;(incoming as Carrier)[slot] = state
  incoming.on("data", onData)
  incoming.on("end", onEnd)
  incoming.on("error", onError)
  incoming.on("aborted", onAborted)
}

/** What `collect` gathered for `incoming`, taken once; `undefined` when nothing was collected. */
export const take = (incoming: IncomingMessage): Collected | undefined => {
  const carrier = incoming as Carrier
  const result = carrier[slot]
  // Still collecting (a reader called before the body's end): nothing collected yet, as before.
  if (result === undefined || !("_tag" in result)) return undefined
  carrier[slot] = undefined
  return result
}
