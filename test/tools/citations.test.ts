/**
 * URL citations: links the answer cites that match a server tool's `citable`
 * results become `url_citation` annotations `{type, url, title, start_index, end_index}` on the
 * output text, streamed as `response.output_text.annotation.added`, and the server tool's item
 * takes its place in the output between the turns' messages.
 */
import { describe, expect, test } from "bun:test"
import { ResponseAssembler, citationsIn, resultBaseOf } from "../../src/formats/responses/assembler.js"
import type { ResponsesRequest } from "../../src/domain/responses.js"
import { counterIds, decodeResult, parseSse, payloads } from "../responses/helpers.js"

const LINKS = [
  { url: "https://example.com/a", title: "Page A" },
  { url: "https://example.org/b?x=1", title: "Page B" },
]

const base = resultBaseOf({ model: "m", input: "x", stream: true, store: false } as unknown as ResponsesRequest, { id: "resp_1", createdAt: 1, model: "m" })

describe("citationsIn", () => {
  test("each cited URL, in text order, with its title and character range", () => {
    const text = "See https://example.org/b?x=1, and [A](https://example.com/a)."
    expect(citationsIn(text, LINKS)).toEqual([
      { type: "url_citation", url: "https://example.org/b?x=1", title: "Page B", start_index: 4, end_index: 29 },
      { type: "url_citation", url: "https://example.com/a", title: "Page A", start_index: 39, end_index: 60 },
    ])
  })

  test("a longer URL that only starts with a result's is not a citation of it; no link, no annotation", () => {
    expect(citationsIn("https://example.com/abc", LINKS)).toEqual([])
    expect(citationsIn("nothing cited", LINKS)).toEqual([])
  })
})

