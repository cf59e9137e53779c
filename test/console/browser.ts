/**
 * Debian's Chromium driven by playwright-core, headless with a fresh profile (the flags the
 * console's tests are specified with). `chromiumPath` is undefined when no Chromium is
 * installed; outside CI the browser tests are then skipped with a message saying so, in CI
 * (`CI` set) they fail instead.
 */
import { existsSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Browser, chromium, type ConsoleMessage, type Page } from "playwright-core"

/** Debian's binary itself (/usr/bin/chromium is a wrapper script that adds flags of its own). */
const CANDIDATES = [process.env.CHROMIUM_PATH, "/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser"]
export const chromiumPath: string | undefined = CANDIDATES.find((p): p is string => p !== undefined && p !== "" && existsSync(p))

export const inCi = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false"

/** Whether to run the browser tests; prints why not when they are skipped. */
export const browserTestsRun = (): boolean => {
  if (chromiumPath !== undefined) return true
  if (inCi) throw new Error("Chromium is not installed and CI is set: the console's browser tests must run (apt-get install chromium)")
  console.warn("SKIPPED: the console's browser tests need Chromium (apt-get install chromium, or CHROMIUM_PATH); none found")
  return false
}

export const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
]

export const launch = (): Promise<Browser> =>
  chromium.launch({ executablePath: chromiumPath as string, headless: true, args: FLAGS })

/** A temp folder (not the repository) for the screenshots of failed tests. */
export const screenshotDir = mkdtempSync(join(tmpdir(), "console-screens-"))

/** The console errors of a page (and its uncaught exceptions), collected as they happen. */
export const collectErrors = (page: Page): Array<string> => {
  const errors: Array<string> = []
  page.on("console", (m: ConsoleMessage) => {
    if (m.type() === "error") errors.push(m.text())
  })
  page.on("pageerror", (e) => errors.push(`uncaught: ${e.message}`))
  return errors
}
