/**
 * The Flags panel of the inspect dashboard: every flag with its rollout and lifecycle report, its
 * audit trail, and a toggle with the acting admin's id, offered only to an operator holding
 * `canToggleFlag` (the server refuses the others too).
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Flags",
  module: String.raw`export default async (root, ctx) => {
  const { el } = ctx
  const canToggle = ctx.can("canToggleFlag")
  // Who acts is the signed-in operator (recorded by the server); this is only a note beside it.
  const note = el("input", { id: "flags-note", placeholder: "note (ticket, reason)" })
  const audit = el("div", { id: "flags-audit" })
  const list = el("div", { id: "flags-list" })
  const showAudit = async (flag) => {
    const body = await ctx.pluginInspect("/audit" + (flag ? "?flag=" + encodeURIComponent(flag) : ""))
    audit.replaceChildren(
      el("h3", {}, "Audit trail" + (flag ? " of " + flag : "")),
      body.note ? el("p", { class: "muted" }, body.note) : "",
      el("table", {}, el("tbody", {}, body.entries.map((entry) => el("tr", { "data-audit": entry.flag },
        el("td", {}, new Date(entry.at).toISOString()), el("td", {}, entry.flag), el("td", {}, entry.action),
        el("td", { class: "operator" }, entry.operatorId ? entry.operatorType + ":" + entry.operatorId : "—"),
        el("td", { class: "note" }, entry.note || (entry.actor ? "claimed: " + entry.actor : "")), el("td", {}, JSON.stringify(entry.before) + " → " + JSON.stringify(entry.after)))))))
  }
  const refresh = async () => {
    const body = await ctx.pluginInspect("/list")
    list.replaceChildren(el("table", {},
      el("thead", {}, el("tr", {}, ["flag", "enabled", "rollout", "variants", "lifecycle", "usage", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, body.flags.map((flag) => el("tr", { "data-flag": flag.key },
        el("td", {}, flag.key, flag.description ? el("div", { class: "muted" }, flag.description) : ""),
        el("td", { class: "enabled" }, String(flag.enabled)),
        el("td", {}, flag.rollout + "% by " + flag.rolloutBy),
        el("td", {}, flag.variants.map((v) => v.name + " " + v.weight).join(", ") || "—"),
        el("td", {}, JSON.stringify(flag.lifecycle.shape) + (flag.lifecycle.removalCandidate ? " (removal candidate)" : "")),
        el("td", {}, JSON.stringify(flag.lifecycle.usage)),
        el("td", {},
          canToggle ? el("button", { class: "toggle", onclick: async () => {
            await ctx.pluginInspect("/toggle", { method: "POST", body: JSON.stringify({ flag: flag.key, note: note.value || null }) })
            await refresh()
            await showAudit(flag.key)
          } }, flag.enabled ? "turn off" : "turn on") : "",
          el("button", { class: "audit", onclick: () => showAudit(flag.key) }, "audit")))))))
  }
  await refresh()
  root.replaceChildren(
    el("h2", {}, "Flags"),
    canToggle ? el("label", {}, "note ", note) : el("p", { class: "muted", id: "flags-read-only" }, "Toggling flags needs the canToggleFlag capability."),
    list, audit)
  await showAudit()
}`
}
