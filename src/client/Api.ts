/**
 * One mounted api: a WebSocket to the app's `/rpc`, speaking the `@effect/rpc` JSON wire protocol,
 * and the framework-agnostic state of its live queries. Everything a UI needs is a store with
 * `getSnapshot()` and `subscribe(listener)` (the shape React's `useSyncExternalStore` takes), so a
 * binding for any UI library is a few lines.
 *
 * Headers ride in every rpc message (a WebSocket upgrade cannot carry them): they are resolved on
 * every connect, from `headers` (an object or a function) and then `authHeaders` (a function),
 * whose values win. When the socket drops, calls in flight fail with `Disconnected` and live
 * queries keep their last value, reconnect with exponential backoff and resubscribe.
 */
import { Either } from "effect"
import type { AreaError, AreaErrorClass } from "../app/Errors.js"
import type { Contract, Input, Output } from "./Contract.js"
import type { ClientError } from "./Errors.js"
import { ClientClosed, Disconnected, HeadersFailed, ProtocolError, reasonOf } from "./Errors.js"
import * as MutationStore from "./MutationStore.js"
import type { ReconnectOptions, SocketConstructor, SocketLike } from "./Socket.js"
import { socketUrl } from "./Socket.js"
import type { ConnectionState, LiveQuery, LiveState, Mutation, Readable } from "./Stores.js"
import * as Wire from "./Wire.js"

/** A header set, as an object (names are sent lower-cased). */
export type HeaderRecord = Readonly<Record<string, string>>

/** How one api is reached and authenticated. */
export interface ApiConfig {
  /** The rpc endpoint: `ws(s)://host/rpc`, `http(s)://host/rpc` or a path such as `/rpc` (same origin). */
  readonly url: string
  /** Headers sent in every rpc message: an object, or a function resolved on every connect. */
  readonly headers?: HeaderRecord | (() => HeaderRecord | Promise<HeaderRecord>)
  /**
   * Auth headers (`{authorization: "Bearer …"}`), resolved fresh on every connect and reconnect;
   * they supersede `headers` (a name in both is sent with this value). Without it (and without a
   * cookie for the api's host), calls are anonymous.
   */
  readonly authHeaders?: () => Promise<HeaderRecord>
}

/** Options shared by every api of a mount. */
export interface ApiOptions {
  /** The WebSocket implementation; defaults to `globalThis.WebSocket` (browsers, Node 22+). */
  readonly WebSocket?: SocketConstructor
  readonly reconnect?: ReconnectOptions
  /** How often a ping checks that the connection is alive (a missed pong drops it). Default 15 s. */
  readonly pingIntervalMs?: number
  /**
   * The area error classes the apps' procedures may fail with (for example `searchErrors` from
   * `@fw/framework/search/errors`): they arrive decoded, with their own tag. An undeclared one is a
   * `ProtocolError` naming its tag.
   */
  readonly errors?: ReadonlyArray<AreaErrorClass>
}

type Pending =
  | {
    readonly _tag: "call"
    readonly contract: Contract
    readonly payload: unknown
    readonly resolve: (value: unknown) => void
    readonly reject: (error: ClientError<AreaError>) => void
  }
  | { readonly _tag: "live"; readonly entry: LiveEntry }

interface LiveEntry {
  readonly key: string
  readonly contract: Contract
  readonly payload: unknown
  readonly listeners: Set<() => void>
  state: LiveState<unknown, AreaError>
  requestId: string | undefined
}

const lowerCased = (headers: HeaderRecord): Array<[string, string]> =>
  Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value])

/** One api of a mount; `E` is the area errors it was given (`ApiOptions.errors`). */
export class Api<E = never> {
  readonly url: string
  private readonly Socket: SocketConstructor
  private readonly initialDelayMs: number
  private readonly maxDelayMs: number
  private readonly pingIntervalMs: number
  private readonly decodeExit: Wire.ExitDecoder
  private socket: SocketLike | undefined
  private headers: Wire.Headers = []
  private generation = 0
  private nextId = 1
  private readonly inflight = new Map<string, Pending>()
  private queued: Array<Extract<Pending, { _tag: "call" }>> = []
  private readonly lives = new Map<string, LiveEntry>()
  private connection: ConnectionState = { status: "idle", attempt: 0, error: undefined }
  private readonly connectionListeners = new Set<() => void>()
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined
  private pingTimer: ReturnType<typeof setInterval> | undefined
  private awaitingPong = false

