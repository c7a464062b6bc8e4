/**
 * Screenshots of the dashboard for docs/dashboard.md, taken by the browser tests at the moment a
 * panel shows what it is tested for. Written to docs/screenshots/ only when `FW_SCREENSHOTS` is set
 * (`npm run screenshots`): otherwise every test run would rewrite tracked images that differ only
 * in the timestamps they show.
 */
import { mkdirSync } from "node:fs"
import type { Page } from "playwright-core"

/** Where the screenshots go. */
export const folder = new URL("../../docs/screenshots/", import.meta.url).pathname

/** Writes `name`.png of the whole page when screenshots are asked for. */
export const take = async (page: Page, name: string): Promise<void> => {
  if (process.env.FW_SCREENSHOTS === undefined || process.env.FW_SCREENSHOTS === "") return
  mkdirSync(folder, { recursive: true })
  await page.screenshot({ path: `${folder}${name}.png`, fullPage: true })
}
