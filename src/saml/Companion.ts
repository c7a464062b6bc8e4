/**
 * The companion cookie: the IdP's name for the browser's SAML session (NameID, its format,
 * SessionIndex), kept next to `fw:session` so `/saml/logout` can name the session in its
 * LogoutRequest. It is HMAC-signed with the session secret: a forged one could otherwise make the
 * SP sign a LogoutRequest for somebody else's IdP session.
 */
import { Option, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import type { SessionName } from "./Messages.js"

/** The companion cookie's name. */
export const cookieName = "fw_saml"

const Payload = Schema.Struct({
  nameId: Schema.String,
  nameIdFormat: Schema.NullOr(Schema.String),
  sessionIndex: Schema.NullOr(Schema.String),
  /** Expiry, epoch milliseconds. */
  exp: Schema.Number
})
const decode = Schema.decodeUnknownOption(Schema.parseJson(Payload))

const mac = (secret: string, payload: string) => createHmac("sha256", secret).update(`fw_saml.${payload}`).digest("base64url")

/** The cookie value naming `name` until `exp`. */
export const seal = (name: SessionName, exp: number, secret: string): string => {
  const payload = Buffer.from(JSON.stringify({ ...name, exp })).toString("base64url")
  return `${payload}.${mac(secret, payload)}`
}

/** The session name of a cookie value, when its signature holds and it has not expired. */
export const open = (value: string, secret: string, now: number): Option.Option<SessionName> => {
  const [payload, signature, ...rest] = value.split(".")
  if (payload === undefined || signature === undefined || rest.length > 0) return Option.none()
  const expected = Buffer.from(mac(secret, payload))
  const given = Buffer.from(signature)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return Option.none()
  return decode(Buffer.from(payload, "base64url").toString("utf8")).pipe(
    Option.filter((decoded) => decoded.exp > now),
    Option.map(({ nameId, nameIdFormat, sessionIndex }) => ({ nameId, nameIdFormat, sessionIndex }))
  )
}
