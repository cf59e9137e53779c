#!/usr/bin/env bun
/**
 * A mock search engine speaking the four engines the gateway calls, each under its own prefix (the
 * `search.base_url` to configure):
 *   {url}/searxng   GET  /search?q=…&format=json          → {results: [{url, title, content}]}
 *   {url}/exa       POST /search {query, numResults, includeDomains?, excludeDomains?, contents}
 *                                                          → {results: [{url, title, highlights}]}
 *   {url}/tavily    POST /search {query, max_results, include_domains?, exclude_domains?}
 *                                                          → {results: [{url, title, content}]}
 *   {url}/brave     GET  /res/v1/web/search?q=…&count=N   → {web: {results: [{url, title, description}]}}
 * The results are the same fixed pages for every query (their titles and excerpts quote it), on
 * several domains, so tests can check filters. Exa and Tavily apply their domain filters, as the
 * real engines do; SearXNG and Brave do not (they have none). A query containing FAIL answers 500;
 * on SearXNG, one containing NOTJSON answers 200 with an HTML page.
 * Every request is logged (GET /__mock/requests; POST /__mock/reset).
 *
 * CLI: bun scripts/mock-search.ts --port 9100 [--host 127.0.0.1]
 */

export interface MockSearchRequest {
  readonly engine: string
  readonly method: string
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: Record<string, string>
  readonly body: unknown
}

export interface MockSearch {
  readonly port: number
  /** The root: an engine's base_url is `${url}/<engine>`. */
  readonly url: string
  readonly requests: Array<MockSearchRequest>
  readonly stop: () => Promise<void>
}

/** The pages every search finds, in rank order. */
export const MOCK_PAGES: ReadonlyArray<{ readonly url: string; readonly title: string }> = [
  { url: "https://example.com/guide", title: "Example guide" },
  { url: "https://docs.example.com/reference", title: "Example reference" },
  { url: "https://news.other.org/story", title: "Other news story" },
  { url: "https://blog.third.net/post", title: "Third blog post" },
  { url: "https://example.com/blog/entry", title: "Example blog entry" },
  { url: "https://www.fourth.io/page", title: "Fourth page" },
  { url: "https://fifth.dev/docs", title: "Fifth docs" },
  { url: "https://sixth.co.uk/item", title: "Sixth item" },
]

const excerptOf = (query: string, rank: number) => `Excerpt ${rank + 1} about ${query}: the mock engine found this page.`

const hostOf = (url: string) => new URL(url).hostname
const inDomains = (url: string, domains: ReadonlyArray<string>) => domains.some((d) => hostOf(url) === d || hostOf(url).endsWith(`.${d}`))

/** The pages for a query, with an engine's own domain filters and count. */
const pagesFor = (include: unknown, exclude: unknown, count: number) => {
  const keep = Array.isArray(include) && include.length > 0 ? (include as Array<string>) : undefined
  const drop = Array.isArray(exclude) ? (exclude as Array<string>) : []
  return MOCK_PAGES.filter((p) => (keep === undefined || inDomains(p.url, keep)) && !inDomains(p.url, drop)).slice(0, count)
}

const json = (body: unknown, status = 200) => Response.json(body, { status })

export const startMockSearch = async (options: { readonly port?: number; readonly hostname?: string } = {}): Promise<MockSearch> => {
  const requests: Array<MockSearchRequest> = []
  const log = async (engine: string, req: Request): Promise<MockSearchRequest> => {
    const url = new URL(req.url)
    let body: unknown
    if (req.method === "POST") body = await req.json().catch(() => undefined)
    const entry = { engine, method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: Object.fromEntries(req.headers), body }
    requests.push(entry)
    return entry
  }
  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: options.hostname ?? "127.0.0.1",
    development: false,
    routes: {
      "/searxng/search": {
        GET: async (req) => {
          const { query } = await log("searxng", req)
          const q = query["q"] ?? ""
          if (query["format"] !== "json") return new Response("<html>not json</html>", { status: 403 })
          if (q.includes("FAIL")) return json({ error: "mock failure" }, 500)
          if (q.includes("NOTJSON")) return new Response("<html>a proxy's page</html>", { headers: { "content-type": "text/html" } })
          return json({ query: q, results: pagesFor(undefined, undefined, MOCK_PAGES.length).map((p, i) => ({ url: p.url, title: `${p.title}: ${q}`, content: excerptOf(q, i), engine: "mock" })) })
        },
      },
      "/exa/search": {
        POST: async (req) => {
          const { body } = await log("exa", req)
          const b = (body ?? {}) as Record<string, unknown>
          const q = String(b["query"] ?? "")
          if (q.includes("FAIL")) return json({ error: "mock failure" }, 500)
          const pages = pagesFor(b["includeDomains"], b["excludeDomains"], Number(b["numResults"] ?? 10))
          return json({ requestId: "mock", results: pages.map((p, i) => ({ id: p.url, url: p.url, title: `${p.title}: ${q}`, highlights: [excerptOf(q, i)] })) })
        },
      },
      "/tavily/search": {
        POST: async (req) => {
          const { body } = await log("tavily", req)
          const b = (body ?? {}) as Record<string, unknown>
          const q = String(b["query"] ?? "")
          if (q.includes("FAIL")) return json({ detail: { error: "mock failure" } }, 500)
          const pages = pagesFor(b["include_domains"], b["exclude_domains"], Number(b["max_results"] ?? 5))
          return json({ query: q, results: pages.map((p, i) => ({ url: p.url, title: `${p.title}: ${q}`, content: excerptOf(q, i), score: 1 - i / 10 })) })
        },
      },
      "/brave/res/v1/web/search": {
        GET: async (req) => {
          const { query } = await log("brave", req)
          const q = query["q"] ?? ""
          if (q.includes("FAIL")) return json({ error: "mock failure" }, 500)
          const pages = pagesFor(undefined, undefined, Number(query["count"] ?? 20))
          return json({ type: "search", web: { type: "search", results: pages.map((p, i) => ({ url: p.url, title: `${p.title}: ${q}`, description: `<strong>${excerptOf(q, i)}</strong>` })) } })
        },
      },
      "/__mock/requests": { GET: () => json(requests) },
      "/__mock/reset": {
        POST: () => {
          requests.length = 0
          return new Response(null, { status: 204 })
        },
      },
    },
    fetch: () => json({ error: "mock-search: no such route" }, 404),
  })
  const port = server.port ?? 0
  return {
    port,
    url: `http://${options.hostname ?? "127.0.0.1"}:${port}`,
    requests,
    stop: async () => {
      await server.stop(true)
    },
  }
}

if (import.meta.main) {
  const args = process.argv.slice(2)
  const flag = (name: string) => {
    const at = args.indexOf(name)
    return at < 0 ? undefined : args[at + 1]
  }
  const mock = await startMockSearch({ port: Number(flag("--port") ?? 9100), hostname: flag("--host") ?? "127.0.0.1" })
  console.log(`mock search engines on ${mock.url} (/searxng, /exa, /tavily, /brave)`)
}
