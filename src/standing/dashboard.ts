/**
 * The standing panel of the inspect dashboard (read-only): expectations, cost budgets with their
 * breaches, and experiments with their readout.
 */
import type * as Plugin from "../app/Plugin.js"

/** The panel (plain browser JavaScript, see docs/dashboard.md). */
export const panel: Plugin.DashboardPanel = {
  title: "Standing",
  module: String.raw`export default async (root, ctx) => {
  const { el } = ctx
  const sections = [["expectations", "Expectations"], ["budgets", "Budgets"], ["breaches", "Budget breaches"], ["experiments", "Experiments"]]
  const parts = await Promise.all(sections.map(async ([path, title]) =>
    el("div", { id: "standing-" + path }, el("h3", {}, title), el("pre", {}, JSON.stringify(await ctx.pluginInspect("/" + path), null, 2)))))
  root.replaceChildren(el("h2", {}, "Standing primitives"), ...parts)
}`
}
