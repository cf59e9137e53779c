/**
 * The `web` plugin end to end: one search on the mock search engine before the
 * model, for the last user message; its results reach the mock upstream as a system message just
 * above that message, headed by the default search prompt (or the request's `search_prompt`), on the
 * three client formats; the domain filters; the search's cost in the generation record; not
 * configured, another engine, or a failing engine are refused.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { Effect, Either } from "effect"
import { type MockSearch, startMockSearch } from "../../scripts/mock-search.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { testSettings } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { Missing } from "../../src/pipeline/stages.js"
import { makeWebStage } from "../../src/pipeline/plugins/web.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { costAt, endpoint, mockProvider, model } from "../routing/helpers.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

type Gw = InProcessGateway & { stop: () => Promise<void> }
let upstream: MockUpstream
let engine: MockSearch
let gw: Gw
let plain: Gw

const SEARCH_PRICE = 0.004

const catalog = (search: ConfigFile["search"]): ConfigFile => ({
  providers: [mockProvider(upstream, "p-chat"), mockProvider(upstream, "p-anth", {}, { kind: "anthropic" })],
  models: [model("test/chat", endpoint("p-chat", 1, 2)), model("test/anthropic", endpoint("p-anth", 1, 2))],
  ...(search === undefined ? {} : { search }),
})

beforeAll(async () => {
  upstream = await startMockUpstream({ tokens: 3 })
  engine = await startMockSearch()
  gw = await startInProcessGateway({ catalog: catalog({ engine: "searxng", base_url: `${engine.url}/searxng`, pricing: { request: SEARCH_PRICE } }) })
  plain = await startInProcessGateway({ catalog: catalog(undefined) })
})
afterAll(async () => {
  for (const g of [gw, plain]) await g?.stop()
  await upstream?.stop()
  await engine?.stop()
})
beforeEach(() => {
  upstream.requests.length = 0
  engine.requests.length = 0
})

const ask = async (g: Gw, format: Format, text: string, plugin: Record<string, unknown> = {}, modelId = "test/chat") => {
  const plugins = [{ id: "web", ...plugin }]
  const history = [
    { role: "user", content: "Earlier question" },
    { role: "assistant", content: "Earlier answer" },
    { role: "user", content: text },
  ]
  const json = bodyIn(format, modelId, history, { plugins })
  const res = await g.fetch(PATHS[format], { method: "POST", json, headers: { "x-service-metadata": "enabled", "anthropic-version": "2023-06-01" } })
  return { res, body: (await res.json()) as Record<string, unknown> }
}

/** The chat messages the upstream received (role and text). */
const upstreamMessages = () => {
  const body = upstream.requests[0]?.body as { messages: Array<{ role: string; content: unknown }> }
  return body.messages.map((m) => ({ role: m.role, text: typeof m.content === "string" ? m.content : JSON.stringify(m.content) }))
}

describe("the results reach the model above the last user message", () => {
  for (const format of FORMATS) {
    test(`${format}: one search for the last user message; a system message with the results just above it`, async () => {
      const { res } = await ask(gw, format, "zorkmid exchange rate")
      expect(res.status).toBe(200)
      expect(engine.requests).toHaveLength(1)
      expect(engine.requests[0]?.query["q"]).toBe("zorkmid exchange rate")
      const messages = upstreamMessages()
      const last = messages.length - 1
      expect(messages[last]).toEqual({ role: "user", text: "zorkmid exchange rate" })
      expect(messages[last - 1]?.role).toBe("system")
      const context = messages[last - 1]?.text ?? ""
      expect(context).toMatch(/^A web search was conducted on \d{4}-\d{2}-\d{2}\. Incorporate the following web search results into your response\./)
      expect(context).toContain("IMPORTANT: Cite them using markdown links named using the domain of the source.")
      expect(context).toContain("[1] Example guide: zorkmid exchange rate\nURL: https://example.com/guide\nExcerpt 1 about zorkmid exchange rate")
      // max_results default 5.
      expect(context).toContain("[5] ")
      expect(context).not.toContain("[6] ")
      // The earlier turns stay where they were.
      expect(messages.slice(0, 2).map((m) => m.text)).toEqual(["Earlier question", "Earlier answer"])
    })
  }

  test("Responses input as a string: it becomes the user message, the results above it", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/chat", input: "zorkmid rates", plugins: [{ id: "web", max_results: 1 }] } })
    expect(res.status).toBe(200)
    const messages = upstreamMessages()
    expect(messages.map((m) => m.role)).toEqual(["system", "user"])
    expect(messages[0]?.text).toContain("URL: https://example.com/guide")
    expect(messages[1]?.text).toBe("zorkmid rates")
  })

  test("a streamed request: the same system message reaches the upstream, the answer streams", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "test/chat", stream: true, messages: [{ role: "user", content: "zorkmid futures" }], plugins: [{ id: "web", max_results: 1 }] },
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    expect(await res.text()).toContain("data: [DONE]")
    expect(upstreamMessages().at(-2)?.text).toContain("URL: https://example.com/guide")
  })

  test("an Anthropic upstream gets the results in its system prompt", async () => {
    const { res } = await ask(gw, "responses", "zorkmid news", {}, "test/anthropic")
    expect(res.status).toBe(200)
    const body = upstream.requests[0]?.body as { system?: Array<{ text: string }> }
    expect(JSON.stringify(body.system)).toContain("URL: https://example.com/guide")
  })

  test("search_prompt replaces the default heading; max_results and include_domains apply", async () => {
    const { res } = await ask(gw, "chat", "zorkmids", { search_prompt: "Sources found:", max_results: 2, include_domains: ["example.com"] })
    expect(res.status).toBe(200)
    const context = upstreamMessages().at(-2)?.text ?? ""
    expect(context.startsWith("Sources found:\n\n")).toBe(true)
    expect(context).toContain("URL: https://example.com/guide")
    expect(context).toContain("URL: https://docs.example.com/reference")
    expect(context).not.toContain("other.org")
    expect(context).not.toContain("[3] ")
  })

  test("exclude_domains with a wildcard is applied by the gateway", async () => {
    await ask(gw, "responses", "zorkmids", { exclude_domains: ["*.example.com", "example.com"], max_results: 2 })
    const context = upstreamMessages().at(-2)?.text ?? ""
    expect(context).toContain("URL: https://news.other.org/story")
    expect(context).toContain("URL: https://blog.third.net/post")
    expect(context).not.toContain("example.com")
  })
})

