/**
 * Fusion's panel with web tools through the server, as the `openrouter:fusion`
 * server tool (the mock's model calls `fusion` when offered it) and as the `fusion` plugin: the
 * panelists search the mock SearXNG engine, the searches' price is charged with the request (usage,
 * record) and counted in `server_tool_use_details.web_search_requests` and `num_search_results`;
 * bad `tools` / `max_tool_calls` are a 400 naming the field before any call.
 */
import { OutputFusionServerToolItem$inboundSchema } from "@openrouter/sdk/models"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { MOCK_PAGES, type MockSearch, startMockSearch } from "../../scripts/mock-search.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { costAt, TAG } from "../routing/helpers.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse } from "../support/sse.js"
import { ANALYSIS, fusionCatalog, OUTPUT_TOKENS } from "./support.js"

let mock: MockUpstream
let search: MockSearch
let gw: InProcessGateway & { stop: () => Promise<void> }

const SEARCH_PRICE = 0.004
const QUESTION = "what is new about example widgets?"
/** One turn of test/final (prompt $1, completion $2 per million), as the mock reports it. */
const finalTurn = costAt(1, 2, OUTPUT_TOKENS)

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 1 })
  search = await startMockSearch()
  gw = await startInProcessGateway({
    catalog: { ...fusionCatalog(mock), search: { engine: "searxng", base_url: `${search.url}/searxng`, pricing: { request: SEARCH_PRICE } } },
  })
})
afterAll(async () => {
  await gw?.stop()
  await search?.stop()
  await mock?.stop()
})

const generation = async (id: string) => {
  await gw.server.drain()
  const res = await gw.fetch(`/v1/generation?id=${id}`)
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Record<string, unknown> }).data
}

interface Result {
  readonly status: string
  readonly output: ReadonlyArray<Record<string, unknown>>
  readonly usage: { readonly cost: number; readonly server_tool_use_details?: Record<string, number> }
  readonly service_metadata?: { readonly pipeline: ReadonlyArray<{ readonly name: string; readonly data: Record<string, unknown> }> }
}

const FUSION_TOOL = { type: "openrouter:fusion", parameters: { analysis_models: ["test/a", "test/b"], model: "test/judge" } }

describe("the fusion server tool: panelists with web tools", () => {
  test("the panel searches; the item carries the answers and the pages; the searches are charged and counted with the request", async () => {
    const searched = search.requests.length
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [FUSION_TOOL] } })
    expect(res.status).toBe(200)
    const result = (await res.json()) as Result
    expect(result.status).toBe("completed")
    expect(result.output.map((i) => i["type"])).toEqual(["openrouter:fusion", "message"])
    const item = result.output[0] as Record<string, unknown>
    expect(OutputFusionServerToolItem$inboundSchema.safeParse(item).success).toBe(true)
    const responses = item["responses"] as ReadonlyArray<{ model: string; content: string }>
    expect(responses.map((r) => r.model)).toEqual(["test/a", "test/b"])
    for (const r of responses) expect(r.content).toContain(MOCK_PAGES[0]!.url)
    expect(item["analysis"]).toEqual(ANALYSIS)
    expect((item["sources"] as ReadonlyArray<{ url: string }>).map((s) => s.url)).toContain(MOCK_PAGES[0]!.url)
    expect(search.requests.slice(searched).map((r) => r.query["q"])).toEqual([QUESTION, QUESTION])

    // Two turns of the request's model and two searches; the panel and the judge are on their own records.
    expect(result.usage.server_tool_use_details).toEqual({ tool_calls_requested: 1, tool_calls_executed: 1, web_search_requests: 2 })
    expect(result.usage.cost).toBeCloseTo(2 * finalTurn + 2 * SEARCH_PRICE, 12)
    const record = await generation(res.headers.get("x-generation-id") as string)
    expect(record["total_cost"]).toBeCloseTo(result.usage.cost, 12)
    expect(record["num_search_results"]).toBe(10)
    expect(record["web_search_engine"]).toBe("searxng")
  })

  test("streamed: the stream keeps its rules and its fusion item validates", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [FUSION_TOOL], stream: true } })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    checkStreamRules(events)
    const done = events.find((e) => e.json?.type === "response.output_item.done" && (e.json["item"] as { type?: string }).type === "openrouter:fusion")
    const item = done?.json?.["item"] as { sources?: ReadonlyArray<{ url: string }> } | undefined
    expect(OutputFusionServerToolItem$inboundSchema.safeParse(item).success).toBe(true)
    expect(item?.sources?.map((s) => s.url)).toContain(MOCK_PAGES[0]!.url)
  })

  test("tools: [] — the panel does not search; nothing is added to the request's cost", async () => {
    const searched = search.requests.length
    const tool = { type: "openrouter:fusion", parameters: { ...FUSION_TOOL.parameters, tools: [] } }
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [tool] } })
    expect(res.status).toBe(200)
    const result = (await res.json()) as Result
    expect(search.requests.length).toBe(searched)
    expect(result.usage.server_tool_use_details?.["web_search_requests"]).toBe(0)
    expect(result.usage.cost).toBeCloseTo(2 * finalTurn, 12)
  })

  test("bad tools or max_tool_calls for the panel: a 400 naming the field, before any call", async () => {
    const calls = mock.requests.length
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ tools: [{ type: "openrouter:fusion" }] }, "tools[0].parameters: tools[0].type: fusion cannot be a tool of fusion's own panel"],
      [{ tools: [{ type: "openrouter:web_search", parameters: { max_results: 99 } }] }, "tools[0].parameters: tools[0].parameters: max_results"],
      [{ tools: [{ type: "code_interpreter" }] }, 'tools[0].parameters: tools[0].type: "code_interpreter" is not a tool the panel can use'],
      [{ max_tool_calls: 17 }, "tools[0].parameters: max_tool_calls: an integer from 1 to 16"],
      [{ max_tool_calls: 0 }, "tools[0].parameters: max_tool_calls: an integer from 1 to 16"],
    ]
    for (const [parameters, message] of cases) {
      const tool = { type: "openrouter:fusion", parameters: { ...FUSION_TOOL.parameters, ...parameters } }
      const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [tool] } })
      expect(res.status).toBe(400)
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(message)
    }
    expect(mock.requests.length).toBe(calls)
  })
})

