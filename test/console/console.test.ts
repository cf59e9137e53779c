/**
 * The web console in a real browser (Debian's Chromium through playwright-core, headless, a fresh
 * profile per test): each page signs in, renders from data the test made through the API, and
 * logs no console error. A failing test leaves a screenshot of its page in a temp folder (its path
 * is in the failure). With CONSOLE_SCREENSHOTS=1 the Activity and Logs tests also write the
 * README's screenshots (docs/console-activity.png, docs/console-logs.png).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { join } from "node:path"
import { Effect } from "effect"
import type { Browser, Page } from "playwright-core"
import { type GenerationEntry, newGenerationId } from "../../src/domain/generations.js"
import { Auth } from "../../src/services/Auth.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { Users } from "../../src/services/Users.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { generationEntry } from "../support/generations.js"
import { browserTestsRun, collectErrors, launch, screenshotDir } from "./browser.js"

const run = browserTestsRun()
const writeReadmeShots = process.env.CONSOLE_SCREENSHOTS === "1"
const DOCS = join(import.meta.dir, "..", "..", "docs")

let gw: TestGateway & { stop: () => Promise<void> }
let browser: Browser
/** The admin's identity (its key hash, user and default workspace). */
let admin: { hash: string; userId: string; workspaceId: string }

const json = async <T>(res: Response, status = 200): Promise<T> => {
  const text = await res.text()
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${text}`)
  return JSON.parse(text) as T
}
const createKey = async (name: string, extra: Record<string, unknown> = {}) =>
  json<{ key: string; data: { hash: string } }>(await gw.fetch("/v1/keys", { method: "POST", json: { name, ...extra } }), 201)
/** A model request through the API; its generation id and cost. */
const ask = async (input: string, key = gw.adminKey, model = "demo/echo") => {
  const res = await gw.fetch("/v1/responses", { method: "POST", key, json: { model, input } })
  const body = await json<{ usage: { cost: number } }>(res)
  return { id: res.headers.get("x-generation-id") as string, cost: body.usage.cost }
}

/** A month of varied usage through the real ledger commit, for the charts (ids at their creation times). */
const seedHistory = async () => {
  const keys = [admin.hash, ...(await Promise.all(["ci-bot", "batch-jobs"].map(async (n) => (await createKey(n)).data.hash)))]
  const models = [
    ["demo/echo", "fake"],
    ["demo/fallback", "fake-backup"],
    ["demo/slow", "fake"],
  ] as const
  const entries: Array<GenerationEntry> = []
  for (let day = 1; day <= 21; day++) {
    for (let i = 0; i < 6 + ((day * 7) % 9); i++) {
      const [model, provider] = models[(day + i) % models.length] as (typeof models)[number]
      const at = new Date(Date.now() - day * 86_400_000 + i * 60_000).toISOString()
      const failed = (day + i) % 11 === 0
      entries.push(
        generationEntry({
          id: newGenerationId(Date.parse(at)),
          keyHash: keys[i % keys.length] as string,
          userId: admin.userId,
          workspaceId: admin.workspaceId,
          model,
          providerName: provider,
          createdAt: at,
          inputTokens: 200 + ((day * 37 + i * 11) % 900),
          outputTokens: 50 + ((day * 13 + i * 7) % 400),
          totalCost: (0.002 + ((day * 3 + i) % 10) * 0.0011) * (model === "demo/slow" ? 0.5 : 1),
          latencyMs: 120 + ((day * 97 + i * 31) % 1800),
          status: failed ? "failed" : "completed",
          error: failed ? { message: "upstream unavailable", status: (day + i) % 2 === 0 ? 503 : 429, providerName: provider } : null,
        }),
      )
    }
  }
  await gw.server.runtime.runPromise(Effect.flatMap(GenerationStore, (g) => Effect.all(entries.map((e) => g.recordDurable(e)), { concurrency: "unbounded" })))
}

beforeAll(async () => {
  if (!run) return
  // Destinations may send to the loopback receiver of the "Send test" test.
  gw = await startTestGateway({ allowPrivateAddresses: true })
  const p = await gw.server.runtime.runPromise(Effect.flatMap(Auth, (a) => a.authenticateSecret(gw.adminKey)).pipe(Effect.orDie))
  admin = { hash: p.hash, userId: p.userId, workspaceId: p.workspaceId }
  await seedHistory()
  // The page is bundled on its first request when run from source: once here, not inside a test's time.
  await (await fetch(`${gw.url}/console`)).text()
  browser = await launch()
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await gw?.stop()
}, 30_000)

interface Opened {
  readonly page: Page
  readonly errors: Array<string>
}

/**
 * A fresh context (its own session storage) at the viewport, signed in with `key` unless null;
 * on failure a screenshot of the page is written to the temp folder and named in the error.
 * Every test ends with no console error but those it expects (`allowed`).
 */
const withPage = async (
  name: string,
  key: string | null,
  body: (o: Opened) => Promise<void>,
  options: { viewport?: { width: number; height: number }; allowed?: ReadonlyArray<RegExp> } = {},
) => {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 800 } })
  const page = await context.newPage()
  page.setDefaultTimeout(10_000)
  const errors = collectErrors(page)
  try {
    if (key !== null) await signIn(page, key)
    await body({ page, errors })
    const unexpected = errors.filter((e) => !(options.allowed ?? []).some((r) => r.test(e)))
    expect(unexpected).toEqual([])
  } catch (e) {
    const shot = join(screenshotDir, `${name.replace(/\W+/g, "-")}.png`)
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {})
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n(screenshot: ${shot})`)
  } finally {
    await context.close()
  }
}

