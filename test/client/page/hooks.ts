/**
 * The React page of the hooks test: the caller's flags (`useFlag`, `useVariant`, `useFlagValue`)
 * and a search box with facets (`useSearch`), over `@fw/framework/react`.
 */
import { createElement as h, useState } from "react"
import { createRoot } from "react-dom/client"
import { mount } from "../../../src/client/index.js"
import { useFlag, useFlagValue, useSearch, useVariant } from "../../../src/react/index.js"
import { searchErrors } from "../../../src/search/Errors.js"
import { Theme } from "../contracts.js"

const config = (globalThis as unknown as { fwPage: { url: string; token: string } }).fwPage
const fw = mount({
  apis: { main: { url: config.url, authHeaders: async () => ({ authorization: `Bearer ${config.token}` }) } },
  errors: searchErrors
})
const api = fw.apis.main

const FlagsView = () => {
  const beta = useFlag(api, "beta")
  const variant = useVariant(api, "theme")
  const theme = useFlagValue(api, Theme)
  return h(
    "section",
    null,
    h("p", { id: "beta" }, beta ? "beta on" : "beta off"),
    h("p", { id: "variant" }, variant?.name ?? "none"),
    h("p", { id: "accent", style: { color: theme.accent } }, theme.accent)
  )
}

const SearchView = () => {
  const search = useSearch(api, "notes", { facets: ["n"] })
  const [q, setQ] = useState("")
  const facets = Object.entries(search.facets.n ?? {}).map(([value, count]) => `${value}:${count}`).join(" ")
  return h(
    "section",
    null,
    h("input", { id: "q", value: q, onChange: (event: { target: { value: string } }) => setQ(event.target.value) }),
    h("button", { id: "search", onClick: () => search.run(q) }, "search"),
    h("p", { id: "search-status" }, search.pending ? "pending" : search.error?._tag ?? `found ${search.found}`),
    h("p", { id: "facets" }, facets),
    h("ul", { id: "results" }, ...search.results.map((doc) => h("li", { key: String(doc.id) }, String(doc.title))))
  )
}

const root = document.createElement("div")
document.body.append(root)
createRoot(root).render(h("main", null, h(FlagsView), h(SearchView)))
