/**
 * Fusion's panel with web tools, over real inner calls against the mock upstream
 * (which calls web_search / web_fetch when offered and answers "Tool output: …") and the mock
 * SearXNG engine: tools omitted give the web tools the gateway has, `[]` none; each panelist's
 * tool calls stop at `max_tool_calls`, then one last call without tools; the panel's calls leave the
 * judge its call within `server.max_upstream_calls`; a failed tool is a result the panelist sees;
 * the tools' prices, counts and pages come back for the request.
 */
import { OutputFusionServerToolItem$inboundSchema } from "@openrouter/sdk/models"
import { afterAll, describe, expect, test } from "bun:test"
import { MOCK_PAGES, startMockSearch } from "../../scripts/mock-search.js"
import { startMockUpstream } from "../../scripts/mock-upstream.js"
import { testSettings } from "../../src/config/Config.js"
import { type FusionRun, runFusion } from "../../src/tools/fusion-core.js"
import { checkFusionParameters, type FusionToolContext, fusionTool } from "../../src/tools/fusion.js"
import type { ParentCall } from "../../src/tools/inner-calls.js"
import { type PanelSetup, panelToolsOf } from "../../src/tools/panel.js"
import { endpoint, mockProvider, model, TAG } from "../routing/helpers.js"
import { useServices } from "../support/services.js"
import { ANALYSIS, fusionCatalog, servicesOf } from "./support.js"

const mock = await startMockUpstream({ tokens: 1 })
const search = await startMockSearch()
afterAll(async () => {
  await mock.stop()
  await search.stop()
})

const SEARCH_PRICE = 0.004
const QUESTION = "what is new about example widgets?"

const base = fusionCatalog(mock)
const services = useServices({
  catalog: {
    ...base,
    // A panelist that keeps calling tools (10 calls before it would answer on its own).
    providers: [...base.providers, mockProvider(mock, "psearcher", { "x-mock-server-tool-calls": "10", "x-mock-usage-output": "10" })],
    models: [...base.models, model("test/searcher", endpoint("psearcher", 1, 2))],
    search: { engine: "searxng", base_url: `${search.url}/searxng`, pricing: { request: SEARCH_PRICE } },
  },
})
const env = () => servicesOf(services())

/** The mock's requests since `from` for one provider tag, as the Chat bodies the gateway sent. */
const sentTo = (tag: string, from: number) =>
  mock.requests
    .slice(from)
    .filter((r) => r.headers[TAG] === tag)
    .map((r) => r.body as { tools?: ReadonlyArray<{ function: { name: string } }>; tool_choice?: unknown; messages: ReadonlyArray<unknown> })

const offeredNames = (body: { tools?: ReadonlyArray<{ function: { name: string } }> }) => (body.tools ?? []).map((t) => t.function.name)

const toolContext = async (parent?: ParentCall): Promise<FusionToolContext> => {
  const e = await env()
  return { settings: e.settings, signal: new AbortController().signal, workspaceId: "ws", callsSoFar: 0, innerCalls: e.innerCalls, parent: parent ?? (await e.parentFor()), model: undefined }
}

/** A run of the panel with the given tools (`tools` as the caller lists them), over real inner calls. */
const runWith = async (analysisModels: ReadonlyArray<string>, tools: Parameters<typeof panelToolsOf>[0], maxToolCalls: number | undefined, parent: ParentCall): Promise<FusionRun> => {
  const e = await env()
  const panel = panelToolsOf(tools, maxToolCalls, e.settings, [])
  if (typeof panel === "string") throw new Error(panel)
  const setup: PanelSetup = { ...panel, context: { settings: e.settings, signal: parent.signal, workspaceId: "ws" }, budget: parent.budget }
  return runFusion({ analysisModels, judge: "test/judge" }, QUESTION, (r, m) => e.innerCalls.call(r, m, parent), {}, setup)
}