  constructor(private readonly config: ApiConfig, options: ApiOptions = {}) {
    this.url = socketUrl(config.url)
    const Socket = options.WebSocket ?? (globalThis as { readonly WebSocket?: SocketConstructor }).WebSocket
    if (Socket === undefined) {
      throw new Error("no WebSocket implementation: pass mount({WebSocket}) (in Node before 22, the `ws` package's)")
    }
    this.Socket = Socket
    this.initialDelayMs = options.reconnect?.initialDelayMs ?? 250
    this.maxDelayMs = options.reconnect?.maxDelayMs ?? 10_000
    this.pingIntervalMs = options.pingIntervalMs ?? 15_000
    this.decodeExit = Wire.exitDecoder(options.errors ?? [])
  }

  /** The connection state, as a store. */
  readonly connectionState: Readable<ConnectionState> = {
    getSnapshot: () => this.connection,
    subscribe: (listener) => {
      this.connectionListeners.add(listener)
      return () => this.connectionListeners.delete(listener)
    }
  }

  /** Calls a procedure once. Rejects with a `ClientError`. */
  call<P extends Contract>(procedure: P, input: Input<P>): Promise<Output<P>> {
    return new Promise<Output<P>>((resolve, reject) => {
      if (this.connection.status === "closed") return reject(new ClientClosed())
      const payload = Wire.encodeInput(procedure, input)
      if (Either.isLeft(payload)) return reject(payload.left)
      const pending: Pending = {
        _tag: "call",
        contract: procedure,
        payload: payload.right,
        resolve: resolve as (value: unknown) => void,
        reject
      }
      if (this.connection.status === "open") this.send(pending)
      else {
        this.queued.push(pending)
        this.demand()
      }
    })
  }

  /**
   * The live query of `procedure` with `input`: subscribed on the server while it has listeners,
   * shared by every caller asking for the same procedure and input.
   */
  live<P extends Contract & { readonly kind: "query" }>(procedure: P, input: Input<P>): LiveQuery<Output<P>, E> {
    const payload = Wire.encodeInput(procedure, input)
    if (Either.isLeft(payload)) {
      const state: LiveState<never> = { status: "error", data: undefined, error: payload.left }
      // Keyed by the refusal, so a UI binding memoising on the key shows the current one.
      return { key: `\u0001${procedure.tag}\u0000${state.error?.message}`, getSnapshot: () => state, subscribe: () => () => undefined }
    }
    const key = `${procedure.tag}\u0000${JSON.stringify(payload.right)}`
    // Only subscribed queries are kept in `lives` (so handles that are never subscribed, such as
    // one per keystroke of a search box, leave nothing behind); a handle reads whichever entry is
    // current for its key, so every handle of a key shares one subscription and one state.
    const own: LiveEntry = {
      key,
      contract: procedure,
      payload: payload.right,
      listeners: new Set<() => void>(),
      state: { status: "connecting", data: undefined, error: undefined },
      requestId: undefined
    }
    const current = () => this.lives.get(key) ?? own
    return {
      key,
      // The decoder only lets through the area errors this api was given, that is `E`.
      getSnapshot: () => current().state as LiveState<Output<P>, E>,
      subscribe: (listener) => {
        let entry = this.lives.get(key)
        if (entry === undefined) {
          entry = own
          this.lives.set(key, entry)
        }
        const subscribed = entry
        subscribed.listeners.add(listener)
        if (subscribed.listeners.size === 1) {
          if (this.connection.status === "open") this.subscribeLive(subscribed)
          else this.demand()
        }
        return () => {
          subscribed.listeners.delete(listener)
          if (subscribed.listeners.size > 0) return
          this.unsubscribeLive(subscribed)
          if (this.lives.get(key) === subscribed) this.lives.delete(key)
          // Resubscribing later starts from the last data, no longer claiming to be live.
          subscribed.state = { status: "connecting", data: subscribed.state.data, error: undefined }
        }
      }
    }
  }

  /** A mutation store for `procedure`: `run(input)` plus the state of its last run. */
  mutation<P extends Contract>(procedure: P): Mutation<Input<P>, Output<P>, E> {
    return MutationStore.make((input: Input<P>) => this.call(procedure, input))
  }

