/**
 * The SAML protocol messages the SP writes (AuthnRequest, LogoutRequest, LogoutResponse), the
 * redirect binding that carries them, and the decoding of messages that arrive by redirect
 * (deflated, capped while inflating) or by POST (base64).
 */
import { Either } from "effect"
import { type KeyObject, randomBytes } from "node:crypto"
import { deflateRawSync, inflateRawSync } from "node:zlib"
import { reject, type SamlRejected } from "./Errors.js"
import * as Signature from "./Signature.js"
import * as Xml from "./Xml.js"

/** A fresh message ID (an `xs:ID` must not start with a digit). */
export const newId = (): string => `_${randomBytes(20).toString("hex")}`

const protocolRoot = (name: string, attributes: Readonly<Record<string, string>>, body: string) =>
  `<samlp:${name} xmlns:samlp="${Xml.ns.protocol}" xmlns:saml="${Xml.ns.assertion}"${
    Object.entries(attributes).map(([key, value]) => ` ${key}="${Xml.escape(value)}"`).join("")
  }>${body}</samlp:${name}>`

const issuer = (entityId: string) => `<saml:Issuer>${Xml.escape(entityId)}</saml:Issuer>`

interface Common {
  readonly id: string
  readonly issueInstant: number
  readonly destination: string
  readonly spEntityId: string
}

/** An AuthnRequest asking for a response by HTTP-POST to `acsUrl`. */
export const authnRequest = (request: Common & { readonly acsUrl: string }): string =>
  protocolRoot(
    "AuthnRequest",
    {
      ID: request.id,
      Version: "2.0",
      IssueInstant: Xml.instant(request.issueInstant),
      Destination: request.destination,
      AssertionConsumerServiceURL: request.acsUrl,
      ProtocolBinding: "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"
    },
    `${issuer(request.spEntityId)}<samlp:NameIDPolicy AllowCreate="true"/>`
  )

/** Who a SAML session belongs to at the IdP: what a LogoutRequest names. */
export interface SessionName {
  readonly nameId: string
  readonly nameIdFormat: string | null
  readonly sessionIndex: string | null
}

/** A LogoutRequest for the IdP session named by `name`. */
export const logoutRequest = (request: Common & { readonly name: SessionName }): string =>
  protocolRoot(
    "LogoutRequest",
    { ID: request.id, Version: "2.0", IssueInstant: Xml.instant(request.issueInstant), Destination: request.destination },
    issuer(request.spEntityId) +
      `<saml:NameID${request.name.nameIdFormat === null ? "" : ` Format="${Xml.escape(request.name.nameIdFormat)}"`}>${
        Xml.escape(request.name.nameId)
      }</saml:NameID>` +
      (request.name.sessionIndex === null ? "" : `<samlp:SessionIndex>${Xml.escape(request.name.sessionIndex)}</samlp:SessionIndex>`)
  )

/** A successful LogoutResponse to the IdP's LogoutRequest `inResponseTo`. */
export const logoutResponse = (response: Common & { readonly inResponseTo: string }): string =>
  protocolRoot(
    "LogoutResponse",
    {
      ID: response.id,
      Version: "2.0",
      IssueInstant: Xml.instant(response.issueInstant),
      Destination: response.destination,
      InResponseTo: response.inResponseTo
    },
    `${issuer(response.spEntityId)}<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>`
  )

/** The redirect-binding URL carrying `xml` to `location`, signed when `key` is given. */
export const redirectUrl = (options: {
  readonly location: string
  readonly parameter: "SAMLRequest" | "SAMLResponse"
  readonly xml: string
  readonly relayState: string | undefined
  readonly key: KeyObject | undefined
}): string => {
  const query = {
    parameter: options.parameter,
    message: encodeURIComponent(deflateRawSync(options.xml).toString("base64")),
    relayState: options.relayState === undefined ? undefined : encodeURIComponent(options.relayState)
  }
  const encoded = options.key === undefined
    ? `${query.parameter}=${query.message}${query.relayState === undefined ? "" : `&RelayState=${query.relayState}`}`
    : Signature.signRedirect(query, options.key)
  return `${options.location}${options.location.includes("?") ? "&" : "?"}${encoded}`
}

const strictBase64 = (value: string): Either.Either<Buffer, SamlRejected> => {
  const compact = value.replace(/[\r\n\t ]/g, "")
  return compact.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(compact)
    ? Either.right(Buffer.from(compact, "base64"))
    : Either.left(reject("malformed", "the message is not base64"))
}

/** The XML of a message posted as a form field. */
export const decodePosted = (value: string): Either.Either<string, SamlRejected> =>
  Either.flatMap(strictBase64(value), (bytes) =>
    bytes.length > Xml.maxMessageBytes
      ? Either.left(reject("too_large", `over ${Xml.maxMessageBytes} bytes`))
      : Either.right(bytes.toString("utf8")))

/** The XML of a redirect-binding message (raw query value), inflated with a cap against deflate bombs. */
export const decodeRedirected = (raw: string): Either.Either<string, SamlRejected> => {
  const value = Signature.decodeComponent(raw)
  if (value === undefined) return Either.left(reject("malformed", "the message is not percent-encoded"))
  return Either.flatMap(strictBase64(value), (bytes) => {
    try {
      return Either.right(inflateRawSync(bytes, { maxOutputLength: Xml.maxMessageBytes }).toString("utf8"))
    } catch (error) {
      return Either.left(
        (error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE"
          ? reject("too_large", `inflates past ${Xml.maxMessageBytes} bytes`)
          : reject("malformed", "the message does not inflate")
      )
    }
  })
}