describe("the panel's tools", () => {
  test("tools omitted with search configured: each panelist searches, and its answer is written from the results", async () => {
    const ctx = await toolContext()
    const searched = search.requests.length
    const from = mock.requests.length
    const result = await fusionTool.run({ prompt: QUESTION }, { analysis_models: ["test/a", "test/b"], model: "test/judge" }, ctx)

    // The engine was asked the panel's question once per panelist.
    const asked = search.requests.slice(searched)
    expect(asked.map((r) => r.query["q"])).toEqual([QUESTION, QUESTION])
    // Each panelist was offered web_search and web_fetch as functions, called web_search, then answered from its output.
    for (const tag of ["pa", "pb"]) {
      const calls = sentTo(tag, from)
      expect(calls).toHaveLength(2)
      expect(offeredNames(calls[0]!)).toEqual(["web_search", "web_fetch"])
      expect(JSON.stringify(calls[1]!.messages)).toContain(MOCK_PAGES[0]!.url)
    }
    const responses = result.item["responses"] as ReadonlyArray<{ model: string; content: string }>
    expect(responses.map((r) => r.model)).toEqual(["test/a", "test/b"])
    for (const r of responses) {
      expect(r.content.startsWith("Tool output: ")).toBe(true)
      expect(r.content).toContain(MOCK_PAGES[0]!.url)
    }
    expect(result.item["analysis"]).toEqual(ANALYSIS)
    // The judge is offered the panel's tools too (this one answers at once).
    expect(sentTo("pjudge", from).map(offeredNames)).toEqual([["web_search", "web_fetch"]])

    // The pages the panel found, once each, on the SDK's item; the searches' price and counts for the request.
    expect((result.item["sources"] as ReadonlyArray<{ url: string }>).map((s) => s.url)).toEqual(MOCK_PAGES.slice(0, 5).map((p) => p.url))
    expect(OutputFusionServerToolItem$inboundSchema.safeParse({ id: "fc_1", ...result.item }).success).toBe(true)
    expect(result.cost).toBeCloseTo(2 * SEARCH_PRICE, 12)
    expect(result.searchRequests).toBe(2)
    expect(result.searchResults).toBe(10)
    expect(result.searchEngine).toBe("searxng")
    expect(result.citable?.length).toBe(5)
    expect(JSON.parse(result.modelOutput)["sources"]).toHaveLength(5)
  })

  test("each call of a panelist is an inner call recorded under the request, and none of them carries the search's price", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const run = await runWith(["test/a"], undefined, undefined, parent)
    // The panelist's two calls, then the judge's.
    expect(run.generations).toHaveLength(3)
    expect(parent.budget.used).toBe(3)
    const records = await Promise.all(run.generations.map((id) => e.generation(id)))
    for (const r of records) expect(r.parentGenerationId).toBe(parent.generationId)
    expect(run.cost).toBeCloseTo(
      records.reduce((sum, r) => sum + r.totalCost, 0),
      12,
    )
    expect(run.toolUse.cost).toBeCloseTo(SEARCH_PRICE, 12)
  })

  test("tools: [] — the panelists get no tools and nothing is searched", async () => {
    const ctx = await toolContext()
    const searched = search.requests.length
    const from = mock.requests.length
    const result = await fusionTool.run({ prompt: QUESTION }, { analysis_models: ["test/a"], model: "test/judge", tools: [] }, ctx)
    expect(search.requests.length).toBe(searched)
    const calls = sentTo("pa", from)
    expect(calls).toHaveLength(1)
    expect(calls[0]?.tools).toBeUndefined()
    expect(result.item["responses"]).toEqual([{ model: "test/a", content: "Answer A: Paris." }])
    expect(result.cost).toBe(0)
    expect(result.searchRequests).toBeUndefined()
  })

  test("tools listed: only those are offered (datetime when asked for it)", async () => {
    const e = await env()
    const from = mock.requests.length
    const searched = search.requests.length
    await runWith(["test/a"], [{ type: "openrouter:datetime" }], undefined, await e.parentFor())
    expect(offeredNames(sentTo("pa", from)[0]!)).toEqual(["datetime"])
    expect(search.requests.length).toBe(searched)
  })

  test("max_tool_calls: a panelist makes that many tool calls, then one last call with tools disabled", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const searched = search.requests.length
    const from = mock.requests.length
    const run = await runWith(["test/searcher"], [{ type: "service:web_search", parameters: { max_results: 2 } }], 3, parent)
    expect(search.requests.length - searched).toBe(3)
    const calls = sentTo("psearcher", from)
    expect(calls).toHaveLength(4)
    expect(calls.slice(0, 3).map((c) => c.tool_choice)).toEqual([undefined, undefined, undefined])
    expect(calls[3]?.tool_choice).toBe("none")
    // The last call answers from the last tool output.
    expect(run.responses[0]?.content).toContain("Tool output: ")
    expect(run.toolUse).toMatchObject({ toolCallsRequested: 3, toolCallsExecuted: 3, webSearchRequests: 3, searchResults: 6 })
  })

  test("the request's model-call budget: a panelist's tool turns stop so that the judge still gets its call", async () => {
    const e = await env()
    // 4 calls: the panelist's first (a tool call), then only room for its last call and the judge's (and the request's model).
    const parent = await e.parentFor(null, 4)
    const from = mock.requests.length
    const run = await runWith(["test/searcher"], undefined, 8, parent)
    const calls = sentTo("psearcher", from)
    expect(calls).toHaveLength(2)
    expect(calls[1]?.tool_choice).toBe("none")
    expect(run.responses).toHaveLength(1)
    expect(run.analysis).toEqual(ANALYSIS)
    expect(parent.budget.used).toBe(3)
  })

  test("a budget with no room for tool turns: the panelists answer in one call each, without tools, and the judge keeps its call", async () => {
    const e = await env()
    const parent = await e.parentFor(null, 3)
    const from = mock.requests.length
    const searched = search.requests.length
    const run = await runWith(["test/searcher", "test/searcher"], undefined, 8, parent)
    expect(sentTo("psearcher", from).map((c) => c.tool_choice)).toEqual(["none", "none"])
    expect(search.requests.length).toBe(searched)
    expect(run.responses).toHaveLength(2)
    expect(run.analysis).toEqual(ANALYSIS)
    expect(parent.budget.used).toBe(3)
  })

  test("the budget reached mid-panel: the panelist whose call is refused fails with 429, the others' answers stay", async () => {
    const e = await env()
    const parent = await e.parentFor(null, 2)
    const run = await runWith(["test/a", "test/b", "test/c"], [], undefined, parent)
    expect(parent.budget.used).toBe(2)
    expect(run.responses).toHaveLength(2)
    expect(run.failedModels).toEqual([expect.objectContaining({ status_code: 429 })])
    // No call was left for the judge.
    expect(run.failureReason).toBe("rate_limited")
  })

  test("the judge answers with the panel's tools too: it searches, then gives its analysis from what it found", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const from = mock.requests.length
    const searched = search.requests.length
    const panel = panelToolsOf([{ type: "openrouter:web_search" }], 8, e.settings, [])
    if (typeof panel === "string") throw new Error(panel)
    const setup: PanelSetup = { ...panel, context: { settings: e.settings, signal: parent.signal, workspaceId: "ws" }, budget: parent.budget }
    const run = await runFusion({ analysisModels: ["test/a"], judge: "test/judge-searching" }, QUESTION, (r, m) => e.innerCalls.call(r, m, parent), {}, setup)
    const judgeCalls = sentTo("psjudge", from)
    expect(judgeCalls).toHaveLength(2)
    // Its first call offered the tool (with its answer format), its second carried the search's output.
    expect(offeredNames(judgeCalls[0]!)).toEqual(["web_search"])
    expect(JSON.stringify(judgeCalls[0])).toContain("fusion_analysis")
    expect(JSON.stringify(judgeCalls[1]!.messages)).toContain(MOCK_PAGES[0]!.url)
    // The panelist's search and the judge's: two in all, charged with the request.
    expect(search.requests.length - searched).toBe(2)
    expect(run.toolUse.webSearchRequests).toBe(2)
    expect(run.toolUse.cost).toBeCloseTo(2 * SEARCH_PRICE, 12)
    expect(run.analysis).toEqual(ANALYSIS)
    // The panelist's two calls and the judge's two, each recorded under the request.
    expect(run.generations).toHaveLength(4)
    expect(parent.budget.used).toBe(4)
  })

  test("a failing tool is a failed result the panelist sees, not a failed panelist", async () => {
    const e = await env()
    const parent = await e.parentFor()
    // web_fetch of the question (not a URL) fails; the search engine answers 500 for a query with FAIL.
    const fetched = await runWith(["test/a"], [{ type: "openrouter:web_fetch" }], undefined, parent)
    expect(fetched.failedModels).toEqual([])
    expect(fetched.responses[0]?.content).toContain('"status":"failed"')
    const failing = await runFusion(
      { analysisModels: ["test/b"], judge: "test/judge" },
      "FAIL this search",
      (r, m) => e.innerCalls.call(r, m, parent),
      {},
      { ...(panelToolsOf([{ type: "openrouter:web_search" }], 8, e.settings, []) as Exclude<ReturnType<typeof panelToolsOf>, string>), context: { settings: e.settings, signal: parent.signal, workspaceId: "ws" }, budget: parent.budget },
    )
    expect(failing.failedModels).toEqual([])
    expect(failing.responses[0]?.content).toContain("Tool output: Web search failed")
    // A search that failed is not charged.
    expect(failing.toolUse.cost).toBe(0)
  })
})

