/**
 * A plain HTTP client for REST tests (undici `fetch`): the status, the headers and the body text.
 */
import { Effect } from "effect"

/** A response, read whole. */
export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: () => unknown
}

/** Sends one request and reads the whole answer. */
export const send = (url: string, init: RequestInit = {}): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    const text = await response.text()
    return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) }
  })

/** A JSON request body with its content type. */
export const jsonBody = (method: string, body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body)
})
