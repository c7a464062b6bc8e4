/**
 * Headless Debian Chromium for page tests, driven by playwright-core. `.ci/run` installs it when
 * missing; where it is absent the browser suites skip with a printed reason.
 */
import { existsSync } from "node:fs"
import type { Browser } from "playwright-core"
import { chromium } from "playwright-core"

/** Where Debian installs Chromium. */
export const chromiumPath = "/usr/bin/chromium"

/** Whether Chromium is installed; prints why `what` is skipped when it is not. */
export const availableFor = (what: string): boolean => {
  const available = existsSync(chromiumPath)
  if (!available) console.warn(`[fw tests] ${chromiumPath} is not installed (apt-get install -y chromium): skipping ${what}`)
  return available
}

/** Launches headless Chromium, quiet: no GPU, no QUIC, no background traffic. */
export const launch = (): Promise<Browser> =>
  chromium.launch({
    executablePath: chromiumPath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