const signIn = async (page: Page, key: string) => {
  await page.goto(`${gw.url}/console`)
  await page.getByLabel("API key").fill(key)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

const openPage = async (page: Page, name: string) => {
  await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name, exact: true }).click()
  await page.getByRole("heading", { level: 1, name }).waitFor()
}

/** A browser test's time: a page or two on a machine shared with other work. */
const SLOW = 60_000

const PAGE_NAMES = ["Activity", "Logs", "Keys", "Workspaces", "Presets", "Destinations", "Models", "Playground"]

describe.skipIf(!run)("console: sign-in", () => {
  test("a wrong key is refused next to the API key field; the right one opens every page of the navigation", async () => {
    await withPage(
      "sign-in",
      null,
      async ({ page }) => {
        await page.goto(`${gw.url}/console`)
        await page.getByLabel("API key").fill("sk-not-a-key")
        await page.getByRole("button", { name: "Sign in" }).click()
        await expect(page.locator(".field.invalid .field-error").textContent()).resolves.toMatch(/key/i)
        await page.getByLabel("API key").fill(gw.adminKey)
        await page.getByRole("button", { name: "Sign in" }).click()
        const nav = page.getByRole("navigation", { name: "Console" })
        await nav.waitFor()
        expect(await nav.getByRole("link").allTextContents()).toEqual(PAGE_NAMES)
      },
      { allowed: [/status of 401/] },
    )
  }, SLOW)

  test("the key is never in the URL or the page's HTML, and Sign out forgets it", async () => {
    await withPage("sign-out", gw.adminKey, async ({ page }) => {
      for (const name of PAGE_NAMES) {
        await openPage(page, name)
        expect(page.url()).not.toContain(gw.adminKey)
        expect(await page.content()).not.toContain(gw.adminKey)
      }
      expect(await page.evaluate(() => document.cookie)).toBe("")
      await page.getByRole("button", { name: "Sign out" }).click()
      await page.getByLabel("API key").waitFor()
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
      await page.reload()
      await page.getByLabel("API key").waitFor()
    })
  }, SLOW)

  test("keyboard only: the key typed, Enter signs in, Tab reaches a navigation link and Enter opens it", async () => {
    await withPage("keyboard", null, async ({ page }) => {
      await page.goto(`${gw.url}/console`)
      await page.getByLabel("API key").focus()
      await page.keyboard.type(gw.adminKey)
      await page.keyboard.press("Enter")
      await page.getByRole("button", { name: "Sign out" }).waitFor()
      // Tab from the top of the page until the Logs link has the focus.
      for (let i = 0; i < 10; i++) {
        await page.keyboard.press("Tab")
        if ((await page.evaluate(() => document.activeElement?.textContent)) === "Logs") break
      }
      await page.keyboard.press("Enter")
      await page.getByRole("heading", { level: 1, name: "Logs" }).waitFor()
    })
  }, SLOW)
})

