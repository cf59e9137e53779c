/**
 * What a stream of the server-tool loop shows while a tool runs: the
 * tool's item is added in progress before the tool runs and done after it (same id, same
 * output_index); between them the official SDK's progress events (`response.web_search_call.*`,
 * `response.fusion_call.*`), written as they happen; web_fetch and datetime have only added/done.
 * Read by `@openrouter/sdk` (its zod schemas: an event or item that does not validate comes out as
 * UNKNOWN, which the tests refuse) and by `openai`'s stream reader. And keep-alive comments while
 * a slow tool runs, on all three client formats.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as errors from "@openrouter/sdk/models/errors"
import type OpenAI from "openai"
import { type MockSearch, startMockSearch } from "../../scripts/mock-search.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { endpoint, mockProvider, model } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { openaiAt, openRouterAt } from "../support/sdk.js"
import { checkStreamRules, parseSse } from "../support/sse.js"
import { ANALYSIS, fusionCatalog } from "../tools/support.js"

let mock: MockUpstream
let search: MockSearch
let gw: TestGateway & { stop: () => Promise<void> }

/** Keep-alive comments after this much silence: far below the slow panelist's delay. */
const KEEP_ALIVE_MS = 20
const SLOW_PANEL_MS = 400

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  search = await startMockSearch()
  const panel = fusionCatalog(mock)
  gw = await startTestGateway({
    streamKeepAliveMs: KEEP_ALIVE_MS,
    catalog: {
      providers: [
        ...panel.providers,
        mockProvider(mock, "outer"),
        mockProvider(mock, "outer-anth", {}, { kind: "anthropic" }),
        mockProvider(mock, "pslow", { "x-mock-chunk-uri": encodeURIComponent("Slow answer."), "x-mock-tokens": "1", "x-mock-delay-ms": String(SLOW_PANEL_MS) }),
      ],
      models: [
        ...panel.models,
        model("test/outer", endpoint("outer", 1, 2)),
        model("test/outer-anth", endpoint("outer-anth", 1, 2)),
        model("test/slow", endpoint("pslow", 1, 2)),
      ],
      search: { engine: "searxng", base_url: `${search.url}/searxng`, pricing: { request: 0.001 } },
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  await search?.stop()
  await mock?.stop()
})

const sdk = () => openRouterAt(gw)
const openai = () => openaiAt(gw)

const WEB_SEARCH = { model: "test/outer", input: "news about widgets", tools: [{ type: "openrouter:web_search" as const }] }
const FUSION_PARAMETERS = { analysis_models: ["test/a", "test/fail"], model: "test/judge", tools: [] }
const FUSION = { model: "test/outer", input: "What is the capital of France?", tools: [{ type: "openrouter:fusion" as const, parameters: FUSION_PARAMETERS }] }
const SLOW_FUSION = [{ type: "openrouter:fusion", parameters: { analysis_models: ["test/slow"], model: "test/judge", tools: [] } }]

/** An event as the SDK parsed it (camelCase keys); an event or item it could not validate has `isUnknown`. */
type Parsed = Record<string, unknown> & { readonly type: string }

/** Every event of a streamed request, as the SDK parsed them; fails on one the SDK did not validate. */
const sdkEvents = async (request: Record<string, unknown>): Promise<Array<Parsed>> => {
  const events: Array<Parsed> = []
  try {
    const stream = await sdk().responses.send({ responsesRequest: { ...request, stream: true } as never })
    if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
    for await (const event of stream) events.push(event as unknown as Parsed)
  } catch (e) {
    if (e instanceof errors.ResponseValidationError) throw new Error(`ResponseValidationError: ${e.pretty()}`)
    throw e
  }
  const unknown = events.filter((e) => e["isUnknown"] === true || (e["item"] as { isUnknown?: boolean } | undefined)?.isUnknown === true)
  expect(unknown.map((e) => JSON.stringify(e["raw"] ?? e["item"]))).toEqual([])
  return events
}

/** The events of the item `id` from its added to its done, and where the next turn's first text delta is. */
const lifeOf = (events: ReadonlyArray<Parsed>, type: string) => {
  const added = events.findIndex((e) => e.type === "response.output_item.added" && (e["item"] as { type: string }).type === type)
  expect(added).toBeGreaterThan(-1)
  const item = events[added]?.["item"] as { id: string; status: string }
  const index = events[added]?.["outputIndex"] as number
  const done = events.findIndex((e) => e.type === "response.output_item.done" && (e["item"] as { id: string }).id === item.id)
  const between = events.slice(added + 1, done)
  const textAt = events.findIndex((e) => e.type === "response.output_text.delta")
  return { added, done, item, index, between, textAt, doneItem: events[done]?.["item"] as Record<string, unknown> }
}

describe("web_search: added in progress, then in_progress, searching, completed, then done", () => {
  test("@openrouter/sdk validates every event; the order holds and all comes before the next turn's text", async () => {
    const events = await sdkEvents(WEB_SEARCH)
    const life = lifeOf(events, "openrouter:web_search")
    expect(life.item.status).toBe("in_progress")
    expect(life.between.map((e) => e.type)).toEqual([
      "response.web_search_call.in_progress",
      "response.web_search_call.searching",
      "response.web_search_call.completed",
    ])
    for (const e of life.between) expect(e).toMatchObject({ itemId: life.item.id, outputIndex: life.index })
    expect(life.doneItem).toMatchObject({ id: life.item.id, status: "completed" })
    expect(events[life.done]?.["outputIndex"]).toBe(life.index)
    expect(life.textAt).toBeGreaterThan(life.done)
    expect(events[events.length - 1]?.type).toBe("response.completed")
    const final = (events[events.length - 1]?.["response"] as { output: Array<{ id: string; type: string; status: string }> } | undefined)?.output
    expect(final?.[life.index]).toMatchObject({ id: life.item.id, type: "openrouter:web_search", status: "completed" })
  })

  test("the raw stream keeps the strict rules (sequence numbers, every item added then done)", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { ...WEB_SEARCH, stream: true } })
    const { events } = parseSse(await res.text())
    checkStreamRules(events)
  })
})

