/**
 * The Search panel of the inspect dashboard: every index with its sync stats, its lag (`backlog`
 * changes not in the engine yet, the oldest `lagMs` old) and drift, the
 * failing rows, a resync (`canResyncSearch`) and a reindex with live progress (`canReindexSearch`),
 * each offered only to an operator holding its capability (the server refuses the others too).
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Search",
  module: String.raw`export default async (root, ctx) => {
  const { el } = ctx
  const indexes = el("div", { id: "search-indexes" })
  const drift = el("div", { id: "search-drift" })
  const progress = el("pre", { id: "search-progress" })
  const at = (ms) => ms ? new Date(ms).toISOString() : "—"
  const reindex = async (name) => {
    progress.textContent = "starting…"
    const response = await fetch("/_fw/inspect/plugins/" + encodeURIComponent(ctx.plugin) + "/reindex", {
      method: "POST", headers: Object.assign({ "content-type": "application/json" }, ctx.bearer()), body: JSON.stringify({ index: name })
    })
    if (!response.ok) { progress.className = "error"; progress.textContent = "HTTP " + response.status + ": " + await response.text(); return }
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    let buffered = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      buffered += decoder.decode(value, { stream: true })
      const lines = buffered.split("\n")
      buffered = lines.pop()
      for (const line of lines) {
        if (!line) continue
        const step = JSON.parse(line)
        progress.className = ""
        progress.dataset.phase = step.phase
        progress.textContent = step.index + ": " + step.phase + (step.total !== undefined ? " " + step.done + "/" + step.total : "") + (step.message ? " " + step.message : "")
      }
    }
    await refresh()
  }
  const refresh = async () => {
    const body = await ctx.pluginInspect("/indexes")
    indexes.replaceChildren(el("table", {},
      el("thead", {}, el("tr", {}, ["index", "table", "backend", "synced", "removed", "dropped", "backlog", "lag", "drift", "last reindex", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, body.indexes.map((index) => el("tr", { "data-index": index.name },
        el("td", {}, index.name), el("td", {}, index.table), el("td", {}, index.backend),
        el("td", {}, String(index.synced)), el("td", {}, String(index.removed)), el("td", {}, String(index.dropped)),
        el("td", { class: "backlog" }, String(index.backlog)),
        el("td", { class: "lag" }, index.backlog > 0 ? (index.lagMs / 1000).toFixed(1) + " s" : "—"),
        el("td", {}, index.drifted ? index.ledgerEntries + " in the ledger" + (index.unprotected > 0 ? ", " + index.unprotected + " unprotected (ledger write failed)" : "") + ", last " + at(index.lastDriftAt) : "none"),
        el("td", {}, at(index.lastReindexAt) + (index.lastReindexRows !== null ? " (" + index.lastReindexRows + " rows)" : "")),
        el("td", {}, ctx.can("canReindexSearch") ? el("button", { class: "reindex", onclick: () => reindex(index.name) }, "reindex") : ""))))))
    const failing = await ctx.pluginInspect("/drift")
    drift.replaceChildren(el("h3", {}, failing.entries.length + " drifted rows"),
      el("table", {}, el("tbody", {}, failing.entries.map((entry) => el("tr", {},
        el("td", {}, entry.index), el("td", {}, entry.rowId), el("td", {}, entry.state), el("td", {}, String(entry.attempts)),
        el("td", {}, entry.lastError || ""))))))
  }
  await refresh()
  const resync = ctx.can("canResyncSearch") ? el("button", { id: "search-resync", onclick: async () => {
    const result = await ctx.pluginInspect("/resync", { method: "POST" })
    progress.textContent = "resync: " + JSON.stringify(result)
    await refresh()
  } }, "resync drift") : ""
  root.replaceChildren(el("h2", {}, "Search"), indexes, resync, progress, drift)
}`
}