describe.skipIf(!run)("console: Activity", () => {
  test("spend, requests and tokens per day, by model, provider and key, errors by status, from the rollup", async () => {
    await ask("activity check")
    await withPage("activity", gw.adminKey, async ({ page }) => {
      await openPage(page, "Activity")
      await page.getByRole("heading", { name: "By model" }).waitFor()
      expect(await page.locator(".chart").count()).toBe(3)
      expect(await page.locator(".uplot").count()).toBe(3)
      const byModel = await page.locator("section", { hasText: "By model" }).locator("tbody tr").allTextContents()
      expect(byModel.some((r) => r.includes("demo/echo"))).toBe(true)
      const byKey = await page.locator("section", { hasText: "By key" }).locator("tbody").textContent()
      expect(byKey).toContain("ci-bot")
      const errors = await page.locator("section", { hasText: "Errors by status" }).locator("tbody").textContent()
      expect(errors).toContain("503")
      expect(await page.locator("section", { hasText: "By provider" }).locator("tbody").textContent()).toContain("ms")
      // The range picker and the workspace picker change what is read.
      await page.getByLabel("Time range").selectOption("7")
      await page.waitForURL(/days=7/)
      await page.getByRole("heading", { name: "By model" }).waitFor()
      expect(await page.getByLabel("Workspace").locator("option").count()).toBeGreaterThan(1)
      if (writeReadmeShots) {
        await page.getByLabel("Time range").selectOption("30")
        await page.getByRole("heading", { name: "By model" }).waitFor()
        await page.screenshot({ path: join(DOCS, "console-activity.png"), fullPage: true })
      }
    })
  }, SLOW)

  test("at 390x844 the page fits the width and the navigation stays reachable", async () => {
    await withPage(
      "activity-narrow",
      gw.adminKey,
      async ({ page }) => {
        await openPage(page, "Activity")
        await page.getByRole("heading", { name: "By model" }).waitFor()
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
        await openPage(page, "Logs")
        await page.locator("table.logs").waitFor()
        expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
      },
      { viewport: { width: 390, height: 844 } },
    )
  }, SLOW)
})

describe.skipIf(!run)("console: Logs", () => {
  test("a request sent in the test appears with its cost, and its detail opens", async () => {
    const sent = await ask("logs check: the quick brown fox")
    const detail = await json<{ data: { total_cost: number } }>(await gw.fetch(`/v1/generation?id=${sent.id}`))
    await withPage("logs", gw.adminKey, async ({ page }) => {
      await openPage(page, "Logs")
      const row = page.locator("tbody tr").first()
      await row.waitFor()
      const text = await row.textContent()
      expect(text).toContain("demo/echo")
      expect(text).toContain(`$${detail.data.total_cost.toPrecision(3)}`)
      if (writeReadmeShots) await page.screenshot({ path: join(DOCS, "console-logs.png") })
      await page.getByRole("link", { name: `Open ${sent.id}` }).click()
      await page.getByRole("heading", { name: `Generation ${sent.id}` }).waitFor()
      await page.getByRole("heading", { name: "Cost breakdown" }).waitFor()
      expect(await page.locator("section", { hasText: "Timings" }).textContent()).toContain("ms")
    })
  }, SLOW)

  test("filters narrow the list, and the next page follows the cursor", async () => {
    await withPage("logs-filters", gw.adminKey, async ({ page }) => {
      await openPage(page, "Logs")
      await page.getByLabel("Model").fill("demo/slow")
      await page.getByRole("button", { name: "Apply filters" }).click()
      await page.waitForURL(/model=demo%2Fslow/)
      await page.locator("tbody tr").first().waitFor()
      const models = await page.locator("tbody tr td:nth-child(2)").allTextContents()
      expect(models.length).toBeGreaterThan(0)
      expect(new Set(models)).toEqual(new Set(["demo/slow"]))
      const first = await page.locator("tbody tr").first().textContent()
      await page.getByRole("button", { name: "Next page" }).click()
      await page.waitForURL(/cursor=gen-/)
      // The URL changes before the next page's rows replace this one's: wait for them, not for any row.
      await page.waitForFunction((before) => document.querySelector("tbody tr")?.textContent !== before, first)
      const next = await page.locator("tbody tr").first().textContent()
      expect(next).not.toBe(first)
      expect(next).toContain("demo/slow")
      await page.getByLabel("Min cost (USD)").fill("-3")
      await page.getByRole("button", { name: "Apply filters" }).click()
      await expect(page.locator(".field.invalid label").textContent()).resolves.toBe("Min cost (USD)")
    }, { allowed: [/status of 400/] })
  }, SLOW)

  test("an inference key sees its own logs only; naming another key is refused and the page says so", async () => {
    const mine = await createKey("viewer")
    const theirs = await createKey("someone-else")
    const own = await ask("mine", mine.key)
    const other = await ask("not yours", theirs.key)
    const refused = await gw.fetch(`/v1/generations?api_key_hash=${theirs.data.hash}`, { key: mine.key })
    expect(refused.status).toBe(403)
    await withPage(
      "logs-inference",
      mine.key,
      async ({ page }) => {
        await openPage(page, "Logs")
        await page.getByRole("link", { name: `Open ${own.id}` }).waitFor()
        expect(await page.getByRole("link", { name: `Open ${other.id}` }).count()).toBe(0)
        await page.getByLabel("Key hash").fill(theirs.data.hash)
        await page.getByRole("button", { name: "Apply filters" }).click()
        const error = page.locator(".field.invalid .field-error")
        await error.waitFor()
        expect(await error.textContent()).toContain("cannot see this key's logs")
      },
      { allowed: [/status of 403/] },
    )
  }, SLOW)
})