describe("the fusion plugin: panelists with web tools", () => {
  const ask = (plugin: Record<string, unknown>) =>
    gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "test/final", input: QUESTION, plugins: [{ id: "fusion", analysis_models: ["test/a", "test/b"], model: "test/judge", ...plugin }] },
      headers: { "x-service-metadata": "enabled" },
    })

  test("tools omitted: the panel searches, the request's model gets answers written from the results, the searches are charged with the request", async () => {
    const searched = search.requests.length
    const from = mock.requests.length
    const res = await ask({})
    expect(res.status).toBe(200)
    const result = (await res.json()) as Result
    expect(search.requests.slice(searched).map((r) => r.query["q"])).toEqual([QUESTION, QUESTION])
    const final = mock.requests.slice(from).find((r) => r.headers[TAG] === "pfinal")
    expect(JSON.stringify(final?.body)).toContain(MOCK_PAGES[0]!.url)

    const entry = result.service_metadata?.pipeline.find((e) => e.name === "fusion")
    expect(entry?.data["tools"]).toMatchObject({ tool_calls_requested: 2, tool_calls_executed: 2, web_search_requests: 2 })
    expect((entry?.data["tools"] as { cost: number } | undefined)?.cost).toBeCloseTo(2 * SEARCH_PRICE, 12)
    // Each panelist's two calls and the judge's, each on its own record.
    expect(entry?.data["generations"]).toHaveLength(5)
    expect(result.usage.cost).toBeCloseTo(finalTurn + 2 * SEARCH_PRICE, 12)
    const record = await generation(res.headers.get("x-generation-id") as string)
    expect(record["total_cost"]).toBeCloseTo(result.usage.cost, 12)
    expect(record["router"]).toBe("fusion")
  })

  test("tools: [] — no search, the request is charged its model's turn only", async () => {
    const searched = search.requests.length
    const res = await ask({ tools: [] })
    expect(res.status).toBe(200)
    expect(search.requests.length).toBe(searched)
    expect(((await res.json()) as Result).usage.cost).toBeCloseTo(finalTurn, 12)
  })

  test("bad tools or max_tool_calls: a 400 naming the field, before any call", async () => {
    const calls = mock.requests.length
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ tools: [{ type: "service:fusion" }] }, "plugins[0].tools[0].type: fusion cannot be a tool of fusion's own panel"],
      [{ tools: [{ type: "openrouter:web_fetch", parameters: { max_uses: 0 } }] }, "plugins[0].tools[0].parameters: max_uses"],
      [{ tools: [{ type: "web_fetch" }] }, 'plugins[0].tools[0].type: "web_fetch" is not a tool the panel can use'],
      [{ tools: [{ parameters: {} }] }, "plugins[0].tools[0].type: is missing"],
      [{ max_tool_calls: 17 }, "plugins[0].max_tool_calls: an integer from 1 to 16"],
    ]
    for (const [plugin, message] of cases) {
      const res = await ask(plugin)
      expect(res.status).toBe(400)
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(message)
    }
    expect(mock.requests.length).toBe(calls)
  })
})

