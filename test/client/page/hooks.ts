/**
 * The React page of the hooks test, over `@fw/framework/react`. Under `<FwProvider>` every hook
 * takes the spec's signature: the caller's flags (`useFlags()`, `useFlag(key)`, `useVariants()`,
 * `useVariant(key)`, `useFlagValue(typedFlag)`) and a search box with facets
 * (`useSearch(indexName)` → `{results, facets, run, pending}`). A second section reads the same
 * through the provider-free forms (`useFlag(api, key)`, ...), which must agree.
 */
import { createElement as h, useEffect, useState } from "react"
import { createRoot } from "react-dom/client"
import { mount } from "../../../src/client/index.js"
import {
  FwProvider,
  useFlag,
  useFlags,
  useFlagValue,
  useSearch,
  useVariant,
  useVariants
} from "../../../src/react/index.js"
import { searchErrors } from "../../../src/search/Errors.js"
import { Theme } from "../contracts.js"

const config = (globalThis as unknown as { fwPage: { url: string; token: string } }).fwPage
const fw = mount({
  apis: { main: { url: config.url, authHeaders: async () => ({ authorization: `Bearer ${config.token}` }) } },
  errors: searchErrors
})
const api = fw.apis.main

/** Every `pending`/`found` state the search box rendered, in order (read by the test). */
const seen: Array<string> = []
;(globalThis as unknown as { fwSearchStates: Array<string> }).fwSearchStates = seen

const sorted = <A>(record: Readonly<Record<string, A>>, show: (value: A) => string) =>
  Object.keys(record).sort().map((key) => `${key}=${show(record[key]!)}`).join(" ")

const FlagsView = () => {
  const flags = useFlags()
  const beta = useFlag("beta")
  const variant = useVariant("theme")
  const variants = useVariants()
  const theme = useFlagValue(Theme)
  return h(
    "section",
    null,
    h("p", { id: "flags" }, sorted(flags, String)),
    h("p", { id: "beta" }, beta ? "beta on" : "beta off"),
    h("p", { id: "variant" }, variant === undefined ? "none" : `${variant.name} ${variant.enabled ? "enabled" : "disabled"}`),
    h("p", { id: "variants" }, sorted(variants, (served) => served.name)),
    h("p", { id: "accent", style: { color: theme.accent } }, theme.accent)
  )
}

/** The provider-free forms, on the same api: one line that must match what the provider forms show. */
const ApiFirstView = () => {
  const flags = useFlags(api)
  const beta = useFlag(api, "beta")
  const variant = useVariant(api, "theme")
  const variants = useVariants(api)
  const theme = useFlagValue(api, Theme)
  return h(
    "p",
    { id: "api-first" },
    `${sorted(flags, String)} | ${beta ? "beta on" : "beta off"} | ${variant?.name ?? "none"} | ${
      sorted(variants, (served) => served.name)
    } | ${theme.accent}`
  )
}

const SearchView = () => {
  const { results, facets, run, pending, error } = useSearch("notes", { facets: ["n"] })
  const [q, setQ] = useState("")
  const status = pending ? "pending" : error?._tag ?? `found ${results.length}`
  useEffect(() => {
    seen.push(status)
  }, [status])
  const counts = Object.entries(facets.n ?? {}).map(([value, count]) => `${value}:${count}`).join(" ")
  return h(
    "section",
    null,
    h("input", { id: "q", value: q, onChange: (event: { target: { value: string } }) => setQ(event.target.value) }),
    h("button", { id: "search", onClick: () => run(q) }, "search"),
    h("button", { id: "page-2", onClick: () => run(q, { limit: 1, offset: 1 }) }, "second hit"),
    h("p", { id: "search-status" }, status),
    h("p", { id: "facets" }, counts),
    h("ul", { id: "results" }, ...results.map((doc) => h("li", { key: String(doc.id) }, String(doc.title))))
  )
}

/** The search api of the api-first form, for an index the server does not declare: the typed error lands in `error`. */
const UnknownIndexView = () => {
  const search = useSearch(api, "nope")
  return h(
    "section",
    null,
    h("button", { id: "search-nope", onClick: () => search.run("milk") }, "search nope"),
    h("p", { id: "nope-status" }, search.pending ? "pending" : search.error?._tag ?? "idle")
  )
}

const root = document.createElement("div")
document.body.append(root)
createRoot(root).render(
  h(FwProvider, { api }, h("main", null, h(FlagsView), h(ApiFirstView), h(SearchView), h(UnknownIndexView)))
)