describe.skipIf(!run)("console: Keys", () => {
  test("a key created through the API is listed; one created here shows its secret once; limit, delete with confirmation", async () => {
    await createKey("made-by-api", { limit: 5 })
    await withPage("keys", gw.adminKey, async ({ page }) => {
      await openPage(page, "Keys")
      const listed = page.getByRole("listitem", { name: "Key made-by-api" })
      await listed.waitFor()
      expect(await listed.textContent()).toContain("$5.00")
      await page.getByRole("form", { name: "Create a key" }).getByLabel("Name").fill("made-in-console")
      await page.getByRole("button", { name: "Create key" }).click()
      const secret = page.locator(".secret-value")
      await secret.waitFor()
      expect(await secret.textContent()).toMatch(/^sk-/)
      await page.getByRole("button", { name: "Copy key" }).waitFor()
      const row = page.getByRole("listitem", { name: "Key made-in-console" })
      await row.getByRole("button", { name: "Edit limit" }).click()
      await row.getByLabel("Spend limit (USD)").fill("-1")
      await row.getByRole("button", { name: "Save limit" }).click()
      await expect(row.locator(".field.invalid label").textContent()).resolves.toBe("Spend limit (USD)")
      await row.getByLabel("Spend limit (USD)").fill("12")
      await row.getByLabel("Limit resets").selectOption("monthly")
      await row.getByRole("button", { name: "Save limit" }).click()
      await row.locator(".row-facts", { hasText: "$12.00 monthly" }).waitFor()
      // The request rate limit: a bad interval is named next to its field, a good one is saved.
      await row.getByRole("button", { name: "Edit limit" }).click()
      await row.getByLabel("Rate limit (requests)").fill("30")
      await row.getByLabel("Per interval").fill("5 minutes")
      await row.getByRole("button", { name: "Save limit" }).click()
      await expect(row.locator(".field.invalid label").first().textContent()).resolves.toBe("Per interval")
      await row.getByLabel("Per interval").fill("1m")
      await row.getByRole("button", { name: "Save limit" }).click()
      await row.locator(".row-facts", { hasText: "Rate 30 per 1m" }).waitFor()
      await row.getByRole("button", { name: "Delete" }).click()
      await row.getByRole("button", { name: "Delete made-in-console" }).click()
      await row.waitFor({ state: "detached" })
    }, { allowed: [/status of 400/] })
  }, SLOW)
})

