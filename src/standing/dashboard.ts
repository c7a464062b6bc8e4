/**
 * The Standing panel of the inspect dashboard (read-only): expectations with their status, metric
 * against threshold and the write behind the last transition; cost budgets per tenant drawn as bars
 * against the limit and the warn line; experiments with each arm's exposure, metric and lift with
 * its 95 % interval (drawn), and the sample-ratio check stated in words. Refreshed every 5 s.
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Standing",
  module: String.raw`const svgNs = "http://www.w3.org/2000/svg"
const svg = (tag, attributes, ...children) => {
  const node = document.createElementNS(svgNs, tag)
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value))
  for (const child of children) node.append(child instanceof Node ? child : String(child))
  return node
}
const at = (ms) => ms === null || ms === undefined ? "—" : new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")
const pct = (x, signed) => x === null || x === undefined ? "—" : (signed && x > 0 ? "+" : "") + (x * 100).toFixed(1) + "%"
const num = (x) => Number.isInteger(x) ? x.toLocaleString("en-US") : x.toFixed(2)
const statusBadge = { holding: "ok", ok: "ok", violated: "bad", exceeded: "bad", warn: "warn", unknown: "" }

/** A tenant's spend as a bar against the limit (solid) and the warn line (dashed). */
const budgetBar = (tenant) => {
  const width = 320, height = 18
  const scale = Math.max(tenant.limit, tenant.spent) * 1.05 || 1
  const x = (v) => (v / scale) * width
  const colour = tenant.status === "exceeded" ? "#dc2626" : tenant.status === "warn" ? "#d97706" : "#16a34a"
  const label = tenant.tenantId + ": " + num(tenant.spent) + " of " + num(tenant.limit) + (tenant.unit ? " " + tenant.unit : "") +
    (tenant.warnThreshold !== null ? ", warn at " + num(tenant.warnThreshold) : "") + ", " + tenant.status
  return svg("svg", { class: "bar", width, height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": label },
    svg("rect", { x: 0, y: 3, width, height: 12, fill: "#f3f4f6", rx: 3 }),
    svg("rect", { class: "spent", x: 0, y: 3, width: x(tenant.spent).toFixed(1), height: 12, fill: colour, rx: 3 }),
    tenant.warnThreshold !== null ? svg("line", { class: "warn-line", x1: x(tenant.warnThreshold), x2: x(tenant.warnThreshold), y1: 0, y2: height, stroke: "#92400e", "stroke-dasharray": "3 2" }) : "",
    svg("line", { class: "limit-line", x1: x(tenant.limit), x2: x(tenant.limit), y1: 0, y2: height, stroke: "#111827", "stroke-width": 2 }))
}

/** An arm's lift interval on a shared scale around 0. */
const intervalBar = (arm, span) => {
  const width = 200, height = 16, mid = width / 2
  const x = (v) => mid + (v / span) * (mid - 6)
  if (!arm.interval || arm.interval.low === null) return svg("svg", { width, height, "aria-hidden": "true" },
    svg("line", { x1: mid, x2: mid, y1: 0, y2: height, stroke: "#9ca3af" }))
  const colour = arm.interval.low > 0 ? "#16a34a" : arm.interval.high < 0 ? "#dc2626" : "#6b7280"
  return svg("svg", { width, height, "aria-hidden": "true" },
    svg("line", { x1: mid, x2: mid, y1: 0, y2: height, stroke: "#9ca3af" }),
    svg("line", { x1: x(arm.interval.low), x2: x(arm.interval.high), y1: height / 2, y2: height / 2, stroke: colour, "stroke-width": 3 }),
    svg("circle", { cx: x(arm.lift), cy: height / 2, r: 4, fill: colour }))
}

export default async (root, ctx) => {
  const { el } = ctx
  const parts = { expectations: el("section", { id: "standing-expectations", "aria-labelledby": "standing-expectations-h" }),
    budgets: el("section", { id: "standing-budgets", "aria-labelledby": "standing-budgets-h" }),
    experiments: el("section", { id: "standing-experiments", "aria-labelledby": "standing-experiments-h" }) }
  const caption = (text) => el("caption", {}, text)
  const head = (names) => el("thead", {}, el("tr", {}, names.map((h) => el("th", { scope: "col" }, h))))

  const renderExpectations = (list) => parts.expectations.replaceChildren(
    el("h3", { id: "standing-expectations-h" }, "Expectations"),
    list.length === 0 ? el("p", { class: "muted" }, "No expectations are declared.") :
    el("table", {}, caption(list.filter((e) => e.status === "violated").length + " of " + list.length + " violated"),
      head(["expectation", "status", "measured", "threshold", "since", "last transition caused by"]),
      el("tbody", {}, list.map((e) => el("tr", { "data-expectation": e.name },
        el("th", { scope: "row" }, e.name, el("div", { class: "muted" }, e.kind + " on " + e.table + ", " + e.severity)),
        el("td", {}, el("span", { class: "badge " + statusBadge[e.status], "data-status": e.status }, e.status)),
        el("td", { class: "metric" }, e.words.metric), el("td", { class: "threshold" }, e.words.threshold),
        el("td", {}, at(e.since)), el("td", { class: "cause" }, e.words.cause))))))

  const renderBudgets = (budgets) => parts.budgets.replaceChildren(
    el("h3", { id: "standing-budgets-h" }, "Cost budgets"),
    budgets.length === 0 ? el("p", { class: "muted" }, "No cost budgets are declared.") : "",
    ...budgets.map((b) => el("article", { class: "card", "data-budget": b.name },
      el("h4", {}, b.name, el("span", { class: "muted" }, " — " + num(b.limit) + (b.unit ? " " + b.unit : "") + (b.window ? " per " + b.window : " in all") +
        ", warn at " + Math.round(b.warnAt * 100) + "%, " + b.severity)),
      b.tenants.length === 0 ? el("p", { class: "muted" }, "No tenant has spent anything in this window.") :
      el("table", {}, caption(b.tenants.length + " tenant" + (b.tenants.length === 1 ? "" : "s") + " this window"),
        head(["tenant", "spent against the limit", "spent", "status"]),
        el("tbody", {}, b.tenants.map((t) => el("tr", { "data-tenant": t.tenantId },
          el("th", { scope: "row" }, t.tenantId), el("td", {}, budgetBar(t)),
          el("td", { class: "spent" }, num(t.spent) + " of " + num(t.limit) + (t.unit ? " " + t.unit : "")),
          el("td", {}, el("span", { class: "badge " + statusBadge[t.status], "data-status": t.status }, t.status),
            t.since ? el("span", { class: "muted" }, " since " + at(t.since)) : ""))))))))

  const renderExperiments = (readouts) => parts.experiments.replaceChildren(
    el("h3", { id: "standing-experiments-h" }, "Experiments"),
    readouts.length === 0 ? el("p", { class: "muted" }, "No experiments are declared.") : "",
    ...readouts.map((r) => {
      const bounds = r.variants.flatMap((a) => a.interval && a.interval.low !== null ? [Math.abs(a.interval.low), Math.abs(a.interval.high)] : [])
      const span = Math.max(0.05, ...bounds) * 1.1
      return el("article", { class: "card", "data-experiment": r.name },
        el("h4", {}, r.name, el("span", { class: "muted" }, " — " + r.words.metric + ", " + num(r.totalExposure) + " exposed units, baseline " + r.baseline)),
        el("p", { class: "srm " + (r.srm.status === "mismatch" ? "error" : "muted"), role: r.srm.status === "mismatch" ? "alert" : undefined, "data-srm": r.srm.status }, r.words.srm),
        el("table", {}, caption("Arms of " + r.name),
          head(["arm", "exposed (expected share)", "metric", "lift", "95% interval of the lift", ""]),
          el("tbody", {}, r.variants.map((a) => el("tr", { "data-arm": a.variant },
            el("th", { scope: "row" }, a.variant + (a.isBaseline ? " (baseline)" : a.isHoldout ? " (holdout)" : "")),
            el("td", {}, num(a.exposure) + " (" + (r.totalExposure ? pct(a.exposure / r.totalExposure) : "—") + " vs " + pct(a.expectedShare) + ")"),
            el("td", { class: "metric" }, a.metric === null ? "—" : r.metric === "conversionRate" ? pct(a.metric) : num(a.metric)),
            el("td", { class: "lift" }, a.isBaseline ? "—" : pct(a.lift, true)),
            el("td", { class: "interval" }, a.interval ? (a.interval.low === null ? a.interval.why : pct(a.interval.low, true) + " to " + pct(a.interval.high, true)) : "—"),
            el("td", {}, a.isBaseline ? "" : intervalBar(a, span)))))),
        r.crossovers > 0 ? el("p", { class: "muted" }, r.crossovers + " units named more than one arm and are left out.") : "")
    }))

  const refresh = async () => {
    const [expectations, budgets, experiments] = await Promise.all(["/expectations", "/budgets", "/experiments"].map((p) => ctx.pluginInspect(p)))
    renderExpectations(expectations); renderBudgets(budgets); renderExperiments(experiments)
  }
  await refresh()
  root.replaceChildren(el("h2", {}, "Standing"), parts.expectations, parts.budgets, parts.experiments)
  let stopped = false
  const timer = setInterval(() => { if (!stopped) refresh().catch(() => { stopped = true }) }, 5000)
  return () => { stopped = true; clearInterval(timer) }
}`
}
