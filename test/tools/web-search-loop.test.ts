/**
 * web_search through the whole request path: the mock upstream calls the tool,
 * the gateway searches the mock SearXNG engine, the model answers quoting the results, and the
 * answer carries url_citation annotations for the links it cites; the search's configured price
 * is charged with the model turns, in the answer's usage and in the generation record, which
 * names the engine and counts the results. Runs on SQLite, and on Postgres with GATEWAY_TEST_PG_URL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { MOCK_PAGES, type MockSearch, startMockSearch } from "../../scripts/mock-search.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { endpoint, mockProvider, model, USAGE_INPUT } from "../routing/helpers.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse } from "../support/sse.js"

type Gw = InProcessGateway & { stop: () => Promise<void> }
let upstream: MockUpstream
let search: MockSearch
let gw: Gw

/** $ per million tokens: prompt 1, completion 2; a search $0.004. */
const PRICE = { prompt: 1, completion: 2 }
const SEARCH_PRICE = 0.004
const turnCost = (outputTokens: number) => (USAGE_INPUT * PRICE.prompt + outputTokens * PRICE.completion) / 1_000_000

beforeAll(async () => {
  upstream = await startMockUpstream({ tokens: 3 })
  search = await startMockSearch()
  gw = await startInProcessGateway({
    catalog: {
      providers: [mockProvider(upstream, "chat")],
      models: [model("test/chat", endpoint("chat", PRICE.prompt, PRICE.completion))],
      search: { engine: "searxng", base_url: `${search.url}/searxng`, pricing: { request: SEARCH_PRICE } },
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  await search?.stop()
  await upstream?.stop()
})

interface Annotation {
  readonly type: string
  readonly url: string
  readonly title: string
  readonly start_index: number
  readonly end_index: number
}
interface Result {
  readonly status: string
  readonly output: ReadonlyArray<{ readonly type: string; readonly status?: string; readonly content?: ReadonlyArray<{ readonly text: string; readonly annotations: ReadonlyArray<Annotation> }> }>
  readonly usage: { readonly cost: number; readonly server_tool_use_details: Record<string, number> }
}

const QUESTION = "what is new about example widgets?"
const REQUEST = { model: "test/chat", input: QUESTION, tools: [{ type: "openrouter:web_search", parameters: { max_results: 3 } }] }

const generation = async (id: string) => {
  await gw.server.drain()
  for (let i = 0; i < 100; i++) {
    const res = await gw.fetch(`/v1/generation?id=${id}`)
    if (res.status === 200) return ((await res.json()) as { data: Record<string, unknown> }).data
    await Bun.sleep(30)
  }
  throw new Error(`no generation ${id}`)
}

describe("web_search in the loop", () => {
  test("the search runs, the answer cites its links, and the search's price is charged and recorded", async () => {
    const before = search.requests.length
    const res = await gw.fetch("/v1/responses", { method: "POST", json: REQUEST })
    expect(res.status).toBe(200)
    const result = (await res.json()) as Result
    expect(result.status).toBe("completed")
    expect(result.output.map((i) => i.type)).toEqual(["openrouter:web_search", "message"])
    expect(result.output[0]?.status).toBe("completed")

    // The engine was asked the model's query (the mock upstream searches for the last user text).
    const asked = search.requests.slice(before)
    expect(asked).toHaveLength(1)
    expect(asked[0]?.query["q"]).toBe(QUESTION)

    // The model saw the results (it quotes the tool output) and its answer cites the first three pages.
    const part = result.output[1]?.content?.[0]
    if (part === undefined) throw new Error("no message text")
    for (const page of MOCK_PAGES.slice(0, 3)) expect(part.text).toContain(page.url)
    expect(part.text).not.toContain(MOCK_PAGES[3]!.url)
    const cited = part.annotations.filter((a) => a.type === "url_citation")
    expect(new Set(cited.map((a) => a.url))).toEqual(new Set(MOCK_PAGES.slice(0, 3).map((p) => p.url)))
    for (const a of cited) {
      expect(part.text.slice(a.start_index, a.end_index)).toBe(a.url)
      // The engine's title of that result (the mock adds the query to each page's title).
      expect(a.title.startsWith(MOCK_PAGES.find((p) => p.url === a.url)!.title)).toBe(true)
    }

    // Two model turns and one search, in the answer and in the record.
    expect(result.usage.server_tool_use_details).toEqual({ tool_calls_requested: 1, tool_calls_executed: 1, web_search_requests: 1 })
    expect(result.usage.cost).toBeCloseTo(turnCost(1) * 2 + SEARCH_PRICE, 12)
    const record = await generation(res.headers.get("x-generation-id")!)
    expect(record["total_cost"]).toBeCloseTo(result.usage.cost, 12)
    expect(record["num_search_results"]).toBe(3)
    expect(record["web_search_engine"]).toBe("searxng")
  })

  test("streamed: the stream keeps its rules and announces each citation", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { ...REQUEST, stream: true } })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    checkStreamRules(events)
    const added = events.filter((e) => e.json?.type === "response.output_text.annotation.added")
    expect(added.length).toBe(3)
    const completed = events.find((e) => e.json?.type === "response.completed")?.json as { response: Result } | undefined
    expect(completed?.response.usage.cost).toBeCloseTo(turnCost(1) * 2 + SEARCH_PRICE, 12)
  })

  test("bad parameters for the tool are a 400 naming the field, before any upstream call or search", async () => {
    const before = search.requests.length
    const calls = upstream.requests.length
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { ...REQUEST, tools: [{ type: "openrouter:web_search", parameters: { max_results: 99 } }] },
    })
    expect(res.status).toBe(400)
    expect(await res.text()).toContain("tools[0].parameters")
    expect(search.requests.length).toBe(before)
    expect(upstream.requests.length).toBe(calls)
  })
})