describe.skipIf(!run)("console: Workspaces", () => {
  test("create (a bad slug named next to its field), edit its settings, add and remove a member", async () => {
    // A user to add: users exist once they have a workspace.
    await gw.server.runtime.runPromise(Effect.flatMap(Users, (u) => u.ensure("user_colleague")))
    await withPage("workspaces", gw.adminKey, async ({ page }) => {
      await openPage(page, "Workspaces")
      const form = page.getByRole("form", { name: "Create a workspace" })
      await form.getByLabel("Name").fill("Research")
      await form.getByLabel("Slug").fill("Not A Slug")
      await form.getByRole("button", { name: "Create workspace" }).click()
      await expect(form.locator(".field.invalid label").textContent()).resolves.toBe("Slug")
      await form.getByLabel("Slug").fill("research")
      await form.getByRole("button", { name: "Create workspace" }).click()
      const settings = page.getByRole("form", { name: "Settings of Research" })
      await settings.waitFor()
      await settings.getByLabel("Description").fill("Experiments")
      await settings.getByRole("button", { name: "Save settings" }).click()
      await settings.getByText("Saved").waitFor()
      await page.getByLabel("User id").fill("user_colleague")
      await page.getByRole("button", { name: "Add member" }).click()
      await page.getByRole("button", { name: "Remove user_colleague" }).click()
      await page.getByRole("button", { name: "Remove user_colleague" }).waitFor({ state: "detached" })
      const listed = await json<{ data: Array<{ slug: string; description: string }> }>(await gw.fetch("/v1/workspaces"))
      expect(listed.data.find((w) => w.slug === "research")?.description).toBe("Experiments")
    }, { allowed: [/status of 400/] })
  }, SLOW)
})

describe.skipIf(!run)("console: Presets", () => {
  test("versions made through the API are listed and diffed side by side; a new version is created here", async () => {
    for (const temperature of [0.2, 0.9]) {
      const res = await gw.fetch("/v1/presets/support-bot/responses", { method: "POST", json: { model: "demo/echo", instructions: "Be brief.", temperature } })
      expect(res.ok).toBe(true)
    }
    await withPage("presets", gw.adminKey, async ({ page }) => {
      await openPage(page, "Presets")
      await page.getByRole("link", { name: "Versions of support-bot" }).click()
      const diff = page.locator("table.diff")
      await diff.waitFor()
      expect(await diff.locator("td.removed").allTextContents()).toContainEqual(expect.stringContaining("0.2"))
      expect(await diff.locator("td.added").allTextContents()).toContainEqual(expect.stringContaining("0.9"))
      const form = page.getByRole("form", { name: "New preset version" })
      await form.getByLabel("Preset slug").fill("support-bot")
      await form.getByRole("button", { name: "Create version" }).click()
      await form.getByText("Created version 3").waitFor()
    })
  }, SLOW)

  test("a preset of more than 100 versions diffs its newest two (the list is read page by page)", async () => {
    for (let i = 1; i <= 102; i++) {
      const res = await gw.fetch("/v1/presets/many-versions/responses", { method: "POST", json: { model: "demo/echo", instructions: `Version ${i}.` } })
      expect(res.ok).toBe(true)
    }
    await withPage("presets", gw.adminKey, async ({ page }) => {
      await openPage(page, "Presets")
      await page.getByRole("link", { name: "Versions of many-versions" }).click()
      const diff = page.locator("table.diff")
      await diff.waitFor()
      expect(await diff.locator("td.removed").allTextContents()).toContainEqual(expect.stringContaining("Version 101."))
      expect(await diff.locator("td.added").allTextContents()).toContainEqual(expect.stringContaining("Version 102."))
    })
  }, SLOW)
})

