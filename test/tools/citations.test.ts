/**
 * URL citations (issue 24 §2, §3): links the answer cites that match a server tool's `citable`
 * results become `url_citation` annotations `{type, url, title, start_index, end_index}` on the
 * output text, streamed as `response.output_text.annotation.added`, and the server tool's item
 * takes its place in the output between the turns' messages.
 */
import { describe, expect, test } from "bun:test"
import { ResponseAssembler, citationsIn, resultBaseOf } from "../../src/http/responses/assembler.js"
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
    sse += a.serverToolItem({ type: "openrouter:web_search", status: "completed" })
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