  /** Closes the connection for good: pending calls reject with `ClientClosed`. */
  dispose(): void {
    if (this.connection.status === "closed") return
    this.generation++
    clearTimeout(this.reconnectTimer)
    this.stopPing()
    const socket = this.socket
    this.socket = undefined
    if (socket !== undefined) {
      socket.onclose = null
      socket.close(1000, "client disposed")
    }
    const closed = new ClientClosed()
    for (const pending of [...this.queued, ...this.inflight.values()]) {
      if (pending._tag === "call") pending.reject(closed)
    }
    this.queued = []
    this.inflight.clear()
    for (const entry of this.lives.values()) this.setLive(entry, { ...entry.state, status: "error", error: closed })
    this.setConnection({ status: "closed", attempt: 0, error: undefined })
  }

  private setConnection(next: ConnectionState) {
    this.connection = next
    for (const listener of [...this.connectionListeners]) listener()
  }

  private setLive(entry: LiveEntry, state: LiveState<unknown, AreaError>) {
    entry.state = state
    for (const listener of [...entry.listeners]) listener()
  }

  private hasDemand() {
    return this.queued.length > 0 || [...this.lives.values()].some((entry) => entry.listeners.size > 0)
  }

  /** Connects if nothing is connecting yet (a scheduled reconnect keeps its delay). */
  private demand() {
    if (this.connection.status === "idle") this.connect()
  }

  private connect() {
    const generation = ++this.generation
    this.setConnection({ ...this.connection, status: this.connection.attempt === 0 ? "connecting" : "reconnecting" })
    this.resolveHeaders().then(
      (headers) => {
        if (generation !== this.generation) return
        this.headers = headers
        this.open(generation)
      },
      (error: unknown) => {
        if (generation !== this.generation) return
        this.failed(new HeadersFailed({ reason: reasonOf(error) }))
      }
    )
  }

  private async resolveHeaders(): Promise<Array<[string, string]>> {
    const { headers, authHeaders } = this.config
    const base = typeof headers === "function" ? await headers() : headers ?? {}
    const auth = authHeaders === undefined ? {} : await authHeaders()
    return [...new Map([...lowerCased(base), ...lowerCased(auth)])]
  }

  private open(generation: number) {
    let socket: SocketLike
    try {
      socket = new this.Socket(this.url)
    } catch (error) {
      return this.failed(new Disconnected({ sent: false, reason: reasonOf(error) }))
    }
    this.socket = socket
    let opened = false
    socket.onopen = () => {
      if (generation !== this.generation) return
      opened = true
      this.setConnection({ status: "open", attempt: 0, error: undefined })
      this.startPing(socket)
      const queued = this.queued
      this.queued = []
      for (const pending of queued) this.send(pending)
      for (const entry of this.lives.values()) {
        if (entry.listeners.size > 0) this.subscribeLive(entry)
      }
    }
    socket.onmessage = (event) => {
      if (this.socket === socket) this.receive(socket, event.data)
    }
    socket.onerror = () => undefined
    socket.onclose = (event) => {
      if (this.socket !== socket) return
      this.dropped(opened, `the connection closed (code ${event.code}${event.reason ? `: ${event.reason}` : ""})`)
    }
  }

  /** The socket is gone (or never opened): fail what was in flight and reconnect if anything waits. */
  private dropped(opened: boolean, reason: string) {
    const socket = this.socket
    this.socket = undefined
    if (socket !== undefined) {
      socket.onclose = null
      socket.onmessage = null
      try {
        socket.close()
      } catch {
        // already closing
      }
    }
    this.stopPing()
    for (const pending of this.inflight.values()) {
      if (pending._tag === "call") pending.reject(new Disconnected({ sent: true, reason }))
      else pending.entry.requestId = undefined
    }
    this.inflight.clear()
    this.failed(new Disconnected({ sent: false, reason }), opened)
  }

  /** A connect failed or a connection ended: reject queued calls, mark live queries, schedule a retry. */
  private failed(error: ClientError, wasOpen = false) {
    for (const pending of this.queued) pending.reject(error)
    this.queued = []
    const attempt = wasOpen ? 0 : this.connection.attempt + 1
    for (const entry of this.lives.values()) {
      if (entry.state.status !== "error") this.setLive(entry, { ...entry.state, status: "reconnecting" })
    }
    if (!this.hasDemand()) {
      this.setConnection({ status: "idle", attempt: 0, error })
      return
    }
    this.setConnection({ status: "reconnecting", attempt, error })
    const ceiling = Math.min(this.maxDelayMs, this.initialDelayMs * 2 ** attempt)
    const delay = ceiling / 2 + Math.random() * ceiling / 2
    clearTimeout(this.reconnectTimer)
    this.reconnectTimer = setTimeout(() => {
      if (this.connection.status === "reconnecting") this.connect()
    }, delay)
  }

