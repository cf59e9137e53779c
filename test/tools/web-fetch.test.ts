/**
 * The web_fetch server tool against a page server on loopback: HTML becomes
 * markdown, a PDF its text, plain text stays; the model's `{url, title, content, status,
 * retrieved_at}` / `{url, status: "failed", error}` and the client's item with `httpStatus`;
 * max_content_tokens, the domain filters, max_uses; the SSRF rules when private addresses are not
 * allowed (127.0.0.1, 10.x, 169.254.169.254, a redirect to loopback, a name resolving to loopback).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { PDFDocument, StandardFonts } from "pdf-lib"
import { demoCatalog, type Settings, testSettings } from "../../src/config/Config.js"
import { serverToolOf } from "../../src/tools/index.js"
import type { ServerToolContext } from "../../src/tools/types.js"
import { webFetchParametersProblem, webFetchTool } from "../../src/tools/web-fetch.js"

const ARTICLE = `<html><head><title>Zorkmid report</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Zorkmid report</h1>
<p>The quarterly revenue was <b>42 zorkmids</b>, up from last year. ${"The market grew steadily across every region. ".repeat(20)}</p>
<ul><li>First point</li><li>Second point</li></ul></article>
<footer>Copyright footer</footer></body></html>`

let pages: ReturnType<typeof Bun.serve>
let base: string
let pdf: Uint8Array
const hits: Array<string> = []

beforeAll(async () => {
  const doc = await PDFDocument.create()
  const font = await doc.embedFont(StandardFonts.Helvetica)
  doc.addPage().drawText("The PDF says 17 zorkmids.", { x: 50, y: 700, font, size: 12 })
  pdf = await doc.save()
  pages = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => {
      const path = new URL(req.url).pathname
      hits.push(path)
      switch (path) {
        case "/article":
          return new Response(ARTICLE, { headers: { "content-type": "text/html; charset=utf-8" } })
        case "/report.pdf":
          return new Response(Buffer.from(pdf), { headers: { "content-type": "application/pdf" } })
        case "/notes.txt":
          return new Response("plain notes: 7 zorkmids\nsecond line", { headers: { "content-type": "text/plain" } })
        case "/image.png":
          return new Response(new Uint8Array([137, 80, 78, 71]), { headers: { "content-type": "image/png" } })
        case "/moved":
          return new Response(null, { status: 302, headers: { location: "/notes.txt" } })
        case "/long.txt":
          return new Response("word ".repeat(5000), { headers: { "content-type": "text/plain" } })
        default:
          return new Response("nothing here", { status: 404 })
      }
    },
  })
  base = `http://127.0.0.1:${pages.port}`
})
afterAll(() => {
  pages?.stop(true)
})

const allowing = testSettings({ catalog: { ...demoCatalog, outbound: { allow_private_addresses: true } } })
const denying = testSettings()

const ctxOf = (settings: Settings, callsSoFar = 0): ServerToolContext => ({ settings, signal: new AbortController().signal, workspaceId: "ws", callsSoFar })

const fetchOf = (url: string, parameters: Record<string, unknown> = {}, settings = allowing, callsSoFar = 0) =>
  webFetchTool.run({ url }, parameters, ctxOf(settings, callsSoFar))

interface ModelPage {
  readonly url: string
  readonly status: string
  readonly title?: string
  readonly content?: string
  readonly retrieved_at?: string
  readonly error?: string
}
const modelPage = (output: string) => JSON.parse(output) as ModelPage

test("openrouter:web_fetch is registered as the function web_fetch, available without config", () => {
  expect(serverToolOf("openrouter:web_fetch")?.name).toBe("web_fetch")
  expect(webFetchTool.unavailable(testSettings())).toBeUndefined()
})

describe("conversions", () => {
  test("HTML becomes readable markdown: the article kept, navigation and footer dropped", async () => {
    const result = await fetchOf(`${base}/article`)
    const page = modelPage(result.modelOutput)
    expect(page.status).toBe("completed")
    expect(page.url).toBe(`${base}/article`)
    expect(page.title).toBe("Zorkmid report")
    expect(page.content).toContain("The quarterly revenue was **42 zorkmids**")
    expect(page.content).toMatch(/^-\s+First point$/m)
    expect(page.content).not.toContain("Copyright footer")
    expect(Number.isNaN(Date.parse(page.retrieved_at ?? ""))).toBe(false)
    expect(result.item).toMatchObject({ type: "openrouter:web_fetch", status: "completed", url: `${base}/article`, title: "Zorkmid report", httpStatus: 200 })
    expect(result.fetches).toBe(1)
    expect(result.citable).toEqual([{ url: `${base}/article`, title: "Zorkmid report" }])
  })

  test("a PDF is read through the file parser", async () => {
    const page = modelPage((await fetchOf(`${base}/report.pdf`)).modelOutput)
    expect(page.status).toBe("completed")
    expect(page.content).toContain("The PDF says 17 zorkmids.")
    expect(page.title).toBe("report.pdf")
  })

  test("plain text stays as it is; a redirect on the same (allowed) host is followed", async () => {
    expect(modelPage((await fetchOf(`${base}/notes.txt`)).modelOutput).content).toBe("plain notes: 7 zorkmids\nsecond line")
    expect(modelPage((await fetchOf(`${base}/moved`)).modelOutput).content).toBe("plain notes: 7 zorkmids\nsecond line")
  })

  test("HTTP 404 is a failed result with the status; the item carries httpStatus", async () => {
    const result = await fetchOf(`${base}/missing`)
    expect(modelPage(result.modelOutput)).toEqual({ url: `${base}/missing`, status: "failed", error: "HTTP 404: Not Found" })
    expect(result.item).toEqual({ type: "openrouter:web_fetch", status: "incomplete", url: `${base}/missing`, error: "HTTP 404: Not Found", httpStatus: 404 })
  })

  test("a URL that is not http(s) is a failed result, nothing fetched", async () => {
    expect(modelPage((await fetchOf("file:///etc/passwd")).modelOutput).error).toBe("not a valid http(s) URL")
    expect(modelPage((await fetchOf("not a url")).modelOutput).error).toBe("not a valid http(s) URL")
  })

  test("a content type the gateway cannot read is a failed result naming it", async () => {
    expect(modelPage((await fetchOf(`${base}/image.png`)).modelOutput).error).toBe("unsupported content type image/png")
  })

  test("max_content_tokens cuts the content (o200k tokens)", async () => {
    const page = modelPage((await fetchOf(`${base}/long.txt`, { max_content_tokens: 50 })).modelOutput)
    expect(page.content).toContain("[… truncated at 50 tokens]")
    expect((page.content ?? "").length).toBeLessThan(400)
    // Under the cap: untouched.
    expect(modelPage((await fetchOf(`${base}/notes.txt`, { max_content_tokens: 50 })).modelOutput).content).toBe("plain notes: 7 zorkmids\nsecond line")
  })
})

describe("the request's parameters", () => {
  test("blocked_domains: refused before any request", async () => {
    const before = hits.length
    const page = modelPage((await fetchOf(`${base}/article`, { blocked_domains: ["127.0.0.1"] })).modelOutput)
    expect(page.status).toBe("failed")
    expect(page.error).toContain("allowed_domains / blocked_domains")
    expect(hits.length).toBe(before)
  })

  test("allowed_domains: another domain is refused, a listed one fetched", async () => {
    expect(modelPage((await fetchOf(`${base}/article`, { allowed_domains: ["example.com"] })).modelOutput).status).toBe("failed")
    expect(modelPage((await fetchOf(`${base}/article`, { allowed_domains: ["127.0.0.1"] })).modelOutput).status).toBe("completed")
  })

  test("max_uses: the call past it is a failed result", async () => {
    const page = modelPage((await fetchOf(`${base}/article`, { max_uses: 1 }, allowing, 1)).modelOutput)
    expect(page.error).toContain("max_uses 1")
  })

  test("a bad parameter is named with its rule", () => {
    expect(webFetchParametersProblem({ max_content_tokens: 0 })).toBe("max_content_tokens: an integer from 1 to 1000000")
    expect(webFetchParametersProblem({ engine: "exa" })).toContain("engine")
    expect(webFetchParametersProblem({ max_uses: 3, blocked_domains: ["x.com"] })).toBeUndefined()
  })
})

describe("SSRF: private addresses refused unless outbound.allow_private_addresses", () => {
  const refused = async (url: string) => {
    const page = modelPage((await fetchOf(url, {}, denying)).modelOutput)
    expect(page.status).toBe("failed")
    return page.error ?? ""
  }

  test("127.0.0.1 (the page server itself) is refused, and it sees no request", async () => {
    const before = hits.length
    expect(await refused(`${base}/article`)).toContain("private or reserved address (127.0.0.1)")
    expect(hits.length).toBe(before)
  })

  test("10.x and the metadata address 169.254.169.254", async () => {
    expect(await refused("http://10.1.2.3/")).toContain("10.1.2.3")
    expect(await refused("http://169.254.169.254/latest/meta-data/")).toContain("169.254.169.254")
  })

  test("a name resolving to loopback (localhost)", async () => {
    expect(await refused(`http://localhost:${pages.port}/article`)).toMatch(/private or reserved address \((127\.0\.0\.1|::1)\)/)
  })

  test("a redirect to loopback is refused at the hop", async () => {
    // The first hop is a public address; the network is replaced so no real connection is made.
    const real = globalThis.fetch
    const calls: Array<string> = []
    globalThis.fetch = (async (input: string | URL | Request) => {
      calls.push(String(input))
      return new Response(null, { status: 302, headers: { location: `${base}/article` } })
    }) as typeof fetch
    try {
      expect(await refused("http://93.184.216.34/start")).toContain("127.0.0.1")
      expect(calls).toEqual(["http://93.184.216.34/start"])
    } finally {
      globalThis.fetch = real
    }
  })

  test("allowed: the same loopback page is fetched", async () => {
    expect(modelPage((await fetchOf(`${base}/article`, {}, allowing)).modelOutput).status).toBe("completed")
  })
})
