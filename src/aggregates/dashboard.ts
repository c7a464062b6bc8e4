/**
 * The aggregates panel of the inspect dashboard: every aggregate with its refresh policy in words
 * ("every hour at :00, America/New_York"), its kind and meta, and a manual refresh offered only to
 * an operator holding `canRefreshAggregate`; an aggregate opened shows its meta, its last error,
 * its rows a page at a time and, when its rows are a time series (a date column and numeric
 * columns), a line chart drawn as inline SVG from the rows (no library, nothing loaded).
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Aggregates",
  module: String.raw`const svgNs = "http://www.w3.org/2000/svg"
const svg = (tag, attributes, ...children) => {
  const node = document.createElementNS(svgNs, tag)
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, String(value))
  for (const child of children) node.append(child instanceof Node ? child : String(child))
  return node
}
const isoDate = /^\d{4}-\d{2}-\d{2}/
const when = (iso) => iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—"
const short = (n) => Math.abs(n) >= 1000 || Number.isInteger(n) ? n.toLocaleString("en-US") : n.toFixed(2)

/** The time axis and numeric series of rows, when they are a time series (else null). */
export const seriesOf = (rows) => {
  const objects = rows.filter((row) => row !== null && typeof row === "object")
  if (objects.length < 2) return null
  const fields = Object.keys(objects[0])
  const x = fields.find((f) => objects.every((row) => typeof row[f] === "string" && isoDate.test(row[f]) && Number.isFinite(Date.parse(row[f]))))
  if (x === undefined) return null
  const ys = fields.filter((f) => f !== x && objects.every((row) => row[f] === null || typeof row[f] === "number") && objects.some((row) => typeof row[f] === "number")).slice(0, 3)
  if (ys.length === 0) return null
  const points = objects.map((row) => ({ t: Date.parse(row[x]), row })).sort((a, b) => a.t - b.t)
  return { x, ys, points }
}

const colours = ["#2563eb", "#d97706", "#059669"]

