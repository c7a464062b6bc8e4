/**
 * The dashboard's Tables panel, a read-only data browser over `DataBrowser`'s routes: every app
 * table (the framework's `_fw_` tables in a collapsed group below), a table's rows a page at a
 * time (keyset cursors: first, previous and next page), a filter by field and by tenant, a sort on
 * `id` or an indexed field, a row's detail and, with the row history plugin, its versions with
 * what each one changed.
 *
 * Part of the dashboard script (`DashboardAssets.script`): it uses the script's `el` and `table`.
 * Every value is set as text (never parsed as HTML), so markup in rows shows as typed.
 */

/** The panel's source: defines `dataBrowser`, a panel `{id, title, render}`. */
export const script = String.raw`
/** A stored value as short text (JSON for objects), and its full text when shortened. */
const shown = (value) => {
  if (value === null || value === undefined) return { text: "null", full: null, empty: true }
  const text = typeof value === "string" ? value : JSON.stringify(value)
  return text.length > 80 ? { text: text.slice(0, 79) + "…", full: text } : { text, full: null }
}
const cell = (value) => {
  const { text, full, empty } = shown(value)
  return el("td", { class: empty ? "muted" : undefined, title: full || undefined }, text)
}
const captioned = (caption, headings, rows) =>
  el("table", {}, el("caption", {}, caption), el("thead", {}, el("tr", {}, headings.map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows))
const labelled = (text, control) => el("label", {}, el("span", {}, text), control)

const dataBrowser = {
  id: "tables",
  title: "Tables",
  render: async (root, ctx) => {
    const { tables, history } = await ctx.inspect("/data/tables")
    const view = el("div", { id: "data-view" })
    const list = (caption, group) => captioned(caption, ["table", "tenant field", "fields", "indexes", ""], group.map((t) =>
      el("tr", { "data-table": t.name },
        el("th", { scope: "row" }, t.name),
        el("td", {}, t.tenantField || "—"),
        el("td", {}, t.fields.map((f) => f.name + ": " + f.kind + (f.nullable ? "?" : "")).join(", ")),
        el("td", {}, t.indexes.length === 0 ? "none" : t.indexes.map((index) => index.join(" + ")).join("; ")),
        el("td", {}, el("button", { class: "browse", "aria-label": "Browse the rows of " + t.name, onclick: () => browse(t) }, "browse")))))
    const app = tables.filter((t) => t.group === "app")
    const framework = tables.filter((t) => t.group === "framework")

    const browse = (t) => {
      const state = { pages: [null], at: 0, next: null }
      const filterable = t.fields.filter((f) => f.filterable)
      const field = el("select", { id: "data-filter-field", name: "field" },
        el("option", { value: "" }, "(no filter)"), filterable.map((f) => el("option", { value: f.name }, f.name)))
      const value = el("input", { id: "data-filter-value", name: "value", autocomplete: "off" })
      const tenant = el("input", { id: "data-tenant", name: "tenant", autocomplete: "off", placeholder: "every tenant" })
      const sort = el("select", { id: "data-sort", name: "sort" }, t.fields.filter((f) => f.sortable).map((f) => el("option", { value: f.name }, f.name)))
      const dir = el("select", { id: "data-dir", name: "dir" }, el("option", { value: "asc" }, "ascending"), el("option", { value: "desc" }, "descending"))
      const limit = el("select", { id: "data-limit", name: "limit" }, [20, 50, 100, 200].map((n) => el("option", { value: n, selected: n === 50 }, String(n))))
      const status = el("p", { id: "data-status", class: "muted", role: "status" })
      const rows = el("div", { id: "data-rows" })
      const first = el("button", { id: "data-first", type: "button", onclick: () => go(0) }, "first page")
      const previous = el("button", { id: "data-previous", type: "button", onclick: () => go(state.at - 1) }, "previous page")
      const next = el("button", { id: "data-next", type: "button", onclick: () => { state.pages[state.at + 1] = state.next; go(state.at + 1) } }, "next page")
      const detail = el("section", { id: "data-detail", "aria-label": "Row detail" })

      const query = (after) => {
        const params = new URLSearchParams({ sort: sort.value, dir: dir.value, limit: limit.value })
        if (field.value && value.value !== "") params.set("where." + field.value, value.value)
        if (tenant.value.trim() !== "") params.set("tenant", tenant.value.trim())
        if (after) params.set("after", after)
        return "/data/tables/" + encodeURIComponent(t.name) + "/rows?" + params
      }
      const go = async (index) => {
        state.at = Math.max(0, index)
        status.className = "muted"; status.textContent = "loading…"
        let page
        try { page = await ctx.inspect(query(state.pages[state.at])) } catch (error) {
          status.className = "error"; status.textContent = error.tag + ": " + error.message; rows.replaceChildren(); return
        }
        state.next = page.next
        state.pages.length = state.at + 1
        first.disabled = state.at === 0; previous.disabled = state.at === 0; next.disabled = page.next === null
        status.textContent = "page " + (state.at + 1) + ": " + page.rows.length + " row" + (page.rows.length === 1 ? "" : "s") +
          " by " + page.sort + " " + (page.dir === "asc" ? "ascending" : "descending") + (page.next === null ? " (last page)" : "")
        const columns = t.fields.map((f) => f.name)
        rows.replaceChildren(captioned("Rows of " + t.name, columns, page.rows.map((row) =>
          el("tr", { "data-row": row.id },
            el("th", { scope: "row" }, el("button", { class: "open-row", "aria-label": "Show row " + row.id, onclick: () => open(row.id) }, shown(row.id).text)),
            columns.slice(1).map((name) => cell(row[name]))))))
      }

      const open = async (id) => {
        detail.replaceChildren(el("p", { class: "muted" }, "loading…"))
        let body
        try { body = await ctx.inspect("/data/tables/" + encodeURIComponent(t.name) + "/rows/" + encodeURIComponent(id)) } catch (error) {
          detail.replaceChildren(el("p", { class: "error", role: "alert" }, error.tag + ": " + error.message)); return
        }
        const heading = el("h3", { tabindex: "-1" }, "Row " + id + " of " + t.name)
        const fields = body.row === null
          ? el("p", { class: "muted" }, "The row is deleted; its versions remain.")
          : el("dl", { class: "fields" }, t.fields.flatMap((f) => [el("dt", {}, f.name),
            el("dd", {}, f.kind === "json" && body.row[f.name] !== null && body.row[f.name] !== undefined
              ? el("pre", {}, JSON.stringify(body.row[f.name], null, 2))
              : shown(body.row[f.name]).full || shown(body.row[f.name]).text)]))
        let versions
        if (!body.history) {
          versions = el("p", { class: "muted", id: "data-no-history" }, history
            ? "Framework tables keep no history."
            : "Row history is off: install rowHistoryPlugin() to keep every version of a row.")
        } else {
          const changes = (before, after) => {
            if (!after) return "deleted"
            const names = Object.keys(after).filter((name) => JSON.stringify(after[name]) !== JSON.stringify(before ? before[name] : undefined))
            return names.length === 0 ? "no field changed" : names.map((name) =>
              name + ": " + (before ? shown(before[name]).text + " → " : "") + shown(after[name]).text).join("; ")
          }
          versions = captioned(body.versions.length + " version" + (body.versions.length === 1 ? "" : "s") + ", oldest first",
            ["version", "change", "when", "by", "procedure", "what changed"],
            body.versions.map((v, i) => el("tr", { "data-version": v.version },
              el("td", {}, String(v.version)), el("td", {}, v.op), el("td", {}, new Date(v.changedAt).toISOString()),
              el("td", {}, v.subjectId || "system"), el("td", {}, v.procedure || "—"),
              el("td", { class: "changes" }, changes(i === 0 ? null : body.versions[i - 1].data, v.data)))))
        }
        detail.replaceChildren(heading, fields, el("h4", {}, "Versions"), versions)
        heading.focus()
      }

      view.replaceChildren(
        el("h3", { id: "data-table-heading" }, "Browsing " + t.name),
        el("form", { id: "data-query", class: "inline", onsubmit: (event) => { event.preventDefault(); state.pages = [null]; go(0) } },
          labelled("filter by", field), labelled("equal to", value),
          t.tenantField ? labelled("tenant", tenant) : "",
          labelled("sort by", sort), labelled("order", dir), labelled("rows per page", limit),
          el("button", { type: "submit" }, "apply")),
        status, rows, el("nav", { "aria-label": "Pages of " + t.name, class: "pager" }, first, previous, next), detail)
      go(0)
      document.getElementById("data-table-heading").scrollIntoView({ block: "nearest" })
    }

    root.replaceChildren(
      el("h2", {}, app.length + (app.length === 1 ? " app table" : " app tables")),
      list("App tables", app),
      el("details", { id: "framework-tables" }, el("summary", {}, framework.length + " framework tables (_fw_)"), list("Framework tables", framework)),
      view)
  }
}
`