describe("the assembler with server tools", () => {
  test("streamed: the tool item between the turns' messages; the answer's citations as annotations and events", () => {
    const a = new ResponseAssembler(base, { stream: true, newId: counterIds(), now: () => 2 })
    let sse = a.start()
    sse += a.push([{ type: "text", delta: "Searching." }])
    const call = a.serverToolStarted({ item: { type: "openrouter:web_search" }, eventPrefix: "web_search_call" })
    sse += call.sse
    sse += a.serverToolDone(call, { type: "openrouter:web_search", status: "completed" })
    a.cite(LINKS)
    sse += a.push([{ type: "text", delta: "Per https://example.com/a it is so." }, { type: "finish", reason: "stop" }])
    sse += a.finish({})
    const events = payloads(parseSse(sse))
    const added = events.filter((e) => e["type"] === "response.output_item.added")
    expect(added.map((e) => e["output_index"])).toEqual([0, 1, 2])
    const annotation = events.find((e) => e["type"] === "response.output_text.annotation.added") as Record<string, unknown>
    expect(annotation["output_index"]).toBe(2)
    expect(annotation["annotation_index"]).toBe(0)
    const expected = { type: "url_citation", url: "https://example.com/a", title: "Page A", start_index: 4, end_index: 25 }
    expect(annotation["annotation"]).toEqual(expected)
    const result = decodeResult(a.result())
    expect(result.output.map((i) => i.type)).toEqual(["message", "openrouter:web_search", "message"])
    const first = result.output[0] as unknown as { content: Array<{ annotations: Array<unknown> }> }
    expect(first.content[0]?.annotations).toEqual([])
    const answer = result.output[2] as unknown as { content: Array<{ annotations: Array<unknown> }> }
    expect(answer.content[0]?.annotations).toEqual([expected])
    // The done events and the final result carry the same annotations.
    const done = events.find((e) => e["type"] === "response.output_item.done" && e["output_index"] === 2) as { item: unknown }
    expect(done.item).toEqual(result.output[2])
  })

  test("streamed: a server tool's item is added in progress before it runs, its progress events between, done after (same id and index)", () => {
    const a = new ResponseAssembler(base, { stream: true, newId: counterIds(), now: () => 2 })
    let sse = a.start()
    sse += a.push([{ type: "text", delta: "Let me search." }])
    const call = a.serverToolStarted({ item: { type: "openrouter:web_search", action: { type: "search", query: "q" } }, eventPrefix: "web_search_call" })
    sse += call.sse
    sse += a.serverToolProgress(call, { event: "searching" })
    sse += a.serverToolDone(call, { type: "openrouter:web_search", status: "completed", action: { type: "search", query: "q", sources: [] } })
    sse += a.push([{ type: "text", delta: "Done." }, { type: "finish", reason: "stop" }])
    sse += a.finish({})
    const events = payloads(parseSse(sse))
    const at = (type: string) => events.findIndex((e) => e["type"] === type && (e["output_index"] === 1 || e["item_id"] === call.id))
    const order = ["response.output_item.added", "response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed", "response.output_item.done"]
    const indexes = order.map(at)
    expect(indexes.every((i) => i >= 0)).toBe(true)
    expect([...indexes].sort((x, y) => x - y)).toEqual(indexes)
    // The first message closed before the tool's item; the next turn's text after its done.
    const firstDone = events.findIndex((e) => e["type"] === "response.output_item.done" && e["output_index"] === 0)
    const nextText = events.findIndex((e) => e["type"] === "response.output_text.delta" && e["output_index"] === 2)
    expect(firstDone).toBeLessThan(indexes[0] as number)
    expect(nextText).toBeGreaterThan(indexes[4] as number)
    const added = events[indexes[0] as number] as { item: Record<string, unknown> }
    const done = events[indexes[4] as number] as { output_index: number; item: Record<string, unknown> }
    expect(added.item).toEqual({ type: "openrouter:web_search", action: { type: "search", query: "q" }, id: call.id, status: "in_progress" })
    expect(done.output_index).toBe(1)
    expect(done.item["id"]).toBe(call.id)
    for (const e of events.filter((e) => String(e["type"]).startsWith("response.web_search_call."))) {
      expect(e).toMatchObject({ item_id: call.id, output_index: 1 })
    }
    const result = decodeResult(a.result())
    expect(result.output.map((i) => [i.type, i.status])).toEqual([
      ["message", "completed"],
      ["openrouter:web_search", "completed"],
      ["message", "completed"],
    ])
  })

  test("a tool without progress events (datetime) gets only added and done; an incomplete item no completed event", () => {
    const a = new ResponseAssembler(base, { stream: true, newId: counterIds(), now: () => 2 })
    let sse = a.start()
    const clock = a.serverToolStarted({ item: { type: "openrouter:datetime", datetime: "", timezone: "UTC" } })
    sse += clock.sse + a.serverToolProgress(clock, { event: "searching" })
    sse += a.serverToolDone(clock, { type: "openrouter:datetime", status: "completed", datetime: "2026-01-01T00:00:00+00:00", timezone: "UTC" })
    const search = a.serverToolStarted({ item: { type: "openrouter:web_search" }, eventPrefix: "web_search_call" })
    sse += search.sse + a.serverToolDone(search, { type: "openrouter:web_search", status: "incomplete" })
    sse += a.push([{ type: "text", delta: "x" }, { type: "finish", reason: "stop" }]) + a.finish({})
    const types = payloads(parseSse(sse)).map((e) => e["type"])
    expect(types.slice(2, 8)).toEqual([
      "response.output_item.added",
      "response.output_item.done",
      "response.output_item.added",
      "response.web_search_call.in_progress",
      "response.output_item.done",
      "response.output_item.added",
    ])
  })

  test("an answer that fails while a tool runs ends its item incomplete (done event and result)", () => {
    const a = new ResponseAssembler(base, { stream: true, newId: counterIds(), now: () => 2 })
    let sse = a.start()
    const call = a.serverToolStarted({ item: { type: "openrouter:fusion" }, eventPrefix: "fusion_call" })
    sse += call.sse + a.fail({ code: "timeout", message: "late" })
    // Too late: the answer has ended.
    expect(a.serverToolDone(call, { type: "openrouter:fusion", status: "completed" })).toBe("")
    const events = payloads(parseSse(sse))
    const done = events.find((e) => e["type"] === "response.output_item.done") as { output_index: number; item: Record<string, unknown> }
    expect(done).toMatchObject({ output_index: 0, item: { type: "openrouter:fusion", id: call.id, status: "incomplete" } })
    expect(decodeResult(a.result()).output[0]?.status).toBe("incomplete")
  })

  test("not streamed: the item holds its place and the result has the done item", () => {
    const a = new ResponseAssembler(base, { stream: false, newId: counterIds(), now: () => 2 })
    const call = a.serverToolStarted({ item: { type: "openrouter:datetime", datetime: "", timezone: "UTC" } })
    expect(call.sse).toBe("")
    a.push([{ type: "text", delta: "x" }])
    a.serverToolDone(call, { type: "openrouter:datetime", status: "completed", datetime: "d", timezone: "UTC" })
    a.push([{ type: "finish", reason: "stop" }])
    a.finish({})
    const output = decodeResult(a.result()).output
    expect(output.map((i) => i.type)).toEqual(["openrouter:datetime", "message"])
    expect(output[0]).toMatchObject({ id: call.id, status: "completed", datetime: "d" })
  })

  test("FinishExtras: server_tool_use_details in usage; incompleteReason ends it incomplete", () => {
    const a = new ResponseAssembler(base, { stream: false, newId: counterIds(), now: () => 2 })
    a.push([{ type: "text", delta: "x" }, { type: "finish", reason: "stop" }])
    a.finish({ serverToolUse: { tool_calls_requested: 3, tool_calls_executed: 2, web_search_requests: 1 }, incompleteReason: "max_cost" })
    const result = decodeResult(a.result())
    expect(result.status).toBe("incomplete")
    expect(result.incomplete_details).toEqual({ reason: "max_cost" })
    expect(result.usage?.server_tool_use_details).toEqual({ tool_calls_requested: 3, tool_calls_executed: 2, web_search_requests: 1 })
  })
})
