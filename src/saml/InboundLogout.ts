/**
 * The signed logout message an IdP sends to `/saml/slo`, read from the request and verified: by
 * the redirect binding (the signature over the raw query, checked before anything is decoded) or
 * by POST (an enveloped signature). A message without any signature is refused first, before the
 * IdP settings or the verification library are consulted.
 */
import { HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Either } from "effect"
import * as Answers from "./Answers.js"
import { reject, type SamlRejected } from "./Errors.js"
import type * as IdpSource from "./IdpSource.js"
import * as Libraries from "./Libraries.js"
import * as LogoutMessage from "./LogoutMessage.js"
import * as Messages from "./Messages.js"
import * as Signature from "./Signature.js"
import * as Xml from "./Xml.js"

/** A verified message, with the RelayState to send back and the IdP settings it was checked with. */
export interface Received {
  readonly message: LogoutMessage.LogoutMessage
  readonly relayState: string | undefined
  readonly settings: IdpSource.Idp
}

/** What receiving needs from the plugin. */
export interface Context {
  readonly idp: IdpSource.IdpSource
  readonly sloUrl: string
  readonly clockSkewMs: number
  readonly rememberMs: number
}

/** The message of the request; `Left` is the answer to give instead. */
export const receive = (binding: "redirect" | "post", context: Context) =>
  Effect.gen(function*() {
    type Read = Either.Either<Received, HttpServerResponse.HttpServerResponse>
    const fail = (error: SamlRejected): Read => Either.left(Answers.refused(error))
    let xml: string
    let relayState: string | undefined
    let settings: IdpSource.Idp
    if (binding === "redirect") {
      const query = Signature.redirectQuery(Answers.rawQueryOf(yield* HttpServerRequest.HttpServerRequest))
      if (Either.isLeft(query)) return fail(query.left)
      if (!Signature.hasRedirectSignature(query.right)) return fail(reject("signature_missing", "the message is not signed"))
      settings = yield* context.idp.current
      const verified = Signature.verifyRedirect(query.right, settings.keys)
      if (Either.isLeft(verified)) return fail(verified.left)
      const decoded = Messages.decodeRedirected(query.right.message)
      if (Either.isLeft(decoded)) return fail(decoded.left)
      xml = decoded.right
      relayState = query.right.relayState === undefined ? undefined : Signature.decodeComponent(query.right.relayState)
    } else {
      const form = yield* Answers.formOf
      const posted = form.get("SAMLRequest") ?? form.get("SAMLResponse")
      if (posted === null) return Either.left(Answers.answer(400, "malformed", "SAMLRequest or SAMLResponse is missing")) as Read
      const decoded = Messages.decodePosted(posted)
      if (Either.isLeft(decoded)) return fail(decoded.left)
      if (!/<([\w.-]+:)?Signature[\s>]/.test(decoded.right)) return fail(reject("signature_missing", "the message is not signed"))
      settings = yield* context.idp.current
      xml = decoded.right
      relayState = form.get("RelayState") ?? undefined
    }
    const libraries = yield* Libraries.load
    const document = Xml.parse(libraries, xml)
    if (Either.isLeft(document)) return fail(document.left)
    if (binding === "post") {
      const verified = yield* Effect.either(Signature.verifyEnveloped(libraries, document.right, document.right.documentElement, settings.keys))
      if (Either.isLeft(verified)) return fail(verified.left)
    }
    const message = yield* Effect.either(LogoutMessage.read(document.right, {
      idpEntityId: settings.entityId,
      sloUrl: context.sloUrl,
      clockSkewMs: context.clockSkewMs,
      now: yield* Clock.currentTimeMillis,
      rememberMs: context.rememberMs
    }))
    return Either.isLeft(message) ? fail(message.left) : Either.right({ message: message.right, relayState, settings }) as Read
  })
