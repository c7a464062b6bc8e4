/**
 * The XML libraries SAML verification needs, loaded on first use: an app that only serves
 * `/saml/metadata` (or has no SAML at all) never loads them (spec 2.7).
 *
 * `setNodeDependencies` comes from `xml-core` imported in the same module format as `xmldsigjs`;
 * importing it from elsewhere registers the parser in a second copy of the map and verification
 * fails with "Node dependency not found" (notes, auth-providers-saml §4.1).
 */
import type * as XmlDom from "@xmldom/xmldom"
import type * as XmlDsig from "xmldsigjs"
import { Effect } from "effect"
import { libraryPackages, SamlLibraryUnavailable } from "./Errors.js"

/** The loaded libraries. */
export interface Libraries {
  readonly DOMParser: typeof XmlDom.DOMParser
  readonly XMLSerializer: typeof XmlDom.XMLSerializer
  readonly xmldsig: typeof XmlDsig
}

let loading: Promise<Libraries> | undefined

const importAll = async (): Promise<Libraries> => {
  const [xmldom, xpath, xmlCore, xmldsig] = await Promise.all([
    import("@xmldom/xmldom"),
    import("xpath"),
    import("xml-core"),
    import("xmldsigjs")
  ])
  xmlCore.setNodeDependencies({
    DOMParser: xmldom.DOMParser,
    XMLSerializer: xmldom.XMLSerializer,
    DOMImplementation: xmldom.DOMImplementation,
    xpath: xpath.default ?? xpath
  })
  xmldsig.Application.setEngine("NodeJS", globalThis.crypto)
  return { DOMParser: xmldom.DOMParser, XMLSerializer: xmldom.XMLSerializer, xmldsig }
}

/** The libraries, imported once per process. */
export const load: Effect.Effect<Libraries, SamlLibraryUnavailable> = Effect.tryPromise({
  try: () => (loading ??= importAll()),
  catch: (error) => {
    loading = undefined
    return new SamlLibraryUnavailable({ detail: `loading failed: ${error instanceof Error ? error.message : String(error)}` })
  }
})

/**
 * The packages that cannot be resolved, found without loading them (for a warning at boot); empty
 * where the runtime cannot resolve a specifier without importing it.
 */
export const unresolvable = (): ReadonlyArray<string> => {
  const resolve: ((specifier: string) => string) | undefined = typeof import.meta.resolve === "function" ? import.meta.resolve : undefined
  if (resolve === undefined) return []
  return libraryPackages.filter((name) => {
    try {
      resolve(name)
      return false
    } catch {
      return true
    }
  })
}
