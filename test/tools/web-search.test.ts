/**
 * The web_search server tool against the mock search engine: each engine's request
 * shape and auth header, the domain filters (the engine's own where it has them, the gateway's
 * otherwise), the limits of a request, the model's text and the client's item, the cost; the
 * `search` config's rules; no `search` config → unavailable.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import { MOCK_PAGES, type MockSearch, startMockSearch } from "../../scripts/mock-search.js"
import { demoCatalog, GatewayConfig, parseConfigFile, type Settings, searchSettingsOf, testSettings } from "../../src/config/Config.js"
import type { SearchConfig } from "../../src/config/file.js"
import { serverToolOf } from "../../src/tools/index.js"
import type { ServerToolContext } from "../../src/tools/types.js"
import { webSearchParametersProblem, webSearchTool } from "../../src/tools/web-search.js"
import { SEARCH_NOT_CONFIGURED } from "../../src/lib/search/index.js"

let mock: MockSearch

beforeAll(async () => {
  mock = await startMockSearch()
})
afterAll(async () => {
  await mock?.stop()
})
beforeEach(() => {
  mock.requests.length = 0
})

const settingsFor = (engine: SearchConfig["engine"], extra: Partial<SearchConfig> = {}): Settings =>
  testSettings({ search: searchSettingsOf({ engine, base_url: `${mock.url}/${engine}`, pricing: { request: 0.004 }, ...extra }, "sk-search-secret") })

const ctxOf = (settings: Settings, callsSoFar = 0): ServerToolContext => ({
  settings,
  signal: new AbortController().signal,
  workspaceId: "ws",
  callsSoFar,
})

const search = (engine: SearchConfig["engine"], parameters: Record<string, unknown> = {}, query = "zorkmid prices", callsSoFar = 0) =>
  webSearchTool.run({ query }, parameters, ctxOf(settingsFor(engine), callsSoFar))

interface SearchItem {
  readonly type: string
  readonly status: string
  readonly action: { readonly type: string; readonly query: string; readonly sources: ReadonlyArray<{ readonly type: string; readonly url: string }> }
}
/** The JSON body the engine received in its i-th request. */
const bodyAt = (i: number) => (mock.requests[i]?.body ?? {}) as Record<string, unknown>
const sourcesOf = (item: unknown) => (item as SearchItem).action.sources.map((s) => s.url)

describe("registry and availability", () => {
  test("openrouter:web_search is registered as the function web_search", () => {
    expect(serverToolOf("openrouter:web_search")?.name).toBe("web_search")
  })

  test("without `search` in config the tool is unavailable with the issue's sentence", () => {
    expect(webSearchTool.unavailable(testSettings())).toBe(SEARCH_NOT_CONFIGURED)
    expect(SEARCH_NOT_CONFIGURED).toBe("web search is not configured on this gateway")
    expect(webSearchTool.unavailable(settingsFor("searxng"))).toBeUndefined()
  })
})

describe("each engine's request and auth", () => {
  test("searxng: GET {base_url}/search?q=…&format=json, bearer key", async () => {
    const result = await search("searxng")
    const seen = mock.requests[0]
    expect(seen?.method).toBe("GET")
    expect(seen?.path).toBe("/searxng/search")
    expect(seen?.query).toEqual({ q: "zorkmid prices", format: "json" })
    expect(seen?.headers["authorization"]).toBe("Bearer sk-search-secret")
    // SearXNG has no count: the gateway keeps max_results (default 5).
    expect(sourcesOf(result.item)).toEqual(MOCK_PAGES.slice(0, 5).map((p) => p.url))
  })

  test("exa: POST {base_url}/search with x-api-key, numResults and highlights", async () => {
    const result = await search("exa", { max_results: 3, max_characters: 120 })
    const seen = mock.requests[0]
    expect(seen?.method).toBe("POST")
    expect(seen?.path).toBe("/exa/search")
    expect(seen?.headers["x-api-key"]).toBe("sk-search-secret")
    expect(seen?.body).toEqual({ query: "zorkmid prices", numResults: 3, contents: { highlights: { maxCharacters: 120 } } })
    expect(sourcesOf(result.item)).toHaveLength(3)
  })

  test("tavily: POST {base_url}/search with a bearer key, max_results and search_depth", async () => {
    await search("tavily", { max_results: 4, search_context_size: "high" })
    const seen = mock.requests[0]
    expect(seen?.path).toBe("/tavily/search")
    expect(seen?.headers["authorization"]).toBe("Bearer sk-search-secret")
    expect(seen?.body).toEqual({ query: "zorkmid prices", max_results: 4, search_depth: "advanced" })
  })

  test("brave: GET {base_url}/res/v1/web/search?q=…&count=N with X-Subscription-Token; <strong> marks dropped", async () => {
    const result = await search("brave", { max_results: 2 })
    const seen = mock.requests[0]
    expect(seen?.path).toBe("/brave/res/v1/web/search")
    expect(seen?.query).toEqual({ q: "zorkmid prices", count: "2" })
    expect(seen?.headers["x-subscription-token"]).toBe("sk-search-secret")
    expect(result.modelOutput).not.toContain("<strong>")
    expect(result.modelOutput).toContain("Excerpt 1 about zorkmid prices")
  })
})