/** A line chart of the series (inline SVG, labelled for screen readers). */
export const chart = (name, series) => {
  const width = 640, height = 240, left = 56, right = 16, top = 16, bottom = 36
  const { x, ys, points } = series
  const t0 = points[0].t, t1 = points[points.length - 1].t
  const values = points.flatMap((p) => ys.map((y) => p.row[y]).filter((v) => typeof v === "number"))
  const lo = Math.min(0, ...values), hi = Math.max(...values, lo + 1)
  const px = (t) => left + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (width - left - right)
  const py = (v) => top + (1 - (v - lo) / (hi - lo)) * (height - top - bottom)
  const title = name + ": " + ys.join(", ") + " by " + x
  const desc = points.length + " points from " + when(new Date(t0).toISOString()) + " to " + when(new Date(t1).toISOString()) +
    "; " + ys.map((y) => { const v = points.map((p) => p.row[y]).filter((n) => typeof n === "number"); return y + " from " + short(Math.min(...v)) + " to " + short(Math.max(...v)) + ", last " + short(v[v.length - 1]) }).join("; ")
  const ticks = [lo, (lo + hi) / 2, hi]
  const id = "chart-" + Math.random().toString(36).slice(2)
  return svg("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, width, height, role: "img", "aria-labelledby": id + "-title " + id + "-desc" },
    svg("title", { id: id + "-title" }, title), svg("desc", { id: id + "-desc" }, desc),
    ...ticks.map((v) => svg("g", {},
      svg("line", { x1: left, x2: width - right, y1: py(v), y2: py(v), stroke: "#e5e7eb" }),
      svg("text", { x: left - 6, y: py(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#6b7280" }, short(v)))),
    svg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, stroke: "#9ca3af" }),
    svg("text", { x: left, y: height - bottom + 16, "font-size": 11, fill: "#6b7280" }, when(new Date(t0).toISOString())),
    svg("text", { x: width - right, y: height - bottom + 16, "text-anchor": "end", "font-size": 11, fill: "#6b7280" }, when(new Date(t1).toISOString())),
    ...ys.map((y, i) => svg("polyline", { class: "series", "data-series": y, fill: "none", stroke: colours[i], "stroke-width": 2,
      points: points.filter((p) => typeof p.row[y] === "number").map((p) => px(p.t).toFixed(1) + "," + py(p.row[y]).toFixed(1)).join(" ") })),
    ...ys.map((y, i) => svg("text", { x: left + 8 + i * 140, y: height - 4, "font-size": 12, fill: colours[i] }, "— " + y)))
}

export default async (root, ctx) => {
  const { el } = ctx
  const list = el("div", { id: "aggregates-list" })
  const detail = el("section", { id: "aggregate-detail", "aria-label": "Aggregate" })
  const status = el("p", { id: "aggregates-status", class: "muted", role: "status" })
  const canRefresh = ctx.can("canRefreshAggregate")
  let opened = null

  const refresh = async (name) => {
    status.className = "muted"; status.textContent = "refreshing " + name + "…"
    let outcome
    try {
      const answer = await ctx.inspect("/aggregates/" + encodeURIComponent(name) + "/refresh", { method: "POST" })
      outcome = { failed: answer.outcome === "failed", text: name + ": " + answer.outcome + (answer.meta.lastError ? " — " + answer.meta.lastError : "") }
    } catch (error) {
      outcome = { failed: true, text: error.tag + ": " + error.message }
    }
    // The outcome is announced once the list and the opened aggregate show it too.
    await render()
    status.className = outcome.failed ? "error" : "muted"; status.textContent = outcome.text
  }
  const refreshButton = (a) => canRefresh
    ? el("button", { class: "refresh", "aria-label": "Refresh " + a.name + " now", onclick: () => refresh(a.name) }, "refresh now") : ""

  const open = async (a, offset) => {
    opened = { name: a.name, offset }
    const limit = 20
    const [page, sample] = await Promise.all([
      ctx.inspect("/aggregates/" + encodeURIComponent(a.name) + "/rows?limit=" + limit + "&offset=" + offset),
      ctx.inspect("/aggregates/" + encodeURIComponent(a.name) + "/rows?limit=1000")
    ])
    const meta = a.meta
    const facts = [
      ["refresh", a.description],
      ["kind", a.kind + (a.incremental ? " (" + a.incremental.op + (a.incremental.column ? " of " + a.incremental.column : "") + " over " + a.incremental.source +
        (a.incremental.groupBy.length ? " by " + a.incremental.groupBy.join(", ") : "") + ")" : "") + ", " + a.strategy + " strategy"],
      ["last refreshed", meta.refreshedAt ? when(meta.refreshedAt) + (meta.durationMs !== null ? ", in " + meta.durationMs + " ms" : "") : "never"],
      ["rows", String(meta.rowCount)],
      ["next refresh", when(meta.nextRefreshAt)],
      ["last error", meta.lastError || "none"]
    ]
    const series = seriesOf(sample.rows)
    const columns = page.rows.length > 0 && page.rows[0] !== null ? Object.keys(page.rows[0]) : []
    const heading = el("h3", { tabindex: "-1" }, a.name)
    detail.replaceChildren(
      heading,
      el("dl", { class: "fields" }, facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { class: k === "last error" && meta.lastError ? "error" : undefined, "data-fact": k }, v)])),
      refreshButton(a),
      series ? el("figure", { id: "aggregate-chart" }, chart(a.name, series), el("figcaption", { class: "muted" }, "Drawn from the first " + sample.rows.length + " rows.")) : "",
      el("table", {}, el("caption", {}, "Rows " + (page.total === 0 ? 0 : offset + 1) + "–" + (offset + page.rows.length) + " of " + page.total),
        el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col" }, c)))),
        el("tbody", {}, page.rows.map((row) => el("tr", { "data-aggregate-row": "" }, columns.map((c) => {
          const v = row[c]
          return el("td", {}, v === null || v === undefined ? "null" : typeof v === "object" ? JSON.stringify(v) : String(v))
        }))))),
      el("nav", { class: "pager", "aria-label": "Pages of " + a.name },
        el("button", { id: "aggregate-previous", disabled: offset === 0, onclick: () => open(a, Math.max(0, offset - limit)) }, "previous page"),
        el("button", { id: "aggregate-next", disabled: offset + limit >= page.total, onclick: () => open(a, offset + limit) }, "next page")))
    heading.focus()
  }

  const render = async () => {
    const { aggregates } = await ctx.inspect("/aggregates")
    list.replaceChildren(el("table", {},
      el("caption", {}, aggregates.length + (aggregates.length === 1 ? " aggregate" : " aggregates")),
      el("thead", {}, el("tr", {}, ["name", "kind", "refresh", "last refreshed", "rows", "next", "status", ""].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, aggregates.map((a) => el("tr", { "data-aggregate": a.name },
        el("th", { scope: "row" }, a.name), el("td", {}, a.kind), el("td", { class: "refresh-words" }, a.description),
        el("td", {}, when(a.meta.refreshedAt)), el("td", {}, String(a.meta.rowCount)), el("td", {}, when(a.meta.nextRefreshAt)),
        el("td", { class: a.meta.lastError ? "error" : "" }, a.meta.lastError ? "failed: " + a.meta.lastError : a.meta.refreshedAt ? "ok" : "not built yet"),
        el("td", {}, el("button", { class: "open", "aria-label": "Open " + a.name, onclick: () => open(a, 0) }, "open"), " ", refreshButton(a)))))))
    if (opened) {
      const again = aggregates.find((a) => a.name === opened.name)
      if (again) await open(again, opened.offset)
    }
  }
  root.replaceChildren(el("h2", {}, "Aggregates"), status, list, detail)
  await render()
}`
}
