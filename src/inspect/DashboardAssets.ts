/**
 * The inspect dashboard's page: one HTML shell and one script, served by the framework itself (no
 * CDN, no build step, works offline). The script holds no data: everything it shows comes from
 * the token-gated `/_fw/inspect/*` routes, called with the operator's inspect token.
 *
 * Panels are `{id, title, render(root, ctx)}`; the core ones (procedures, live subscriptions, the
 * data browser of `DataBrowserPanel`) are below, and each installed plugin with a
 * `dashboardPanel` adds its module's.
 */
import * as DataBrowserPanel from "./DataBrowserPanel.js"

/** The HTML shell. */
export const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fw dashboard</title>
<style>
  :root { font: 14px/1.4 system-ui, sans-serif; color: #1d2330; background: #f6f7f9; }
  body { margin: 0; }
  header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1rem; background: #1d2330; color: #fff; }
  header h1 { font-size: 1rem; margin: 0; }
  header nav { display: flex; gap: .25rem; flex-wrap: wrap; }
  header nav button { background: transparent; color: #cfd6e4; border: 0; padding: .3rem .6rem; border-radius: 4px; cursor: pointer; }
  header nav button[aria-selected="true"] { background: #3b4a66; color: #fff; }
  #who { margin-left: auto; color: #cfd6e4; }
  main { padding: 1rem; }
  section { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: 1rem; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #eceff3; vertical-align: top; }
  tr.selectable { cursor: pointer; } tr.selectable:hover { background: #f0f3f8; }
  textarea { width: 100%; min-height: 6rem; font: 12px ui-monospace, monospace; }
  pre { background: #f3f4f6; padding: .5rem; overflow: auto; font: 12px ui-monospace, monospace; }
  .error { color: #a4161a; }
  .muted { color: #6b7280; }
  form { display: grid; gap: .5rem; max-width: 40rem; }
  .big { font-size: 2rem; font-weight: 600; }
  caption { text-align: left; font-weight: 600; padding: .3rem 0; }
  th[scope="row"] { font-weight: normal; }
  form.inline { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: end; max-width: none; margin: .5rem 0; }
  form.inline label { display: grid; gap: .1rem; font-size: 12px; color: #4b5563; }
  details { margin: 1rem 0; } summary { cursor: pointer; font-weight: 600; }
  .pager { display: flex; gap: .5rem; margin: .5rem 0; }
  dl.fields { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; } dl.fields dt { font-weight: 600; } dl.fields dd { margin: 0; overflow-wrap: anywhere; }
  #data-detail:not(:empty) { border-top: 1px solid #dde1e8; margin-top: 1rem; padding-top: .5rem; }
  .badge { display: inline-block; font-size: 11px; font-weight: 600; padding: .05rem .45rem; margin-left: .35rem; border-radius: 999px; background: #eef1f6; color: #374151; vertical-align: middle; }
  .badge.on, .badge.ok { background: #dcfce7; color: #166534; } .badge.off { background: #f3f4f6; color: #6b7280; }
  .badge.warn { background: #fef3c7; color: #92400e; } .badge.bad { background: #fee2e2; color: #991b1b; }
  article.flag, article.card { border-top: 1px solid #eceff3; padding: .5rem 0; } article.flag h3, article.card h3 { margin: .3rem 0; }
  ol.rule { margin: .3rem 0 .5rem; }
  button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible { outline: 2px solid #2563eb; outline-offset: 1px; }
</style>
</head>
<body>
<header><h1>fw dashboard</h1><nav id="tabs"></nav><span id="who" class="muted"></span><button id="logout" hidden>forget token</button></header>
<main id="main"></main>
<script type="module" src="/_fw/dashboard/app.js"></script>
</body>
</html>
`

/** The dashboard script (plain browser JavaScript). */
export const script = String.raw`
const tokenKey = "fw:inspect-token"
const main = document.getElementById("main")
const tabs = document.getElementById("tabs")
const logout = document.getElementById("logout")
const who = document.getElementById("who")

const el = (tag, attributes, ...children) => {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes || {})) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value)
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? "" : String(value))
  }
  for (const child of children.flat()) node.append(child instanceof Node ? child : String(child))
  return node
}

class InspectError extends Error {
  constructor(status, tag, message) { super(message); this.status = status; this.tag = tag }
}

/** The operator's bearer header, when they entered a token (else the app's own session cookie speaks). */
const bearer = () => {
  const token = sessionStorage.getItem(tokenKey)
  return token ? { authorization: "Bearer " + token } : {}
}

const inspect = async (path, init) => {
  const headers = Object.assign(bearer(), init && init.body ? { "content-type": "application/json" } : {})
  const response = await fetch("/_fw/inspect" + path, Object.assign({}, init, { headers }))
  const text = await response.text()
  let body = null
  try { body = text ? JSON.parse(text) : null } catch { body = { message: text } }
  if (!response.ok) {
    throw new InspectError(response.status, body && body._tag || "Error", body && body.message || response.statusText)
  }
  return body
}

const showError = (root, error) =>
  root.replaceChildren(el("p", { class: "error", role: "alert" }, (error.tag ? error.tag + ": " : "") + error.message))

const table = (headings, rows) =>
  el("table", {}, el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))), el("tbody", {}, rows))

const procedures = {
  id: "procedures",
  title: "Procedures",
  render: async (root, ctx) => {
    const { procedures } = await ctx.inspect("/procedures")
    const tag = el("select", { id: "invoke-tag", name: "tag" }, procedures.map((p) => el("option", { value: p.tag }, p.tag)))
    const tenant = el("input", { id: "invoke-tenant", name: "tenant", placeholder: "tenant id (empty: the system, across tenants)" })
    const input = el("textarea", { id: "invoke-input", name: "input" }, "{}")
    const result = el("pre", { id: "invoke-result" })
    const canInvoke = ctx.can("canInvokeProcedure")
    const invoke = async (event) => {
      event.preventDefault()
      let parsed
      try { parsed = JSON.parse(input.value || "{}") } catch (error) {
        result.className = "error"; result.textContent = "the input is not JSON: " + error.message; return
      }
      result.className = "muted"; result.textContent = "running…"
      try {
        const body = { tag: tag.value, input: parsed }
        if (tenant.value.trim() !== "") body.tenantId = tenant.value.trim()
        const answer = await ctx.inspect("/invoke", { method: "POST", body: JSON.stringify(body) })
        result.className = ""; result.textContent = JSON.stringify(answer.result, null, 2)
      } catch (error) {
        result.className = "error"; result.textContent = error.tag + " (" + error.status + "): " + error.message
      }
    }
    const rows = procedures.map((p) => el("tr", { class: "selectable", "data-tag": p.tag, onclick: () => { tag.value = p.tag } },
      el("td", {}, p.tag), el("td", {}, p.kind), el("td", {}, String(p.guards)),
      el("td", {}, p.publicApi ? (p.publicApi.method || "") + " " + (p.publicApi.path || "(projected)") : "")))
    root.replaceChildren(
      el("h2", {}, procedures.length + " procedures"),
      table(["tag", "kind", "guards", "REST"], rows),
      ...(canInvoke ? [
        el("h3", {}, "Invoke"),
        el("form", { id: "invoke", onsubmit: invoke }, tag, tenant, input, el("button", { type: "submit" }, "Invoke")),
        result
      ] : [el("p", { class: "muted", id: "invoke-not-allowed" }, "Invoking procedures needs the canInvokeProcedure capability.")])
    )
  }
}

const live = {
  id: "live",
  title: "Live subscriptions",
  render: (root, ctx) => {
    const count = el("div", { id: "live-count", class: "big" }, "…")
    const note = el("p", { class: "muted" }, "Open live queries on this replica, refreshed every 2 s.")
    root.replaceChildren(el("h2", {}, "Live subscriptions"), count, note)
    let stopped = false
    const refresh = () => ctx.inspect("/live").then(
      (body) => { count.textContent = String(body.subscriptions) },
      (error) => { stopped = true; showError(root, error) }
    )
    refresh()
    const timer = setInterval(() => { if (!stopped) refresh() }, 2000)
    return () => { stopped = true; clearInterval(timer) }
  }
}

${DataBrowserPanel.script}
/** The panels of installed plugins, each loaded from its module (fetched with the token). */
const pluginPanels = async () => {
  const { panels } = await inspect("/dashboard/panels")
  const loaded = []
  for (const panel of panels) {
    try {
      const response = await fetch("/_fw/inspect/dashboard/panels/" + encodeURIComponent(panel.plugin), { headers: bearer() })
      if (!response.ok) throw new Error("HTTP " + response.status)
      const url = URL.createObjectURL(new Blob([await response.text()], { type: "text/javascript" }))
      const module = await import(url)
      URL.revokeObjectURL(url)
      loaded.push({ id: "plugin-" + panel.plugin, title: panel.title, plugin: panel.plugin, render: module.default })
    } catch (error) {
      loaded.push({ id: "plugin-" + panel.plugin, title: panel.title, plugin: panel.plugin,
        render: (root) => showError(root, { message: "the panel failed to load: " + error.message }) })
    }
  }
  return loaded
}

let cleanup = undefined
/** The operator, from GET /_fw/inspect/operator: {via, subject, capabilities}. */
let operator = { via: "token", subject: null, capabilities: {} }

const open = async (panels, id) => {
  if (cleanup) { try { cleanup() } catch {} cleanup = undefined }
  const panel = panels.find((p) => p.id === id) || panels[0]
  for (const button of tabs.children) button.setAttribute("aria-selected", String(button.dataset.panel === panel.id))
  const root = el("section", { id: "panel-" + panel.id, "aria-live": "polite" }, el("p", { class: "muted" }, "loading…"))
  main.replaceChildren(root)
  if (location.hash !== "#" + panel.id) history.replaceState(null, "", "#" + panel.id)
  const ctx = {
    inspect,
    el,
    plugin: panel.plugin,
    operator,
    bearer,
    can: (capability) => operator.capabilities[capability] === true,
    pluginInspect: (path, init) => inspect("/plugins/" + panel.plugin + path, init)
  }
  try {
    const result = await panel.render(root, ctx)
    if (typeof result === "function") cleanup = result
  } catch (error) {
    showError(root, error)
  }
}

const login = (message) => {
  tabs.replaceChildren()
  logout.hidden = true
  who.textContent = ""
  const token = el("input", { id: "token", type: "password", autocomplete: "off", placeholder: "inspect token (FW_INSPECT_TOKEN) or an operator's bearer token" })
  main.replaceChildren(el("section", {},
    el("h2", {}, "Inspect token"),
    message ? el("p", { class: "error", role: "alert" }, message) : "",
    el("form", { id: "login", onsubmit: (event) => {
      event.preventDefault()
      sessionStorage.setItem(tokenKey, token.value)
      start()
    } }, token, el("button", { type: "submit" }, "Open"))))
  token.focus()
}

const start = async () => {
  const token = sessionStorage.getItem(tokenKey)
  let panels
  try {
    // Without a token, an operator signed in to the app (a session with fw:inspect) gets in as is.
    operator = await inspect("/operator")
    panels = [procedures, live, dataBrowser, ...(await pluginPanels())]
  } catch (error) {
    if (token && (error.status === 401 || error.status === 403)) sessionStorage.removeItem(tokenKey)
    if (!token && (error.status === 401 || error.status === 403 || error.status === 404)) return login()
    return error.status === 401 || error.status === 403 ? login("that token was refused") : showError(main, error)
  }
  logout.hidden = !token
  who.textContent = operator.subject ? operator.subject.type + " " + operator.subject.id + " (" + operator.via + ")" : ""
  tabs.replaceChildren(...panels.map((panel) =>
    el("button", { "data-panel": panel.id, onclick: () => open(panels, panel.id) }, panel.title)))
  open(panels, location.hash.slice(1))
}

logout.addEventListener("click", () => { sessionStorage.removeItem(tokenKey); login() })
start()
`
