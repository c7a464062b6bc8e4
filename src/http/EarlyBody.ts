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
const collected = new WeakMap<IncomingMessage, Collected>()

/** Registers `direct` (a route's eager twin) as one whose body is collected, up to `limit` bytes, before it is called. */
export const wants = <D extends object>(direct: D, limit: number): D => {
  limits.set(direct, limit)
  return direct
}

/** The body cap of a twin registered with `wants`, if it was. */
export const limitOf = (direct: object): number | undefined => limits.get(direct)

/**
 * Collects the body of `incoming` up to `limit` bytes, then calls `then` (once): on `end` with the
 * body, as soon as the body passes the cap (the rest is left to the reader, which discards it), or
 * on an error or abort. A declared `Content-Length` over the cap calls `then` at once, with
 * nothing collected: the reader refuses it as before.
 */
export const collect = (incoming: IncomingMessage, limit: number, then: () => void): void => {
  const declared = Number(incoming.headers["content-length"] ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limit) return then()
  const chunks: Array<Buffer> = []
  let size = 0
  const done = (result: Collected) => {
    incoming.off("data", onData)
    incoming.off("end", onEnd)
    incoming.off("error", onError)
    incoming.off("aborted", onAborted)
    collected.set(incoming, result)
    then()
  }
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size > limit) {
      chunks.length = 0
      done({ _tag: "TooLarge" })
    } else {
      chunks.push(chunk)
    }
  }
  const onEnd = () => done({ _tag: "Body", body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) })
  const onError = (error: Error) => done({ _tag: "Failed", message: error.message })
  const onAborted = () => onError(new Error("client aborted the request"))
  incoming.on("data", onData)
  incoming.on("end", onEnd)
  incoming.on("error", onError)
  incoming.on("aborted", onAborted)
}

/** What `collect` gathered for `incoming`, taken once; `undefined` when nothing was collected. */
export const take = (incoming: IncomingMessage): Collected | undefined => {
  const result = collected.get(incoming)
  if (result !== undefined) collected.delete(incoming)
  return result
}
