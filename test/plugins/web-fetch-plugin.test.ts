/**
 * The `web-fetch` plugin end to end: the pages the last user message links to (at
 * most 5) are fetched from a loopback page server before the model, and reach the mock upstream as
 * a system message just above that message, on the three client formats; a page that fails is named
 * with its reason; the filters and `max_uses`; private addresses refused unless the operator allows them.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile } from "../../src/config/file.js"
import { urlsIn } from "../../src/pipeline/plugins/web-fetch.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { endpoint, mockProvider, model } from "../routing/helpers.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

type Gw = InProcessGateway & { stop: () => Promise<void> }
let upstream: MockUpstream
let pages: ReturnType<typeof Bun.serve>
let base: string
let open: Gw
let closed: Gw
const served: Array<string> = []

const catalog = (allowPrivate: boolean): ConfigFile => ({
  providers: [mockProvider(upstream, "p-chat")],
  models: [model("test/chat", endpoint("p-chat", 1, 2))],
  outbound: { allow_private_addresses: allowPrivate },
})

beforeAll(async () => {
  upstream = await startMockUpstream({ tokens: 3 })
  pages = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => {
      const path = new URL(req.url).pathname
      served.push(path)
      if (path.startsWith("/page")) {
        return new Response(`<html><head><title>Page ${path}</title></head><body><article><p>The page ${path} says the answer is 42 zorkmids, which is a long enough paragraph for the reader to keep.</p></article></body></html>`, {
          headers: { "content-type": "text/html" },
        })
      }
      return new Response("gone", { status: 404 })
    },
  })
  base = `http://127.0.0.1:${pages.port}`
  open = await startInProcessGateway({ catalog: catalog(true) })
  closed = await startInProcessGateway({ catalog: catalog(false) })
})
afterAll(async () => {
  for (const g of [open, closed]) await g?.stop()
  pages?.stop(true)
  await upstream?.stop()
})
beforeEach(() => {
  upstream.requests.length = 0
  served.length = 0
})

const ask = async (g: Gw, format: Format, text: string, plugin: Record<string, unknown> = {}) => {
  const plugins = [{ id: "web-fetch", ...plugin }]
  const json = bodyIn(format, "test/chat", [{ role: "user", content: text }], { plugins })
  const res = await g.fetch(PATHS[format], { method: "POST", json, headers: { "x-service-metadata": "enabled", "anthropic-version": "2023-06-01" } })
  return { res, body: (await res.json()) as Record<string, unknown> }
}

const upstreamMessages = () => {
  const body = upstream.requests[0]?.body as { messages: Array<{ role: string; content: unknown }> }
  return body.messages.map((m) => ({ role: m.role, text: typeof m.content === "string" ? m.content : JSON.stringify(m.content) }))
}

describe("the linked pages reach the model above the last user message", () => {
  for (const format of FORMATS) {
    test(`${format}: the page's readable text in a system message just above the message`, async () => {
      const text = `Summarise ${base}/page-one please.`
      const { res } = await ask(open, format, text)
      expect(res.status).toBe(200)
      expect(served).toEqual(["/page-one"])
      const messages = upstreamMessages()
      expect(messages.at(-1)).toEqual({ role: "user", text })
      expect(messages.at(-2)?.role).toBe("system")
      const context = messages.at(-2)?.text ?? ""
      expect(context).toMatch(/^The user's message links to these pages; their content was fetched on \d{4}-\d{2}-\d{2}\./)
      expect(context).toContain(`[1] Page /page-one\nURL: ${base}/page-one\n\nThe page /page-one says the answer is 42 zorkmids`)
    })
  }

  test("a page that fails is named with its reason; the request goes on; the entry lists each page", async () => {
    const { res, body } = await ask(open, "responses", `Compare ${base}/page-a and ${base}/missing`)
    expect(res.status).toBe(200)
    const context = upstreamMessages().at(-2)?.text ?? ""
    expect(context).toContain(`[2] URL: ${base}/missing\nThe page could not be fetched: HTTP 404: Not Found`)
    const pipeline = (body["service_metadata"] as { pipeline: Array<Record<string, unknown>> }).pipeline
    expect(pipeline).toContainEqual({
      type: "plugin",
      name: "web-fetch",
      summary: "1 of 2 linked pages fetched and added to the prompt",
      data: {
        pages: [
          { url: `${base}/page-a`, status: "completed", title: "Page /page-a", http_status: 200, characters: expect.any(Number) },
          { url: `${base}/missing`, status: "failed", error: "HTTP 404: Not Found", http_status: 404 },
        ],
      },
    })
  })

  test("at most 5 URLs of the message are fetched; max_uses fewer", async () => {
    const links = Array.from({ length: 7 }, (_, i) => `${base}/page-${i}`).join(" ")
    await ask(open, "chat", `Read ${links}`)
    expect(served.sort()).toEqual(["/page-0", "/page-1", "/page-2", "/page-3", "/page-4"])
    served.length = 0
    await ask(open, "chat", `Read ${links}`, { max_uses: 2 })
    expect(served.sort()).toEqual(["/page-0", "/page-1"])
  })

  test("blocked_domains: the page is not fetched, the model told why", async () => {
    await ask(open, "responses", `Read ${base}/page-x`, { blocked_domains: ["127.0.0.1"] })
    expect(served).toHaveLength(0)
    expect(upstreamMessages().at(-2)?.text).toContain("not allowed (allowed_domains / blocked_domains)")
  })

  test("max_content_tokens cuts each page", async () => {
    await ask(open, "responses", `Read ${base}/page-long`, { max_content_tokens: 5 })
    expect(upstreamMessages().at(-2)?.text).toContain("[… truncated at 5 tokens]")
  })

  test("a key with nothing left → 402 before any page is fetched; a key with budget left fetches", async () => {
    const made = await open.fetch("/v1/keys", { method: "POST", json: { name: "spent", limit: 0 } })
    const { key } = (await made.json()) as { key: string }
    const json = { model: "test/chat", input: `read ${base}/page-a`, plugins: [{ id: "web-fetch" }] }
    const res = await open.fetch("/v1/responses", { method: "POST", key, json })
    expect(res.status).toBe(402)
    expect(served).toEqual([])
    expect(upstream.requests).toHaveLength(0)
    const funded = await open.fetch("/v1/keys", { method: "POST", json: { name: "funded", limit: 1 } })
    const ok = await open.fetch("/v1/responses", { method: "POST", key: ((await funded.json()) as { key: string }).key, json })
    expect(ok.status).toBe(200)
    expect(served).toEqual(["/page-a"])
  })

  test("no URL in the message: nothing fetched, the request as it was, an entry saying so", async () => {
    const { res, body } = await ask(open, "responses", "No links here")
    expect(res.status).toBe(200)
    expect(upstreamMessages().map((m) => m.role)).toEqual(["user"])
    expect(JSON.stringify(body["service_metadata"])).toContain("no URL in the last user message")
  })
})

describe("SSRF", () => {
  test("without outbound.allow_private_addresses a loopback page is refused: never requested, the model told", async () => {
    const { res } = await ask(closed, "responses", `Read ${base}/page-secret and http://169.254.169.254/latest/meta-data/`)
    expect(res.status).toBe(200)
    expect(served).toHaveLength(0)
    const context = upstreamMessages().at(-2)?.text ?? ""
    expect(context).toContain("private or reserved address (127.0.0.1)")
    expect(context).toContain("private or reserved address (169.254.169.254)")
    expect(context).not.toContain("42 zorkmids")
  })
})

test("URLs in text: trailing punctuation dropped, each once, in order", () => {
  expect(urlsIn("See https://a.com/x, (https://b.org/y). And https://a.com/x again; http://c.net/z!", 5)).toEqual([
    "https://a.com/x",
    "https://b.org/y",
    "http://c.net/z",
  ])
})
