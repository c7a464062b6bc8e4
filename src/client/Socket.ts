/** The WebSocket the client speaks over: the subset it uses, its URL and its reconnect backoff. */
/** Reconnect backoff: `initialDelayMs * 2^attempt`, capped at `maxDelayMs`, with jitter. */
export interface ReconnectOptions {
  readonly initialDelayMs?: number
  readonly maxDelayMs?: number
}

/** The subset of the WebSocket API the client uses (the browser's, or the `ws` package's in Node). */
export interface SocketLike {
  onopen: ((event: unknown) => void) | null
  onmessage: ((event: { readonly data: unknown }) => void) | null
  onclose: ((event: { readonly code: number; readonly reason: string }) => void) | null
  onerror: ((event: unknown) => void) | null
  send(data: string): void
  close(code?: number, reason?: string): void
}

/** A WebSocket constructor. */
export type SocketConstructor = new(url: string) => SocketLike

/** The WebSocket URL of an api's `url`. */
export const socketUrl = (url: string): string => {
  const base = (globalThis as { readonly location?: { readonly href: string } }).location?.href
  const resolved = base === undefined ? new URL(url) : new URL(url, base)
  if (resolved.protocol === "http:") resolved.protocol = "ws:"
  else if (resolved.protocol === "https:") resolved.protocol = "wss:"
  return resolved.toString()
}
