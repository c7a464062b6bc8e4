/**
 * The Flags panel of the inspect dashboard: every flag with its rule in words (enabled, schedule,
 * targeting, rollout, variants with their weights), its lifecycle and usage labels with what they
 * mean for this flag (why it is a removal candidate, and what to do), refused overrides with their
 * reason, the audit trail with the operator the server authenticated (the page only adds a note),
 * and a toggle offered only to an operator holding `canToggleFlag` (the server refuses the others too).
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Flags",
  module: String.raw`export default async (root, ctx) => {
  const { el } = ctx
  const canToggle = ctx.can("canToggleFlag")
  const operator = ctx.operator.subject ? ctx.operator.subject.type + ":" + ctx.operator.subject.id : "you"
  // Who acts is the signed-in operator (recorded by the server); this is only a note beside it.
  const note = el("input", { id: "flags-note", autocomplete: "off", placeholder: "ticket, reason" })
  const audit = el("section", { id: "flags-audit", "aria-label": "Audit trail" })
  const list = el("div", { id: "flags-list" })
  const refused = el("div", { id: "flags-refused" })
  const status = el("p", { id: "flags-status", class: "muted", role: "status" })
  const at = (ms) => new Date(ms).toISOString().replace(".000Z", "Z")
  /** A value as words: an override's fields as "enabled = true, rollout = 50" rather than JSON. */
  const text = (value) => value === null || value === undefined ? "none"
    : Array.isArray(value) ? JSON.stringify(value)
    : typeof value === "object" ? Object.entries(value).map(([k, v]) => k + " = " + (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))).join(", ") || "none"
    : String(value)
  /** What one audit row changed: "enabled: false → true". */
  const changed = (before, after) => {
    const names = [...new Set([...Object.keys(before || {}), ...Object.keys(after || {})])]
      .filter((name) => JSON.stringify((before || {})[name]) !== JSON.stringify((after || {})[name]))
    return names.length === 0 ? "no change" : names.map((name) => name + ": " + text((before || {})[name]) + " → " + text((after || {})[name])).join("; ")
  }
  const showAudit = async (flag) => {
    const body = await ctx.pluginInspect("/audit" + (flag ? "?flag=" + encodeURIComponent(flag) : ""))
    audit.replaceChildren(
      el("h3", {}, "Audit trail" + (flag ? " of " + flag : ", every flag")),
      body.note ? el("p", { class: "muted" }, body.note) : "",
      body.entries.length === 0 ? el("p", { class: "muted" }, "No changes recorded.") :
      el("table", {}, el("caption", {}, body.entries.length + " change" + (body.entries.length === 1 ? "" : "s") + ", newest first"),
        el("thead", {}, el("tr", {}, ["when", "flag", "action", "operator", "note", "what changed"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, body.entries.map((entry) => el("tr", { "data-audit": entry.flag },
          el("td", {}, at(entry.at)), el("td", {}, entry.flag), el("td", {}, entry.action),
          el("td", { class: "operator" }, entry.operatorId ? entry.operatorType + ":" + entry.operatorId : "unknown (recorded before operators were)"),
          el("td", { class: "note" }, entry.note || (entry.actor ? "typed name: " + entry.actor : "")),
          el("td", { class: "changes" }, changed(entry.before, entry.after)))))))
  }
  const toggle = async (flag) => {
    status.className = "muted"; status.textContent = "turning " + flag.key + (flag.enabled ? " off…" : " on…")
    try {
      await ctx.pluginInspect("/toggle", { method: "POST", body: JSON.stringify({ flag: flag.key, note: note.value || null }) })
      status.textContent = flag.key + " is now " + (flag.enabled ? "off" : "on") + " (recorded as " + operator + ")"
    } catch (error) {
      status.className = "error"; status.textContent = error.tag + ": " + error.message
    }
    await refresh()
    await showAudit(flag.key)
  }
  const refresh = async () => {
    const body = await ctx.pluginInspect("/list")
    list.replaceChildren(...body.flags.map((flag) => {
      const id = "flag-" + flag.key.replace(/[^A-Za-z0-9_-]/g, "_")
      return el("article", { class: "flag", "data-flag": flag.key, "aria-labelledby": id },
        el("h3", { id }, flag.key, " ", el("span", { class: "badge " + (flag.enabled ? "on" : "off"), "data-enabled": String(flag.enabled) }, flag.enabled ? "enabled" : "disabled"),
          " ", el("span", { class: "badge" }, flag.words.shape.label), " ", el("span", { class: "badge" }, flag.words.usage.label),
          flag.lifecycle.removalCandidate ? el("span", { class: "badge warn" }, "removal candidate") : ""),
        flag.description ? el("p", { class: "description" }, flag.description) : "",
        el("ol", { class: "rule", "aria-label": "How " + flag.key + " is evaluated" }, flag.words.rule.map((step) => el("li", {}, step))),
        el("dl", { class: "fields lifecycle" },
          el("dt", {}, "lifecycle"), el("dd", { class: "shape" }, flag.words.shape.meaning),
          el("dt", {}, "usage"), el("dd", { class: "usage" }, flag.words.usage.meaning),
          flag.words.removal ? [el("dt", {}, "removal candidate"), el("dd", { class: "removal" }, flag.words.removal)] : []),
        el("p", {},
          canToggle ? el("button", { class: "toggle", "aria-label": (flag.enabled ? "Turn off " : "Turn on ") + flag.key, onclick: () => toggle(flag) }, flag.enabled ? "turn off" : "turn on") : "",
          " ", el("button", { class: "audit", "aria-label": "Show the audit trail of " + flag.key, onclick: () => showAudit(flag.key) }, "audit trail")))
    }))
    refused.replaceChildren(...(body.refusals.length === 0 ? [] : [
      el("h3", {}, "Refused overrides"),
      el("ul", {}, body.refusals.map((r) => el("li", { "data-refused": r.flag }, r.flag + " (" + at(r.at) + ", " + (r.source === "stored" ? "a stored override, when read" : "when set") + "): " + r.reason)))]))
  }
  await refresh()
  root.replaceChildren(
    el("h2", {}, "Flags"),
    canToggle
      ? el("p", {}, el("label", { for: "flags-note" }, "Note for the audit trail "), note, el("span", { class: "muted" }, " — changes are recorded as " + operator))
      : el("p", { class: "muted", id: "flags-read-only" }, "Toggling flags needs the canToggleFlag capability."),
    status, refused, list, audit)
  await showAudit()
}`
}