describe("what the model and the client get", () => {
  test("the model reads title, URL and excerpt of each result; the item is the SDK's openrouter:web_search", async () => {
    const result = await search("tavily", { max_results: 2 })
    expect(result.modelOutput).toContain("[1] Example guide: zorkmid prices\nURL: https://example.com/guide\nExcerpt 1 about zorkmid prices")
    expect(result.modelOutput).toContain("[2] Example reference: zorkmid prices\nURL: https://docs.example.com/reference")
    expect(result.item).toEqual({
      type: "openrouter:web_search",
      status: "completed",
      action: {
        type: "search",
        query: "zorkmid prices",
        sources: [
          { type: "url", url: "https://example.com/guide" },
          { type: "url", url: "https://docs.example.com/reference" },
        ],
      },
    })
    expect(result.citable).toEqual([
      { url: "https://example.com/guide", title: "Example guide: zorkmid prices" },
      { url: "https://docs.example.com/reference", title: "Example reference: zorkmid prices" },
    ])
  })

  test("cost is search.pricing.request per search, with the counts and the engine", async () => {
    const result = await search("exa", { max_results: 3 })
    expect(result.cost).toBe(0.004)
    expect(result.searchRequests).toBe(1)
    expect(result.searchResults).toBe(3)
    expect(result.searchEngine).toBe("exa")
  })

  test("an engine that fails is a failed result the model reads, not charged", async () => {
    const result = await search("searxng", {}, "please FAIL")
    expect(result.modelOutput).toContain("Web search failed: the search engine (searxng) answered HTTP 500")
    expect((result.item as unknown as SearchItem).status).toBe("incomplete")
    expect(result.cost).toBe(0)
  })

  test("an engine's 200 that is not JSON is said so (not 'could not be reached'), not charged", async () => {
    const result = await search("searxng", {}, "please NOTJSON")
    expect(result.modelOutput).toContain("Web search failed: the search engine (searxng) answered a body that is not JSON")
    expect(result.cost).toBe(0)
  })

  test("a hit's title is cut at 300 characters (the mock's titles quote the query)", async () => {
    const result = await search("searxng", {}, "z".repeat(5_000))
    const titles = [...result.modelOutput.matchAll(/^\[\d+\] (.*)$/gm)].map((m) => m[1] as string)
    expect(titles.length).toBeGreaterThan(0)
    for (const title of titles) expect(title.length).toBeLessThanOrEqual(301)
    expect(titles[0]).toEndWith("…")
  })

  test("an empty query is a failed result, no search made", async () => {
    const result = await webSearchTool.run({ query: "  " }, {}, ctxOf(settingsFor("exa")))
    expect(result.modelOutput).toContain("query: a non-empty search query is required")
    expect(mock.requests).toHaveLength(0)
  })
})

describe("domain filters", () => {
  test("searxng has none: the gateway keeps only allowed domains (a domain covers its subdomains)", async () => {
    const result = await search("searxng", { allowed_domains: ["example.com"] })
    expect(sourcesOf(result.item)).toEqual(["https://example.com/guide", "https://docs.example.com/reference", "https://example.com/blog/entry"])
  })

  test("OpenAI's web_search form: filters.allowed_domains is the allow list", async () => {
    const result = await search("searxng", { filters: { allowed_domains: ["other.org"] } })
    expect(sourcesOf(result.item)).toEqual(["https://news.other.org/story"])
  })

  test("brave: excluded domains with a wildcard are dropped by the gateway", async () => {
    const result = await search("brave", { excluded_domains: ["*.example.com", "example.com", "other.org"], max_results: 10 })
    expect(sourcesOf(result.item)).toEqual(["https://blog.third.net/post", "https://www.fourth.io/page", "https://fifth.dev/docs", "https://sixth.co.uk/item"])
  })

  test("exa filters by itself: plain domains go in includeDomains / excludeDomains", async () => {
    const result = await search("exa", { allowed_domains: ["example.com"], max_results: 2 })
    expect(bodyAt(0)["includeDomains"]).toEqual(["example.com"])
    expect(sourcesOf(result.item)).toEqual(["https://example.com/guide", "https://docs.example.com/reference"])
    await search("tavily", { excluded_domains: ["other.org"] })
    expect(bodyAt(1)["exclude_domains"]).toEqual(["other.org"])
  })

  test("a path filter the engine cannot take: not sent, applied by the gateway", async () => {
    const result = await search("exa", { allowed_domains: ["example.com/blog"] })
    const body = bodyAt(0)
    expect(body["includeDomains"]).toBeUndefined()
    // Asked for as many as the engine gives, then filtered.
    expect(body["numResults"]).toBe(25)
    expect(sourcesOf(result.item)).toEqual(["https://example.com/blog/entry"])
  })
})

