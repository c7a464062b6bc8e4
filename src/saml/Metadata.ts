/**
 * SAML metadata: the SP's own document (written without any XML library, so `/saml/metadata`
 * works even when the verification libraries are absent) and the reading of an IdP's document
 * (entity id, every signing certificate — several during a rotation —, SSO and SLO endpoints).
 */
import { Either } from "effect"
import { reject, type SamlRejected } from "./Errors.js"
import * as Keys from "./Keys.js"
import type * as Libraries from "./Libraries.js"
import * as Xml from "./Xml.js"

const redirectBinding = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
const postBinding = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"

/** The SP metadata document. */
export const sp = (options: {
  readonly entityId: string
  readonly acsUrl: string
  readonly sloUrl: string
  readonly signingCert: string | undefined
  readonly signsRequests: boolean
}): string => {
  const certificate = options.signingCert === undefined
    ? ""
    : `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${
      Keys.certificateBody(options.signingCert)
    }</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`
  const slo = Xml.escape(options.sloUrl)
  return `<?xml version="1.0" encoding="UTF-8"?>` +
    `<md:EntityDescriptor xmlns:md="${Xml.ns.metadata}" xmlns:ds="${Xml.ns.dsig}" entityID="${Xml.escape(options.entityId)}">` +
    `<md:SPSSODescriptor AuthnRequestsSigned="${options.signsRequests}" WantAssertionsSigned="true" ` +
    `protocolSupportEnumeration="${Xml.ns.protocol}">` +
    certificate +
    `<md:SingleLogoutService Binding="${redirectBinding}" Location="${slo}"/>` +
    `<md:SingleLogoutService Binding="${postBinding}" Location="${slo}"/>` +
    `<md:AssertionConsumerService Binding="${postBinding}" Location="${Xml.escape(options.acsUrl)}" index="0" isDefault="true"/>` +
    `</md:SPSSODescriptor></md:EntityDescriptor>`
}

/** What an IdP metadata document provides. */
export interface Idp {
  readonly entityId: string
  readonly entryPoint: string
  readonly certificates: ReadonlyArray<string>
  readonly sloUrl: string | undefined
  /** Where LogoutResponses go, when the IdP names a separate location. */
  readonly sloResponseUrl: string | undefined
}

const location = (descriptor: Element, local: string) => {
  const services = Xml.children(descriptor, Xml.ns.metadata, local)
  const service = services.find((element) => element.getAttribute("Binding") === redirectBinding)
  return service === undefined ? undefined : {
    location: service.getAttribute("Location") || undefined,
    response: service.getAttribute("ResponseLocation") || undefined
  }
}

/**
 * Reads an IdP metadata document: an EntityDescriptor, or the IdP named `entityId` inside an
 * EntitiesDescriptor. An aggregate (a federation's) with several IdPs and no `entityId` is refused:
 * trusting whichever comes first would let any of them log in as anyone.
 */
export const readIdp = (
  libraries: Libraries.Libraries,
  xml: string,
  entityId: string | undefined
): Either.Either<Idp, SamlRejected> =>
  Either.flatMap(Xml.parse(libraries, xml), (document) => {
    const root = document.documentElement!
    const entities = (Xml.is(root, Xml.ns.metadata, "EntitiesDescriptor") ? Xml.children(root, Xml.ns.metadata, "EntityDescriptor") : [root])
      .filter((entity) => Xml.is(entity, Xml.ns.metadata, "EntityDescriptor") && Xml.only(entity, Xml.ns.metadata, "IDPSSODescriptor") !== undefined)
      .filter((entity) => entityId === undefined || entity.getAttribute("entityID") === entityId)
    if (entities.length !== 1) {
      return Either.left(reject(
        "malformed",
        entities.length === 0 ? "the metadata describes no such IdP" : "the metadata describes several IdPs: set idp.entityId"
      ))
    }
    const entity = entities[0]!
    const descriptor = Xml.only(entity, Xml.ns.metadata, "IDPSSODescriptor")!
    const certificates = Xml.children(descriptor, Xml.ns.metadata, "KeyDescriptor")
      .filter((key) => (key.getAttribute("use") || "signing") === "signing")
      .flatMap((key) => Array.from(key.getElementsByTagNameNS(Xml.ns.dsig, "X509Certificate")))
      .map((certificate) => Keys.certificateBody(certificate.textContent ?? ""))
    const sso = location(descriptor, "SingleSignOnService")?.location
    const slo = location(descriptor, "SingleLogoutService")
    const id = entity.getAttribute("entityID")
    if (id === null || sso === undefined || certificates.length === 0) {
      return Either.left(reject("malformed", "the IdP metadata lacks an entityID, a redirect SSO service or a signing certificate"))
    }
    return Either.right({ entityId: id, entryPoint: sso, certificates, sloUrl: slo?.location, sloResponseUrl: slo?.response })
  })