describe("fusion: the panel's and the analysis' progress between the item's added and done", () => {
  test("@openrouter/sdk validates every fusion_call event, in the run's order, before the next turn's text", async () => {
    // The SDK's request types are camelCase (it sends analysis_models).
    const events = await sdkEvents({ ...FUSION, tools: [{ type: "openrouter:fusion", parameters: { analysisModels: FUSION_PARAMETERS.analysis_models, model: "test/judge", tools: [] } }] })
    const life = lifeOf(events, "openrouter:fusion")
    const types = life.between.map((e) => e.type)
    expect(types[0]).toBe("response.fusion_call.in_progress")
    expect(types.slice(1, 3)).toEqual(["response.fusion_call.panel.added", "response.fusion_call.panel.added"])
    expect([...types.slice(3, 5)].sort()).toEqual(["response.fusion_call.panel.completed", "response.fusion_call.panel.failed"])
    expect(types.slice(5)).toEqual(["response.fusion_call.analysis.in_progress", "response.fusion_call.analysis.completed", "response.fusion_call.completed"])
    for (const e of life.between) expect(e).toMatchObject({ itemId: life.item.id, outputIndex: life.index })
    expect(life.between.find((e) => e.type === "response.fusion_call.panel.completed")).toMatchObject({ model: "test/a", content: "Answer A: Paris." })
    expect(life.between.find((e) => e.type === "response.fusion_call.panel.failed")).toMatchObject({ model: "test/fail", statusCode: 502 })
    expect(life.between.find((e) => e.type === "response.fusion_call.analysis.in_progress")).toMatchObject({ analystModel: "test/judge", judgeModel: "test/judge" })
    const analysis = life.between.find((e) => e.type === "response.fusion_call.analysis.completed")?.["analysis"]
    expect(analysis).toMatchObject({ consensus: ANALYSIS.consensus, blindSpots: ANALYSIS.blind_spots })
    expect(life.doneItem).toMatchObject({ id: life.item.id, status: "completed", responses: [{ model: "test/a", content: "Answer A: Paris." }] })
    expect(life.textAt).toBeGreaterThan(life.done)
    expect(events[events.length - 1]?.type).toBe("response.completed")
  })
})

describe("web_fetch and datetime: only added and done", () => {
  test("a datetime call's item has no progress events; its added item validates (timezone known, no time yet)", async () => {
    const events = await sdkEvents({ model: "test/outer", input: "time?", tools: [{ type: "openrouter:datetime", parameters: { timezone: "Asia/Tokyo" } }] })
    const life = lifeOf(events, "openrouter:datetime")
    expect(life.between).toEqual([])
    expect(life.item).toMatchObject({ status: "in_progress", timezone: "Asia/Tokyo", datetime: "" })
    expect(life.doneItem).toMatchObject({ status: "completed", timezone: "Asia/Tokyo" })
  })

  test("a web_fetch call's item has no progress events", async () => {
    // The mock model fetches the first URL of the message; a refused (private) address is a failed fetch, still an item.
    const events = await sdkEvents({ model: "test/outer", input: "read http://127.0.0.1:1/x", tools: [{ type: "openrouter:web_fetch" }] })
    const life = lifeOf(events, "openrouter:web_fetch")
    expect(life.between).toEqual([])
    expect(life.doneItem).toMatchObject({ status: "incomplete" })
  })
})

