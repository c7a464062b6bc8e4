/**
 * Strict XML for SAML: parsing that refuses anything a SAML message never needs (a DOCTYPE, a
 * recoverable parse error, more than 256 KiB), namespace-aware element lookups, and text reads that
 * refuse comments and processing instructions inside security-relevant values (the
 * CVE-2017-11427 family). One parsed Document serves both verification and extraction, so no
 * parser differential can show the verifier one tree and the reader another.
 */
import { Either } from "effect"
import { reject, type SamlRejected } from "./Errors.js"
import type * as Libraries from "./Libraries.js"

/** The namespaces SAML messages use. */
export const ns = {
  protocol: "urn:oasis:names:tc:SAML:2.0:protocol",
  assertion: "urn:oasis:names:tc:SAML:2.0:assertion",
  metadata: "urn:oasis:names:tc:SAML:2.0:metadata",
  dsig: "http://www.w3.org/2000/09/xmldsig#",
  xenc: "http://www.w3.org/2001/04/xmlenc#"
} as const

/** The largest message accepted, decoded. */
export const maxMessageBytes = 256 * 1024

/** Parses `xml` strictly; the Document is xmldom's, typed with the DOM lib's interfaces. */
export const parse = (libraries: Libraries.Libraries, xml: string): Either.Either<Document, SamlRejected> => {
  if (Buffer.byteLength(xml) > maxMessageBytes) return Either.left(reject("too_large", `over ${maxMessageBytes} bytes`))
  if (/<!DOCTYPE|<!ENTITY|<!ATTLIST/i.test(xml)) return Either.left(reject("dtd", "a DOCTYPE or entity declaration"))
  try {
    const document = new libraries.DOMParser({
      onError: (level, message) => {
        throw new Error(`${level}: ${message}`)
      }
    }).parseFromString(xml, "text/xml")
    // xmldom's Document implements the DOM interfaces xmldsigjs and the readers below use.
    const parsed = document as unknown as Document
    if (parsed.doctype !== null) return Either.left(reject("dtd", "a DOCTYPE"))
    if (parsed.documentElement === null) return Either.left(reject("malformed", "no root element"))
    return Either.right(parsed)
  } catch (error) {
    return Either.left(reject("malformed", error instanceof Error ? error.message.split("\n")[0]! : "not XML"))
  }
}

/** Whether `node` is the element `{namespace}local`. */
export const is = (node: Node | null, namespace: string, local: string): node is Element =>
  node !== null && node.nodeType === 1 && (node as Element).namespaceURI === namespace && (node as Element).localName === local

/** The direct children of `parent` named `{namespace}local`. */
export const children = (parent: Node, namespace: string, local: string): Array<Element> => {
  const found: Array<Element> = []
  for (let node = parent.firstChild; node !== null; node = node.nextSibling) {
    if (is(node, namespace, local)) found.push(node)
  }
  return found
}

/** The one direct child `{namespace}local`, or undefined when there is none or more than one. */
export const only = (parent: Node, namespace: string, local: string): Element | undefined => {
  const found = children(parent, namespace, local)
  return found.length === 1 ? found[0] : undefined
}

/** How many elements `{namespace}local` the whole document holds, at any depth. */
export const count = (document: Document, namespace: string, local: string): number =>
  document.getElementsByTagNameNS(namespace, local).length

/**
 * The text of `element` when it holds only text and CDATA; a comment, processing instruction or
 * child element inside it is a rejection (it could make a reader see a value the signer did not).
 */
export const text = (element: Element): Either.Either<string, SamlRejected> => {
  let value = ""
  for (let node = element.firstChild; node !== null; node = node.nextSibling) {
    if (node.nodeType !== 3 && node.nodeType !== 4) {
      return Either.left(reject("node_text", `<${element.localName}> holds something other than text`))
    }
    value += node.nodeValue ?? ""
  }
  return Either.right(value.trim())
}

/** The text of the one child `{namespace}local`, undefined when absent. */
export const childText = (parent: Node, namespace: string, local: string): Either.Either<string | undefined, SamlRejected> => {
  const element = only(parent, namespace, local)
  return element === undefined ? Either.right(undefined) : text(element)
}

/** Escapes text and attribute values of XML we write. */
export const escape = (value: string): string =>
  value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;")

/** An `xs:dateTime` as SAML writes it (UTC, millisecond precision). */
export const instant = (millis: number): string => new Date(millis).toISOString()

/** Reads an `xs:dateTime` attribute; undefined when absent, a rejection when not a date. */
export const time = (element: Element, attribute: string): Either.Either<number | undefined, SamlRejected> => {
  const value = element.getAttribute(attribute)
  if (value === null || value === "") return Either.right(undefined)
  const millis = Date.parse(value)
  return Number.isNaN(millis) ? Either.left(reject("malformed", `${attribute} is not a date`)) : Either.right(millis)
}
