/**
 * How the console is served (no browser needed): the page with its Content-Security-Policy (no
 * inline script, never framed), its assets under /console/assets/ only and immutable, nothing at
 * the root, and none of it when `console.enabled` is false.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { startTestGateway } from "../support/gateway.js"

const started: Array<{ stop: () => Promise<void> }> = []
afterAll(async () => {
  await Promise.all(started.map((g) => g.stop()))
}, 30_000)
const gateway = async (consoleEnabled: boolean) => {
  const gw = await startTestGateway({ consoleEnabled })
  started.push(gw)
  return gw
}

/** From source the page is bundled on its first request (a second or more on a busy machine). */
const BUNDLING = 30_000

describe("the console's page and assets", () => {
  test("the page has a CSP without inline scripts and with frame-ancestors 'none', and references only /console/assets/", async () => {
    const gw = await gateway(true)
    const res = await fetch(`${gw.url}/console`)
    expect(res.status).toBe(200)
    const csp = res.headers.get("content-security-policy") ?? ""
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain("unsafe-inline")
    expect(csp).not.toContain("unsafe-eval")
    const html = await res.text()
    // No inline script and no reload client: every script has a src under /console/assets/.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
    expect(html).not.toContain("/_bun/")
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string).filter((r) => !r.startsWith("data:"))
    expect(refs.length).toBeGreaterThanOrEqual(2)
    for (const ref of refs) expect(ref.startsWith("/console/assets/")).toBe(true)
    // A client-side path under /console serves the same page (a reload of /console/logs).
    expect(await (await fetch(`${gw.url}/console/logs?model=x`)).text()).toBe(html)
  }, BUNDLING)

  test("assets are immutable, typed, and exist only under /console/assets/", async () => {
    const gw = await gateway(true)
    const html = await (await fetch(`${gw.url}/console`)).text()
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1] as string
    const style = /href="(\/console\/assets\/[^"]+\.css)"/.exec(html)?.[1] as string
    const js = await fetch(`${gw.url}${script}`)
    expect(js.status).toBe(200)
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    expect(js.headers.get("content-type")).toContain("javascript")
    expect((await js.text()).length).toBeGreaterThan(1000)
    expect((await fetch(`${gw.url}${style}`)).headers.get("content-type")).toContain("css")
    const name = script.slice("/console/assets/".length)
    expect((await fetch(`${gw.url}/${name}`)).status).toBe(404)
    expect((await fetch(`${gw.url}/console/assets/nope.js`)).status).toBe(404)
  }, BUNDLING)

  test("console.enabled false: no page, no assets", async () => {
    const on = await gateway(true)
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await (await fetch(`${on.url}/console`)).text())?.[1] as string
    const gw = await gateway(false)
    expect((await fetch(`${gw.url}/console`)).status).toBe(404)
    expect((await fetch(`${gw.url}/console/logs`)).status).toBe(404)
    expect((await fetch(`${gw.url}${script}`)).status).toBe(404)
    // The API is where it was.
    expect((await fetch(`${gw.url}/v1/health`)).status).toBe(200)
  }, BUNDLING)
})