describe("the workspace's disabled_server_tools reach the panel", () => {
  test("omitted tools leave a disabled one out; naming it is a 400 (server tool and plugin)", async () => {
    const workspaceId = ((await (await gw.fetch("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id
    const patch = (tools: ReadonlyArray<string> | null) => gw.fetch(`/v1/workspaces/${workspaceId}`, { method: "PATCH", json: { disabled_server_tools: tools } })
    expect((await patch(["web_search"])).status).toBe(200)
    try {
      const searched = search.requests.length
      const from = mock.requests.length
      const viaTool = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [FUSION_TOOL] } })
      expect(viaTool.status).toBe(200)
      const viaPlugin = await gw.fetch("/v1/responses", {
        method: "POST",
        json: { model: "test/final", input: QUESTION, plugins: [{ id: "fusion", analysis_models: ["test/a"], model: "test/judge" }] },
      })
      expect(viaPlugin.status).toBe(200)
      expect(search.requests.length).toBe(searched)
      // The panelists were offered web_fetch only.
      const panel = mock.requests.slice(from).filter((r) => r.headers[TAG] === "pa")
      expect(panel.length).toBeGreaterThan(0)
      for (const r of panel) {
        const offered = ((r.body as { tools?: ReadonlyArray<{ function: { name: string } }> }).tools ?? []).map((t) => t.function.name)
        expect(offered).toEqual(["web_fetch"])
      }

      const named = { tools: [{ type: "openrouter:web_search" }] }
      const tool = { type: "openrouter:fusion", parameters: { ...FUSION_TOOL.parameters, ...named } }
      const refusedTool = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/final", input: QUESTION, tools: [tool] } })
      expect(refusedTool.status).toBe(400)
      expect(await refusedTool.text()).toContain('tools[0].parameters: tools[0].type: \\"openrouter:web_search\\" is disabled in this workspace (disabled_server_tools)')
      const refusedPlugin = await gw.fetch("/v1/responses", {
        method: "POST",
        json: { model: "test/final", input: QUESTION, plugins: [{ id: "fusion", analysis_models: ["test/a"], model: "test/judge", ...named }] },
      })
      expect(refusedPlugin.status).toBe(400)
      expect(await refusedPlugin.text()).toContain('plugins[0].tools[0].type: \\"openrouter:web_search\\" is disabled in this workspace')
    } finally {
      await patch(null)
    }
  })
})

describe("fusion asks that could never run are refused at request time with a 400 naming them, before any call", () => {
  const refusedWith = async (path: string, json: Record<string, unknown>, message: string) => {
    const calls = mock.requests.length
    const res = await gw.fetch(path, { method: "POST", json })
    expect(res.status).toBe(400)
    expect(JSON.stringify(await res.json())).toContain(message)
    expect(mock.requests.length).toBe(calls)
  }

  test("the server tool: a preset this gateway does not configure, no panel at all, a panelist or a judge outside the catalog", async () => {
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ preset: "general-fast" }, "tools[0].parameters: preset: fusion preset general-fast is not configured on this gateway (plugins.fusion.presets)"],
      [{}, "tools[0].parameters: analysis_models: 1 to 8 models, or a preset"],
      [{ analysis_models: ["test/a", "nope/model"], model: "test/judge" }, 'tools[0].parameters: analysis_models[1]: model \\"nope/model\\" is not in this gateway\'s catalog'],
      [{ analysis_models: ["test/a"], model: "nope/judge" }, 'tools[0].parameters: model: the judge \\"nope/judge\\" is not in this gateway\'s catalog'],
    ]
    for (const [parameters, message] of cases) {
      await refusedWith("/v1/responses", { model: "test/final", input: QUESTION, tools: [{ type: "openrouter:fusion", parameters }] }, message)
    }
    await refusedWith(
      "/v1/chat/completions",
      { model: "test/final", messages: [{ role: "user", content: QUESTION }], tools: [{ type: "openrouter:fusion", parameters: { preset: "general-high" } }] },
      "preset: fusion preset general-high is not configured",
    )
  })

  test("the plugin: an analysis model or a judge outside the catalog is a 400 naming the model, not a 502", async () => {
    await refusedWith(
      "/v1/responses",
      { model: "test/final", input: QUESTION, plugins: [{ id: "fusion", analysis_models: ["test/a", "nope/model"], model: "test/judge", tools: [] }] },
      'plugins[0].analysis_models[1]: model \\"nope/model\\" is not in this gateway\'s catalog',
    )
    await refusedWith(
      "/v1/chat/completions",
      { model: "test/final", messages: [{ role: "user", content: QUESTION }], plugins: [{ id: "fusion", analysis_models: ["test/a"], model: "nope/judge", tools: [] }] },
      'plugins[0].model: the judge \\"nope/judge\\" is not in this gateway\'s catalog',
    )
    await refusedWith(
      "/v1/messages",
      { model: "test/final", max_tokens: 64, messages: [{ role: "user", content: QUESTION }], plugins: [{ id: "fusion", analysis_models: ["nope/a", "nope/b"], model: "test/judge", tools: [] }] },
      'plugins[0].analysis_models[0]: model \\"nope/a\\" is not in this gateway\'s catalog',
    )
  })

  test("a routing suffix on a catalog model is not refused", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "test/final", input: QUESTION, plugins: [{ id: "fusion", analysis_models: ["test/a:floor"], model: "test/judge", tools: [] }] },
    })
    expect(res.status).toBe(200)
  })
})