describe("the panel's tools: what is refused", () => {
  const settings = testSettings()

  test("a type the panel cannot use, fusion itself, a tool listed twice, bad parameters: the field and the rule", async () => {
    const e = await env()
    expect(panelToolsOf([{ type: "openrouter:fusion" }], 8, e.settings, [])).toBe("tools[0].type: fusion cannot be a tool of fusion's own panel")
    expect(panelToolsOf([{ type: "function" }], 8, e.settings, [])).toBe(
      'tools[0].type: "function" is not a tool the panel can use (openrouter:web_search, openrouter:web_fetch, openrouter:datetime)',
    )
    expect(panelToolsOf([{ type: "openrouter:web_fetch" }, { type: "service:web_fetch" }], 8, e.settings, [])).toBe('tools[1].type: "service:web_fetch" is listed twice')
    expect(panelToolsOf([{ type: "openrouter:web_search", parameters: { max_results: 99 } }], 8, e.settings, [])).toContain("tools[0].parameters: max_results")
  })

  test("web_search without search config: omitted, it is left out; listed, it is refused", () => {
    const omitted = panelToolsOf(undefined, undefined, settings, [])
    expect(typeof omitted !== "string" && omitted.tools.map((d) => d.tool.name)).toEqual(["web_fetch"])
    expect(panelToolsOf([{ type: "openrouter:web_search" }], 8, settings, [])).toBe(
      'tools[0].type: "openrouter:web_search" cannot run: web search is not configured on this gateway',
    )
  })

  test("the workspace's disabled_server_tools: omitted, the tool is left out; listed, it is refused", async () => {
    const e = await env()
    const omitted = panelToolsOf(undefined, undefined, e.settings, ["web_search"])
    expect(typeof omitted !== "string" && omitted.tools.map((d) => d.tool.name)).toEqual(["web_fetch"])
    expect(panelToolsOf([{ type: "openrouter:web_fetch" }], 8, e.settings, ["openrouter:web_fetch"])).toBe(
      'tools[0].type: "openrouter:web_fetch" is disabled in this workspace (disabled_server_tools)',
    )
  })

  test("the server tool's parameters: the panel's rule under tools[i], max_tool_calls 1 to 16, default 8", () => {
    expect(checkFusionParameters({ tools: [{ type: "openrouter:fusion" }] }, settings)).toBe("tools[0].type: fusion cannot be a tool of fusion's own panel")
    expect(checkFusionParameters({ tools: [{ parameters: {} }] }, settings)).toBe("tools[0].type: is missing")
    expect(checkFusionParameters({ tools: "web" }, settings)).toContain("tools")
    expect(checkFusionParameters({ max_tool_calls: 2.5 }, settings)).toContain("max_tool_calls: Expected an integer")
    expect(checkFusionParameters({}, settings)).toMatchObject({ panel: { maxToolCalls: 8 } })
    expect(checkFusionParameters({ max_tool_calls: 16, tools: [{ type: "openrouter:web_fetch", parameters: { max_uses: 2 } }] }, settings)).toMatchObject({
      panel: { maxToolCalls: 16, tools: [{ parameters: { max_uses: 2 } }] },
    })
  })
})
