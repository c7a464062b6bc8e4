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

/**
 * Element count and depth limits: a bound on the work one message can cause (canonicalization is
 * linear in the elements of the signed subtree, about a tenth of a millisecond each). A typical
 * response has tens to a few hundred elements, but a real IdP's group attribute can carry thousands
 * of values (about 4,100 group ids in some 200 KB), and within `maxMessageBytes` the shortest
 * plausible values (`<AttributeValue>g1</AttributeValue>`, 35 bytes) come to about 7,500 elements:
 * the limit sits just above that. Empty elements (`<a/>`, 4 bytes) could pack 65,000 into the
 * same bytes; they stop here, and a forged signature stops before any canonicalization of the
 * assertion (`Signature.verifyEnveloped` checks the SignatureValue over SignedInfo first).
 */
export const maxElements = 8192
export const maxDepth = 48

const tooComplex = reject("too_large", `over ${maxElements} elements or ${maxDepth} levels`)

/** Whether the document stays within the limits (walked without recursion). */
const withinLimits = (root: Element): boolean => {
  let elements = 0
  const stack: Array<readonly [Node, number]> = [[root, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (++elements > maxElements || depth > maxDepth) return false
    for (let child = node.firstChild; child !== null; child = child.nextSibling) {
      if (child.nodeType === 1) stack.push([child, depth + 1])
    }
  }
  return true
}

/** Parses `xml` strictly; the Document is xmldom's, typed with the DOM lib's interfaces. */
export const parse = (libraries: Libraries.Libraries, xml: string): Either.Either<Document, SamlRejected> => {
  if (Buffer.byteLength(xml) > maxMessageBytes) return Either.left(reject("too_large", `over ${maxMessageBytes} bytes`))
  if (/<!DOCTYPE|<!ENTITY|<!ATTLIST/i.test(xml)) return Either.left(reject("dtd", "a DOCTYPE or entity declaration"))
  // xmldom rewrites these as line feeds (XML 1.1 line-end handling, not XML 1.0): a value ending
  // in one would then be trimmed, and an IdP's XML 1.0 signer digests them as they are anyway.
  if (/[\u0085\u2028\u2029]/.test(xml)) return Either.left(reject("malformed", "U+0085, U+2028 or U+2029, which the parser would rewrite"))
  let tags = 0
  for (let i = xml.indexOf("<"); i !== -1; i = xml.indexOf("<", i + 1)) {
    if (++tags > 2 * maxElements + 16) return Either.left(tooComplex)
  }
  let parsed: Document
  try {
    const document = new libraries.DOMParser({
      onError: (level, message) => {
        throw new Error(`${level}: ${message}`)
      }
    }).parseFromString(xml, "text/xml")
    // xmldom's Document implements the DOM interfaces xmldsigjs and the readers below use.
    parsed = document as unknown as Document
  } catch {
    // The parser's own words stay out of the answer: they can quote the input (or a plaintext).
    return Either.left(reject("malformed", "not well-formed XML"))
  }
  if (parsed.doctype !== null) return Either.left(reject("dtd", "a DOCTYPE"))
  if (parsed.documentElement === null) return Either.left(reject("malformed", "no root element"))
  return withinLimits(parsed.documentElement) ? Either.right(parsed) : Either.left(tooComplex)
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

const isXmlSpace = (code: number) => code === 0x20 || code === 0x09 || code === 0x0d || code === 0x0a

/**
 * Strips XML whitespace (space, tab, CR, LF: XML 1.0 production S) from both ends, and nothing
 * else. `String.prototype.trim` would also strip U+00A0, U+2000–U+200A, U+3000, U+2028/9 and
 * U+FEFF, which XML counts as content: a NameID `alice@example.test\u00a0` that the IdP keeps apart
 * from `alice@example.test` would then log in as her.
 */
export const trimXmlSpace = (value: string): string => {
  // A loop, not a regex: `/[ \t\r\n]+$/` backtracks quadratically over a long inner run of spaces.
  let start = 0
  let end = value.length
  while (start < end && isXmlSpace(value.charCodeAt(start))) start++
  while (end > start && isXmlSpace(value.charCodeAt(end - 1))) end--
  return value.slice(start, end)
}


/**
 * The text of `element` when it holds only text and CDATA, with XML whitespace (only) trimmed; a
 * comment, processing instruction or child element inside it is a rejection (it could make a
 * reader see a value the signer did not).
 */
export const text = (element: Element): Either.Either<string, SamlRejected> => {
  let value = ""
  for (let node = element.firstChild; node !== null; node = node.nextSibling) {
    if (node.nodeType !== 3 && node.nodeType !== 4) {
      return Either.left(reject("node_text", `<${element.localName}> holds something other than text`))
    }
    value += node.nodeValue ?? ""
  }
  return Either.right(trimXmlSpace(value))
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

const dateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/**
 * Reads an `xs:dateTime` attribute with an explicit zone (`Z` or an offset), as SAML requires;
 * undefined when absent, a rejection for anything else (`Date.parse` alone would read "2026" or a
 * zone-less time in the server's local zone).
 */
export const time = (element: Element, attribute: string): Either.Either<number | undefined, SamlRejected> => {
  const value = element.getAttribute(attribute)
  if (value === null || value === "") return Either.right(undefined)
  const millis = dateTime.test(value) ? Date.parse(value) : Number.NaN
  return Number.isNaN(millis) ? Either.left(reject("malformed", `${attribute} is not an xs:dateTime with a zone`)) : Either.right(millis)
}
