/**
 * The aggregates panel of the inspect dashboard: every aggregate with its kind, refresh policy and
 * meta, and a manual refresh offered only to an operator holding `canRefreshAggregate`.
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Aggregates",
  module: String.raw`export default async (root, ctx) => {
  const { el } = ctx
  const render = async () => {
    const { aggregates } = await ctx.inspect("/aggregates")
    root.replaceChildren(el("h2", {}, aggregates.length + " aggregates"), el("table", {},
      el("thead", {}, el("tr", {}, ["name", "kind", "refresh", "refreshed", "rows", "ms", "next", "error", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, aggregates.map((a) => el("tr", { "data-aggregate": a.name },
        el("td", {}, a.name), el("td", {}, a.kind), el("td", {}, JSON.stringify(a.refresh)),
        el("td", {}, a.meta.refreshedAt || "—"), el("td", {}, String(a.meta.rowCount)), el("td", {}, String(a.meta.durationMs)),
        el("td", {}, a.meta.nextRefreshAt || "—"), el("td", { class: "error" }, a.meta.lastError || ""),
        el("td", {}, ctx.can("canRefreshAggregate") ? el("button", { class: "refresh", onclick: async () => {
          await ctx.inspect("/aggregates/" + encodeURIComponent(a.name) + "/refresh", { method: "POST" })
          await render()
        } }, "refresh") : ""))))))
  }
  await render()
}`
}