describe("what the answer and the record show", () => {
  test("a pipeline entry names the engine, the query and the results", async () => {
    const { body } = await ask(gw, "responses", "zorkmids", { max_results: 1 })
    const pipeline = (body["service_metadata"] as { pipeline: Array<Record<string, unknown>> }).pipeline
    expect(pipeline).toContainEqual({
      type: "plugin",
      name: "web",
      summary: "1 web result from searxng added to the prompt",
      data: { engine: "searxng", query: "zorkmids", results: [{ title: "Example guide: zorkmids", url: "https://example.com/guide" }], cost: SEARCH_PRICE },
    })
  })

  test("the search's price is charged with the generation", async () => {
    const { res } = await ask(gw, "responses", "zorkmids")
    const id = res.headers.get("x-generation-id")
    let cost: number | undefined
    for (let i = 0; i < 100 && cost === undefined; i++) {
      const r = await gw.fetch(`/v1/generation?id=${id}`)
      if (r.status === 200) cost = ((await r.json()) as { data: { total_cost: number } }).data.total_cost
      else await Bun.sleep(50)
    }
    // The prompt grew by the results: the upstream's usage is the mock's fixed one.
    expect(cost).toBeCloseTo(costAt(1, 2) + SEARCH_PRICE, 9)
  })

  test("enabled: false: no search", async () => {
    const { res } = await ask(gw, "responses", "zorkmids", { enabled: false })
    expect(res.status).toBe(200)
    expect(engine.requests).toHaveLength(0)
  })
})

describe("refusals", () => {
  for (const format of FORMATS) {
    test(`${format}: without search in config → 400 "web search is not configured on this gateway"`, async () => {
      const { res, body } = await ask(plain, format, "zorkmids")
      expect(res.status).toBe(400)
      expect(JSON.stringify(body)).toContain("plugins[0]: web search is not configured on this gateway")
      expect(upstream.requests).toHaveLength(0)
    })
  }

  test("another engine than the configured one → 400 naming plugins[0].engine", async () => {
    const { res, body } = await ask(gw, "responses", "zorkmids", { engine: "exa" })
    expect(res.status).toBe(400)
    expect(JSON.stringify(body)).toContain("plugins[0].engine: this gateway searches with searxng")
  })

  test("max_results out of range → 400 naming the field", async () => {
    const { res, body } = await ask(gw, "responses", "zorkmids", { max_results: 26 })
    expect(res.status).toBe(400)
    expect(JSON.stringify(body)).toContain("max_results: an integer from 1 to 25")
  })

  test("a key without budget left → 402 before the priced search: no search made", async () => {
    const made = await gw.fetch("/v1/keys", { method: "POST", json: { name: "spent", limit: 0 } })
    const { key } = (await made.json()) as { key: string }
    const res = await gw.fetch("/v1/responses", { method: "POST", key, json: { model: "test/chat", input: "zorkmids", plugins: [{ id: "web" }] } })
    expect(res.status).toBe(402)
    expect(engine.requests).toHaveLength(0)
    expect(upstream.requests).toHaveLength(0)
  })

  test("an engine that fails → 502, the model not called", async () => {
    const { res, body } = await ask(gw, "responses", "please FAIL")
    expect(res.status).toBe(502)
    expect(JSON.stringify(body)).toContain("web search failed: the search engine (searxng) answered HTTP 500")
    expect(upstream.requests).toHaveLength(0)
  })
})

describe("the results are links the answer may cite", () => {
  test("the stage's change carries each result as {url, title} (the decision's citable)", async () => {
    const plugin = makeWebStage(testSettings({ catalog: catalog({ engine: "searxng", base_url: `${engine.url}/searxng` }) }))
    const request = Either.getOrThrow(decodeResponsesRequest({ model: "test/chat", input: "zorkmids", plugins: [{ id: "web", max_results: 2 }] }))
    const state = { request, loaded: {} } as unknown as Parameters<typeof plugin.run>[1]
    const config = { id: "web", enabled: true, max_results: 2 } as Parameters<typeof plugin.run>[0]
    const first = plugin.run(config, state, 0)
    if (!(first instanceof Missing)) throw new Error("the search is a read the stages miss")
    await Effect.runPromise(first.load)
    const change = plugin.run(config, state, 0)
    expect(change !== undefined && "citable" in change ? change.citable : undefined).toEqual([
      { url: "https://example.com/guide", title: "Example guide: zorkmids" },
      { url: "https://docs.example.com/reference", title: "Example reference: zorkmids" },
    ])
  })
})