  private startPing(socket: SocketLike) {
    this.stopPing()
    this.awaitingPong = false
    this.pingTimer = setInterval(() => {
      if (this.socket !== socket) return
      if (this.awaitingPong) return this.dropped(true, "no answer to a ping")
      this.awaitingPong = true
      this.write({ _tag: "Ping" })
    }, this.pingIntervalMs)
  }

  private stopPing() {
    clearInterval(this.pingTimer)
    this.pingTimer = undefined
  }

  private write(message: Wire.Outgoing) {
    this.socket?.send(Wire.encode(message))
  }

  private request(tag: string, payload: unknown, pending: Pending): string {
    const id = String(this.nextId++)
    this.inflight.set(id, pending)
    this.write({ _tag: "Request", id, tag, payload, headers: this.headers })
    return id
  }

  private send(pending: Extract<Pending, { _tag: "call" }>) {
    this.request(pending.contract.tag, pending.payload, pending)
  }

  private subscribeLive(entry: LiveEntry) {
    if (entry.requestId !== undefined) return
    if (entry.state.status === "error") this.setLive(entry, { ...entry.state, status: "reconnecting" })
    entry.requestId = this.request(Wire.liveTag(entry.contract.tag), entry.payload, { _tag: "live", entry })
  }

  private unsubscribeLive(entry: LiveEntry) {
    const id = entry.requestId
    if (id === undefined) return
    entry.requestId = undefined
    this.inflight.delete(id)
    this.write({ _tag: "Interrupt", requestId: id })
  }

  private receive(socket: SocketLike, data: unknown) {
    const frame = Wire.decodeFrame(data)
    if (Either.isLeft(frame)) return this.protocolFailure(socket, frame.left)
    for (const raw of frame.right) {
      if (this.socket !== socket) return
      const message = Wire.decodeMessage(raw)
      if (message !== undefined) this.handle(socket, message)
    }
  }

  private handle(socket: SocketLike, message: Wire.Incoming) {
    switch (message._tag) {
      case "Pong":
        this.awaitingPong = false
        return
      case "Chunk": {
        const id = message.requestId
        const pending = this.inflight.get(id)
        if (pending?._tag !== "live") return
        for (const value of message.values) {
          const decoded = Wire.decodeChunkValue(pending.entry.contract, value)
          if (Either.isLeft(decoded)) {
            this.unsubscribeLive(pending.entry)
            return this.setLive(pending.entry, { ...pending.entry.state, status: "error", error: decoded.left })
          }
          this.setLive(pending.entry, { status: "live", data: decoded.right, error: undefined })
        }
        this.write({ _tag: "Ack", requestId: id })
        return
      }
      case "Exit": {
        const id = message.requestId
        const pending = this.inflight.get(id)
        if (pending === undefined) return
        this.inflight.delete(id)
        const outcome = this.decodeExit(message.exit, pending._tag === "call" ? pending.contract : undefined)
        if (pending._tag === "call") {
          return Either.isRight(outcome) ? pending.resolve(outcome.right) : pending.reject(outcome.left)
        }
        pending.entry.requestId = undefined
        if (Either.isLeft(outcome)) {
          // An interrupted stream (the server is shutting down) is resubscribed on the next connect.
          const status = outcome.left._tag === "Disconnected" ? "reconnecting" : "error"
          this.setLive(pending.entry, { ...pending.entry.state, status, error: outcome.left })
        }
        return
      }
      case "Defect":
        return this.protocolFailure(socket, `the server reported a defect: ${reasonOf(message.defect)}`)
    }
  }

  private protocolFailure(socket: SocketLike, reason: string) {
    const error = new ProtocolError({ reason })
    for (const pending of this.inflight.values()) {
      if (pending._tag === "call") pending.reject(error)
    }
    this.inflight.clear()
    if (this.socket === socket) this.dropped(true, reason)
  }
}