describe.skipIf(!run)("console: Destinations", () => {
  test("a destination made through the API is listed with its delivery status, and Send test reaches the loopback receiver", async () => {
    const received: Array<string> = []
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (req) => {
        received.push(await req.text())
        return new Response("ok")
      },
    })
    try {
      const made = await gw.fetch("/v1/observability/destinations", {
        method: "POST",
        json: { name: "local-hook", type: "webhook", config: { url: `http://127.0.0.1:${receiver.port}/hook`, headers: { Authorization: "Bearer secret-1234567890" } } },
      })
      expect(made.ok).toBe(true)
      const destinationId = ((await made.json()) as { data: { id: string } }).data.id
      await withPage("destinations", gw.adminKey, async ({ page }) => {
        await openPage(page, "Destinations")
        const row = page.getByRole("listitem", { name: "Destination local-hook" })
        await row.waitFor()
        expect(await row.textContent()).toContain("Pending")
        await row.getByRole("button", { name: "Send test" }).click()
        await row.getByText(/Test delivered/).waitFor()
        expect(received.length).toBeGreaterThan(0)
        // Edited in the console: the stored header shows masked, a line added beside it keeps it.
        await row.getByRole("link", { name: "Edit local-hook" }).click()
        const headers = page.getByLabel("headers (optional)")
        await headers.waitFor()
        expect(await headers.inputValue()).toBe("Authorization: ****7890")
        await headers.fill(`${await headers.inputValue()}\nX-Extra: 1`)
        await page.getByRole("button", { name: "Save destination" }).click()
        // The form goes back to "Create" only once the save has answered; the row itself never left the page.
        await page.getByRole("heading", { name: "Create a destination" }).waitFor()
        const stored = (await (await gw.fetch(`/v1/observability/destinations/${destinationId}`)).json()) as { data: { config: { headers: Record<string, string> } } }
        expect(stored.data.config.headers).toEqual({ Authorization: "****7890", "X-Extra": "****" })
        // Every kind's form comes from the server's schemas: an S3 destination asks for its bucket, its secret write-only.
        await page.getByLabel("Kind").selectOption("s3")
        await page.getByLabel("bucketName").waitFor()
        expect(await page.getByLabel("secretAccessKey").getAttribute("type")).toBe("password")
      })
    } finally {
      await receiver.stop(true)
    }
  }, SLOW)
})

describe.skipIf(!run)("console: Models", () => {
  test("the catalog with prices and context lengths, and an endpoint's live health", async () => {
    await withPage("models", gw.adminKey, async ({ page }) => {
      await openPage(page, "Models")
      await page.getByRole("cell", { name: /demo\/echo/ }).first().waitFor()
      await page.getByRole("button", { name: "Show endpoints of demo/echo" }).click()
      const endpoints = page.locator("section", { hasText: "Endpoints of demo/echo" })
      await endpoints.locator("tbody tr").first().waitFor()
      const text = await endpoints.locator("tbody").textContent()
      expect(text).toContain("fake")
      expect(text).toContain("answering")
      expect(text).toContain("128,000")
    })
  }, SLOW)
})

describe.skipIf(!run)("console: Playground", () => {
  test("the answer streams in token by token, then usage, cost and its log entry", async () => {
    await withPage("playground", gw.adminKey, async ({ page }) => {
      await openPage(page, "Playground")
      await page.getByLabel("Model").selectOption("demo/slow")
      await page.getByLabel("Message").fill("alpha beta gamma delta")
      // Every text the answer shows, recorded as it changes.
      await page.evaluate(() => {
        const seen: Array<string> = []
        ;(window as unknown as { seen: Array<string> }).seen = seen
        const out = document.querySelector("output.answer") as HTMLElement
        new MutationObserver(() => seen.push(out.textContent ?? "")).observe(out, { childList: true, characterData: true, subtree: true })
      })
      await page.getByRole("button", { name: "Send" }).click()
      await page.getByText(/completion tokens/).waitFor({ timeout: 15_000 })
      expect(await page.locator("output.answer").textContent()).toContain("delta")
      const seen = await page.evaluate(() => (window as unknown as { seen: Array<string> }).seen)
      const partial = seen.filter((t) => t.includes("alpha") && !t.includes("delta"))
      expect(partial.length).toBeGreaterThan(0)
      expect(await page.locator(".usage").textContent()).toContain("cost $")
      await page.getByRole("link", { name: "Open its log entry" }).click()
      await page.getByRole("heading", { name: /^Generation gen-/ }).waitFor()
      expect(await page.locator("section", { hasText: "Generation gen-" }).first().textContent()).toContain("demo/slow")
    })
  }, SLOW)
})
