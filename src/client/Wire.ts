/**
 * The `@effect/rpc` JSON wire protocol as the mounted client speaks it: the messages it sends
 * (requests, interrupts, acks, pings), the messages it reads from a frame, and the decoding of the
 * values and errors they carry into a procedure's output or a typed `ClientError`. No state: the
 * connection and its bookkeeping are the `Api`'s.
 */
import { Cause, Either, Option, Schema as S } from "effect"
import { liveSuffix } from "../app/App.js"
import type { AreaError, AreaErrorClass } from "../app/Errors.js"
import { describeParseError, InputInvalid, wireError } from "../app/Errors.js"
import type { Contract } from "./Contract.js"
import type { ClientError } from "./Errors.js"
import { Disconnected, ProtocolError, reasonOf } from "./Errors.js"

/** Headers as a request carries them: lower-cased name and value pairs. */
export type Headers = ReadonlyArray<readonly [string, string]>

/** A message the client sends. */
export type Outgoing =
  | {
    readonly _tag: "Request"
    readonly id: string
    readonly tag: string
    readonly payload: unknown
    readonly headers: Headers
  }
  | { readonly _tag: "Interrupt"; readonly requestId: string }
  | { readonly _tag: "Ack"; readonly requestId: string }
  | { readonly _tag: "Ping" }

/** A message the client reads; the server's other messages are ignored. */
export type Incoming =
  | { readonly _tag: "Pong" }
  | { readonly _tag: "Chunk"; readonly requestId: string; readonly values: ReadonlyArray<unknown> }
  | { readonly _tag: "Exit"; readonly requestId: string; readonly exit: unknown }
  | { readonly _tag: "Defect"; readonly defect: unknown }

/** The text frame of an outgoing message. */
export const encode = (message: Outgoing): string => JSON.stringify(message)

/** The rpc tag of a query's live subscription. */
export const liveTag = (tag: string): string => `${tag}${liveSuffix}`

/** A procedure's input encoded for the wire, or the `InputInvalid` refusal that never leaves the browser. */
export const encodeInput = (procedure: Contract, input: unknown): Either.Either<unknown, InputInvalid> =>
  S.encodeUnknownEither(procedure.input)(input).pipe(
    Either.mapLeft((error) => new InputInvalid({ message: describeParseError(error) }))
  )

/**
 * The raw messages of one frame (a JSON message, or an array of them), or why it cannot be read.
 * Each is decoded with `decodeMessage` as it is handled.
 */
export const decodeFrame = (data: unknown): Either.Either<ReadonlyArray<unknown>, string> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data as Uint8Array))
  } catch (error) {
    return Either.left(`unreadable frame: ${reasonOf(error)}`)
  }
  return Either.right(Array.isArray(parsed) ? parsed : [parsed])
}

/** One raw message of a frame, or `undefined` for a message the client does not read. */
export const decodeMessage = (raw: unknown): Incoming | undefined => {
  const message = raw as Readonly<Record<string, unknown>>
  switch (message._tag) {
    case "Pong":
      return { _tag: "Pong" }
    case "Chunk":
      return {
        _tag: "Chunk",
        requestId: String(message.requestId),
        values: Array.isArray(message.values) ? message.values : []
      }
    case "Exit":
      return { _tag: "Exit", requestId: String(message.requestId), exit: message.exit }
    case "Defect":
      return { _tag: "Defect", defect: message.defect }
    default:
      return undefined
  }
}

/** One value of a live query's `Chunk`, decoded with the procedure's output schema. */
export const decodeChunkValue = (procedure: Contract, value: unknown): Either.Either<unknown, ProtocolError> =>
  S.decodeUnknownEither(procedure.output)(value).pipe(
    Either.mapLeft((error) => new ProtocolError({ reason: `a result failed the output schema: ${describeParseError(error)}` }))
  )

/** The tag of an encoded failure exit, if it has one (to name an error the client was not given). */
const failureTag = (exit: unknown): string | undefined => {
  const cause = (exit as { readonly cause?: { readonly _tag?: unknown; readonly error?: { readonly _tag?: unknown } } } | null)?.cause
  const tag = cause?._tag === "Fail" ? cause.error?._tag : undefined
  return typeof tag === "string" ? tag : undefined
}

/**
 * The decoder of `Exit` messages whose failures are framework errors or one of `errors`. It gives
 * the output decoded with `procedure`'s schema (`undefined` without one: a live query's end), or
 * the typed error.
 */
export const exitDecoder = (errors: ReadonlyArray<AreaErrorClass>) => {
  const decodeExit = S.decodeUnknownEither(S.Exit({ success: S.Unknown, failure: wireError(errors), defect: S.Defect }))
  return (exit: unknown, procedure: Contract | undefined): Either.Either<unknown, ClientError<AreaError>> => {
    const decoded = decodeExit(exit)
    if (Either.isLeft(decoded)) {
      const tag = failureTag(exit)
      return Either.left(new ProtocolError({
        reason: tag === undefined ? "an unreadable exit" : `an error this client was not given: "${tag}" (pass its class in \`errors\`)`
      }))
    }
    if (decoded.right._tag === "Failure") {
      const cause = decoded.right.cause
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) return Either.left(failure.value)
      if (Cause.isInterruptedOnly(cause)) return Either.left(new Disconnected({ sent: true, reason: "interrupted by the server" }))
      const defect = Cause.dieOption(cause)
      return Either.left(new ProtocolError({ reason: Option.isSome(defect) ? reasonOf(defect.value) : Cause.pretty(cause) }))
    }
    if (procedure === undefined) return Either.right(undefined)
    return S.decodeUnknownEither(procedure.output)(decoded.right.value).pipe(
      Either.mapLeft((error) => new ProtocolError({ reason: `the output failed its schema: ${describeParseError(error)}` }))
    )
  }
}

/** A decoder made by `exitDecoder`. */
export type ExitDecoder = ReturnType<typeof exitDecoder>