describe("limits across the request's searches", () => {
  test("max_total_results: earlier calls count max_results each; the rest is what is left", async () => {
    const result = await search("tavily", { max_results: 4, max_total_results: 10 }, "q", 2)
    expect(bodyAt(0)["max_results"]).toBe(2)
    expect(sourcesOf(result.item)).toHaveLength(2)
  })

  test("max_total_results reached: no search, the model is told, nothing charged", async () => {
    const result = await search("tavily", { max_results: 5 }, "q", 10)
    expect(mock.requests).toHaveLength(0)
    expect(result.modelOutput).toContain("limit of 50 results (max_total_results)")
    expect(result.cost).toBe(0)
    // Not a search that found nothing: the client's item says it was not made.
    expect((result.item as unknown as SearchItem).status).toBe("incomplete")
  })

  test("max_uses: the call past it is a failed result", async () => {
    const result = await search("exa", { max_uses: 2 }, "q", 2)
    expect(mock.requests).toHaveLength(0)
    expect(result.modelOutput).toContain("max_uses 2")
  })
})

describe("the tool's parameters", () => {
  test("max_results outside 1-25 is named with its rule", () => {
    expect(webSearchParametersProblem({ max_results: 26 }, settingsFor("exa"))).toBe("max_results: an integer from 1 to 25")
    expect(webSearchParametersProblem({ max_results: 25 }, settingsFor("exa"))).toBeUndefined()
  })

  test("engine: auto or the configured engine; another is refused", () => {
    expect(webSearchParametersProblem({ engine: "auto" }, settingsFor("exa"))).toBeUndefined()
    expect(webSearchParametersProblem({ engine: "exa" }, settingsFor("exa"))).toBeUndefined()
    expect(webSearchParametersProblem({ engine: "firecrawl" }, settingsFor("exa"))).toContain("this gateway searches with exa")
  })

  test("a bad domain pattern is named", () => {
    expect(webSearchParametersProblem({ allowed_domains: ["not a domain"] }, settingsFor("exa"))).toContain("allowed_domains[0]")
  })

  test("at run time a bad parameter is a failed result naming it", async () => {
    const result = await search("exa", { max_results: 0 })
    expect(result.modelOutput).toContain("max_results: an integer from 1 to 25")
    expect(mock.requests).toHaveLength(0)
  })
})

describe("config `search`", () => {
  const file = (search: unknown) => JSON.stringify({ providers: [], models: [], search })

  test("a valid engine block is read, with pricing", () => {
    const parsed = parseConfigFile("t.json", file({ engine: "exa", api_key_env: "EXA_KEY", pricing: { request: 0.005 } }))
    expect(Either.isRight(parsed)).toBe(true)
  })

  test("an unknown key is refused", () => {
    const parsed = parseConfigFile("t.json", file({ engine: "exa", api_key_env: "K", results: 3 }))
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("search.results")
  })

  test("an unknown engine is refused with the list", () => {
    const parsed = parseConfigFile("t.json", file({ engine: "bing", api_key_env: "K" }))
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("searxng, exa, tavily, brave")
  })

  test("searxng needs base_url; the others need api_key_env", () => {
    const searx = parseConfigFile("t.json", file({ engine: "searxng" }))
    expect(Either.isLeft(searx) && searx.left.message).toContain("search.base_url: is required for engine searxng")
    const brave = parseConfigFile("t.json", file({ engine: "brave" }))
    expect(Either.isLeft(brave) && brave.left.message).toContain("search.api_key_env: is required for engine brave")
  })

  test("settings: the vendor's base URL when none is given; the key redacted", () => {
    const settings = searchSettingsOf({ engine: "brave", api_key_env: "K", pricing: { request: 0.01 } }, "secret")
    expect(settings?.baseUrl).toBeUndefined()
    expect(settings?.pricePerRequest).toBe(0.01)
    expect(String(settings?.apiKey)).not.toContain("secret")
  })

  const loadWith = async (env: Record<string, string>) => {
    const path = `${process.env.TMPDIR ?? "/tmp"}/gw-search-${crypto.randomUUID()}.json`
    await Bun.write(path, JSON.stringify({ ...demoCatalog, search: { engine: "tavily", api_key_env: "TAVILY_TEST_KEY", pricing: { request: 0.008 } } }))
    const provider = ConfigProvider.fromMap(new Map(Object.entries({ GATEWAY_CONFIG: path, ...env })))
    return Effect.runPromise(Effect.either(Effect.provide(GatewayConfig, GatewayConfig.fromEnv).pipe(Effect.provide(Layer.setConfigProvider(provider)))))
  }

  test("at start the key is read from api_key_env; unset, the gateway does not start and names the variable", async () => {
    const started = Either.getOrThrow(await loadWith({ TAVILY_TEST_KEY: "tvly-secret" }))
    expect(started.search?.engine).toBe("tavily")
    expect(started.search?.pricePerRequest).toBe(0.008)
    const missing = await loadWith({})
    expect(Either.isLeft(missing) && String((missing.left as { message: string }).message)).toContain("TAVILY_TEST_KEY")
  })
})