describe("openai's stream reader", () => {
  test("responses.stream() takes the web_search_call events (OpenAI's own) and assembles the items", async () => {
    const runner = openai().responses.stream(WEB_SEARCH as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    const types: Array<string> = []
    runner.on("event", (e) => types.push(e.type))
    const final = await runner.finalResponse()
    expect(types.filter((t) => t.startsWith("response.web_search_call."))).toEqual([
      "response.web_search_call.in_progress",
      "response.web_search_call.searching",
      "response.web_search_call.completed",
    ])
    expect(final.output.map((i) => [i.type as string, (i as { status?: string }).status])).toEqual([
      ["openrouter:web_search", "completed"],
      ["message", "completed"],
    ])
    expect(final.output_text).toStartWith("Tool output: ")
  })

  test("fusion: openai's helper throws on event types it does not know, so its client gets added/done without fusion_call events", async () => {
    const runner = openai().responses.stream(FUSION as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    const types: Array<string> = []
    runner.on("event", (e) => types.push(e.type))
    const final = await runner.finalResponse()
    expect(types.filter((t) => t.startsWith("response.fusion_call."))).toEqual([])
    expect(final.output.map((i) => [i.type as string, (i as { status?: string }).status])).toEqual([
      ["openrouter:fusion", "completed"],
      ["message", "completed"],
    ])
  })

  test("(why) the same helper under another User-Agent gets the fusion_call events and throws on the first", async () => {
    const other = openaiAt(gw, gw.adminKey, { defaultHeaders: { "User-Agent": "another-client/1" } })
    const runner = other.responses.stream(FUSION as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    await expect(runner.finalResponse()).rejects.toThrow("Unhandled response stream event")
  })
})

/** The SSE blocks of a raw stream in order: comments as `:…`, events by their type. */
const blocksOf = (text: string): Array<string> =>
  text
    .split("\n\n")
    .filter((b) => b.trim() !== "")
    .map((b) => (b.startsWith(":") ? b.trim() : (/"type":"([^"]+)"/.exec(b)?.[1] ?? b)))

describe("keep-alive while a tool runs", () => {
  test("Responses: comments between the slow fusion item's added and its done", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "test/outer", input: "q", stream: true, tools: SLOW_FUSION } })
    const text = await res.text()
    const blocks = blocksOf(text)
    const started = blocks.indexOf("response.fusion_call.in_progress")
    const ended = blocks.indexOf("response.fusion_call.completed")
    expect(started).toBeGreaterThan(-1)
    expect(blocks.slice(started, ended)).toContain(": keep-alive")
    checkStreamRules(parseSse(text).events)
  })

  test("Chat Completions: comments while the tool runs, before the answer's text; the openai client reads it", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "test/outer", stream: true, messages: [{ role: "user", content: "q" }], tools: SLOW_FUSION },
    })
    const text = await res.text()
    const comment = text.indexOf(": keep-alive")
    expect(comment).toBeGreaterThan(-1)
    expect(comment).toBeLessThan(text.indexOf("Tool output"))
    expect(text.trimEnd()).toEndWith("data: [DONE]")
    const stream = await openai().chat.completions.create({
      model: "test/outer",
      stream: true,
      messages: [{ role: "user", content: "q" }],
      tools: SLOW_FUSION as unknown as Array<OpenAI.Chat.ChatCompletionTool>,
    })
    let content = ""
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? ""
    expect(content).toStartWith("Tool output: ")
  })

  test("Messages: comments while the tool runs, before the answer's text", async () => {
    const res = await gw.fetch("/v1/messages", {
      method: "POST",
      json: { model: "test/outer-anth", max_tokens: 64, stream: true, messages: [{ role: "user", content: "q" }], tools: SLOW_FUSION },
    })
    const text = await res.text()
    const comment = text.indexOf(": keep-alive")
    expect(comment).toBeGreaterThan(-1)
    expect(comment).toBeLessThan(text.indexOf("Tool output"))
    expect(text).toContain("event: message_stop")
  })
})
