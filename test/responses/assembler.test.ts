import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import OpenAI from "openai"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { ResponseAssembler, type ResultBase, resultBaseOf } from "../../src/formats/responses/assembler.js"
import { debugChunk } from "../../src/formats/sse.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import type { Usage } from "../../src/domain/pricing.js"
import { textAnswerTypes } from "../support/sse.js"
import { counterIds, decodeResult, parseSse, payloads, REQUIRED_RESULT_KEYS } from "./helpers.js"
import { callDelta, callStart, finishWith, text, thinking, usageOf } from "../support/provider-events.js"

const BASE: ResultBase = { id: "resp_test", created_at: 1_700_000_000, model: "acme/model-1" }
const USAGE: Usage = { inputTokens: 12, cachedTokens: 4, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 2 }

const usage = usageOf(USAGE)

/** Runs one stream through the assembler: start, one push per batch, then finish (or fail). */
const run = (
  batches: ReadonlyArray<ReadonlyArray<ProviderEvent>>,
  end: { readonly fail?: { code: string; message: string } } = {},
  base: ResultBase = BASE,
) => {
  const assembler = new ResponseAssembler(base, { stream: true, newId: counterIds(), now: () => 1_700_000_009 })
  let sse = assembler.start()
  for (const batch of batches) sse += sseText(assembler.push(batch))
  sse += end.fail === undefined ? assembler.finish({ cost: 0.0012 }) : assembler.fail(end.fail)
  return { assembler, sse, events: parseSse(sse) }
}

/** A push's SSE text: a batch with `text_literals` gives it as bytes. */
const sseText = (out: string | Uint8Array): string => (typeof out === "string" ? out : new TextDecoder().decode(out))

const types = (sse: string) => payloads(parseSse(sse)).map((e) => e.type)

const ITEM_SCOPED = new Set([
  "response.content_part.added",
  "response.content_part.done",
  "response.output_text.delta",
  "response.output_text.done",
  "response.function_call_arguments.delta",
  "response.function_call_arguments.done",
  "response.reasoning_summary_part.added",
  "response.reasoning_summary_part.done",
  "response.reasoning_summary_text.delta",
  "response.reasoning_summary_text.done",
])

/** The rules a strict client enforces on any stream (wire-compat.md, "Streaming"). */
const expectStrictStream = (sse: string) => {
  const events = parseSse(sse)
  expect(events.at(-1)?.data).toBe("[DONE]")
  expect(events.filter((e) => e.data === "[DONE]").length).toBe(1)
  const list = payloads(events)
  expect(list[0].type).toBe("response.created")
  expect(list[1].type).toBe("response.in_progress")
  expect(["response.completed", "response.failed"]).toContain(String(list.at(-1)?.type))
  expect(list.map((e) => e.sequence_number)).toEqual(list.map((_, i) => i))

  const ids: Array<string> = []
  let open: number | undefined
  for (const e of list) {
    const type = String(e.type)
    if (type === "response.output_item.added") {
      expect(open).toBeUndefined()
      expect(e.output_index).toBe(ids.length) // output_index never skips
      const item = e.item as { id: string; type: string; status?: string }
      ids.push(item.id)
      open = ids.length - 1
      if (item.type !== "reasoning") expect(item.status).toBe("in_progress")
    } else if (type === "response.output_item.done") {
      expect(e.output_index).toBe(open)
      expect((e.item as { id: string }).id).toBe(ids[open ?? -1])
      open = undefined
    } else if (ITEM_SCOPED.has(type)) {
      expect(e.output_index).toBe(open)
      expect(e.item_id).toBe(ids[open ?? -1])
    } else {
      expect(["response.created", "response.in_progress", "response.completed", "response.failed"]).toContain(type)
      const response = decodeResult(e.response)
      for (const key of REQUIRED_RESULT_KEYS) expect(Object.hasOwn(e.response as object, key)).toBe(true)
      expect(response.id).toBe(BASE.id)
    }
  }
  expect(open).toBeUndefined() // every item added is done
  const last = list.at(-1) as { response: { output: Array<{ id: string }> } }
  expect(last.response.output.map((item) => item.id)).toEqual(ids)
  return list
}

describe("Streaming: a text answer", () => {
  test("emits the exact event sequence of wire-compat with sequence numbers 0, 1, 2, …", () => {
    const { sse, assembler } = run([[text("Hel")], [text("lo"), text(", world")], [usage, finishWith("stop")]])
    expect(types(sse)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ])
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true)
    const list = expectStrictStream(sse)
    expect(list.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta)).toEqual(["Hel", "lo", ", world"])
    expect(assembler.completionText).toBe("Hello, world")
    expect(assembler.finishReason).toBe("stop")
    expect(assembler.usage).toEqual(USAGE)
  })

  test("each event line names the payload's type; deltas carry item_id, output_index, content_index, logprobs", () => {
    const { sse } = run([[text("a\n\"b\"")], [finishWith("stop")]])
    const delta = payloads(parseSse(sse)).find((e) => e.type === "response.output_text.delta")
    expect(delta).toEqual({
      type: "response.output_text.delta",
      sequence_number: 4,
      item_id: "msg_1",
      output_index: 0,
      content_index: 0,
      delta: 'a\n"b"',
      logprobs: [],
    })
  })

  test("lifecycle events carry the full result: in_progress with output [], completed with items, usage and completed_at", () => {
    const { sse } = run([[text("Hi")], [usage, finishWith("stop")]])
    const list = payloads(parseSse(sse))
    const created = decodeResult(list[0].response)
    expect(created.status).toBe("in_progress")
    expect(created.output).toEqual([])
    expect(created.completed_at).toBeNull()
    const part = list.find((e) => e.type === "response.content_part.added")
    expect(part?.part).toEqual({ type: "output_text", text: "", annotations: [], logprobs: [] })
    const added = list.find((e) => e.type === "response.output_item.added")
    expect(added?.item).toEqual({ type: "message", id: "msg_1", role: "assistant", status: "in_progress", content: [] })

    const completed = list.at(-1) as { response: unknown }
    const result = decodeResult(completed.response)
    expect(result.status).toBe("completed")
    expect(result.completed_at).toBe(1_700_000_009)
    expect(result.error).toBeNull()
    expect(result.incomplete_details).toBeNull()
    expect(result.output).toEqual([
      {
        type: "message",
        id: "msg_1",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: "Hi", annotations: [], logprobs: [] }],
      },
    ])
    expect(result.usage).toEqual({
      input_tokens: 12,
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: 19,
      cost: 0.0012,
    })
  })

  test("usage in the result is the Responses shape only (no prompt_tokens / completion_tokens)", () => {
    const { sse } = run([[text("Hi"), usage, finishWith("stop")]])
    expect(sse).not.toContain("prompt_tokens")
    expect(sse).not.toContain("completion_tokens")
  })
})

describe("Streaming: function calls", () => {
  test("a call: output_item.added (arguments \"\", in_progress) → arguments deltas → arguments.done → output_item.done", () => {
    const { sse, assembler } = run([
      [callStart(0, "call_abc", "get_weather")],
      [callDelta(0, '{"city":'), callDelta(0, '"Paris"}')],
      [usage, finishWith("tool_calls")],
    ])
    expect(types(sse)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ])
    const list = expectStrictStream(sse)
    expect(list[2].item).toEqual({
      type: "function_call",
      id: "fc_1",
      call_id: "call_abc",
      name: "get_weather",
      arguments: "",
      status: "in_progress",
    })
    expect(list[3]).toEqual({
      type: "response.function_call_arguments.delta",
      sequence_number: 3,
      item_id: "fc_1",
      output_index: 0,
      delta: '{"city":',
    })
    expect(list[5]).toMatchObject({ item_id: "fc_1", output_index: 0, name: "get_weather", arguments: '{"city":"Paris"}' })
    expect(list[6].item).toEqual({
      type: "function_call",
      id: "fc_1",
      call_id: "call_abc",
      name: "get_weather",
      arguments: '{"city":"Paris"}',
      status: "completed",
    })
    expect(assembler.result().status).toBe("completed")
  })

  test("parallel calls become consecutive items; a new call closes the previous one", () => {
    const { sse } = run([
      [callStart(0, "call_1", "a"), callDelta(0, "{}")],
      [callStart(1, "call_2", "b"), callDelta(1, '{"x":1}')],
      [finishWith("tool_calls")],
    ])
    const list = expectStrictStream(sse)
    const done = list.filter((e) => e.type === "response.output_item.done").map((e) => e.item)
    expect(done).toEqual([
      { type: "function_call", id: "fc_1", call_id: "call_1", name: "a", arguments: "{}", status: "completed" },
      { type: "function_call", id: "fc_2", call_id: "call_2", name: "b", arguments: '{"x":1}', status: "completed" },
    ])
  })

  test("a repeated start of the open call is ignored; a delta without a start opens a call with a generated call_id", () => {
    const { sse } = run([[callStart(0, "call_1", "a"), callStart(0, "call_1", "a"), callDelta(0, "{}")], [callDelta(3, "[]")], [finishWith("tool_calls")]])
    const list = expectStrictStream(sse)
    const done = list.filter((e) => e.type === "response.output_item.done").map((e) => e.item as Record<string, unknown>)
    expect(done.length).toBe(2)
    expect(done[1]).toMatchObject({ call_id: "call_3", name: "", arguments: "[]" })
  })

  test("a late delta for a call whose item is already done is dropped (a strict client takes no more)", () => {
    const { sse, assembler } = run([[callStart(0, "call_1", "a"), callDelta(0, "{}")], [callStart(1, "call_2", "b")], [callDelta(0, " ")], [finishWith("tool_calls")]])
    expectStrictStream(sse)
    expect(assembler.result().output.map((i) => (i.type === "function_call" ? i.arguments : ""))).toEqual(["{}", ""])
  })

  test("a call begun before the open one's arguments are whole waits, and the open one keeps its later deltas", () => {
    const { sse, assembler } = run([[callStart(0, "call_1", "a"), callDelta(0, "{")], [callStart(1, "call_2", "b")], [callDelta(0, "}")], [finishWith("tool_calls")]])
    expectStrictStream(sse)
    expect(assembler.result().output.map((i) => (i.type === "function_call" ? i.arguments : ""))).toEqual(["{}", ""])
  })
})

describe("Streaming: reasoning then text", () => {
  test("a reasoning item with summary events, closed when the message starts", () => {
    const { sse, assembler } = run([[thinking("Let me "), thinking("think.")], [text("Answer")], [finishWith("stop")]])
    expect(types(sse)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ])
    const list = expectStrictStream(sse)
    expect(list[2].item).toEqual({ type: "reasoning", id: "rs_1", summary: [] })
    expect(list[3]).toMatchObject({ item_id: "rs_1", output_index: 0, summary_index: 0, part: { type: "summary_text", text: "" } })
    expect(list[4]).toMatchObject({ item_id: "rs_1", output_index: 0, summary_index: 0, delta: "Let me " })
    expect(list[6]).toMatchObject({ item_id: "rs_1", summary_index: 0, text: "Let me think." })
    expect(list[8].item).toEqual({ type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "Let me think." }] })
    expect(list[9]).toMatchObject({ output_index: 1, item: { type: "message", id: "msg_2" } })
    expect(assembler.reasoningText).toBe("Let me think.")
    expect(assembler.completionText).toBe("Answer")
  })
})

describe("Streaming: mixed items", () => {
  test("reasoning, text, two calls, text again: items in arrival order, indexes 0..4, ids consistent", () => {
    const { sse, assembler } = run([
      [thinking("plan")],
      [text("I will call tools. ")],
      [callStart(0, "call_a", "search"), callDelta(0, '{"q":"x"}')],
      [callStart(1, "call_b", "fetch"), callDelta(1, '{"u":"y"}')],
      [text("Done.")],
      [usage, finishWith("stop")],
    ])
    const list = expectStrictStream(sse)
    const added = list.filter((e) => e.type === "response.output_item.added").map((e) => e.item as { type: string; id: string })
    expect(added.map((i) => i.type)).toEqual(["reasoning", "message", "function_call", "function_call", "message"])
    expect(added.map((i) => i.id)).toEqual(["rs_1", "msg_2", "fc_3", "fc_4", "msg_5"])
    const result = decodeResult(assembler.result())
    expect(result.output.length).toBe(5)
    expect(assembler.completionText).toBe("I will call tools. Done.")
  })

  test("completion and reasoning text before the end: closed items, then the open one", () => {
    const assembler = new ResponseAssembler(BASE, { stream: true })
    assembler.start()
    assembler.push([thinking("plan "), thinking("more"), text("Hello, ")])
    assembler.push([callStart(0, "call_a", "search"), thinking("again"), text("wor"), text("ld")])
    // Not finished: the open message counts, each delta once.
    expect(assembler.completionText).toBe("Hello, world")
    expect(assembler.reasoningText).toBe("plan moreagain")
    assembler.finish()
    expect(assembler.completionText).toBe("Hello, world")
    expect(assembler.reasoningText).toBe("plan moreagain")
  })

  test("empty deltas open nothing", () => {
    const { sse } = run([[text(""), thinking(""), callDelta(0, "")], [finishWith("stop")]])
    expect(types(sse)).toEqual(["response.created", "response.in_progress", "response.completed"])
    expectStrictStream(sse)
  })
})

describe("Streaming: a failure after the stream began", () => {
  test("closes the open item as incomplete, then response.failed with status failed and error {code, message}, then [DONE]", () => {
    const { sse, assembler } = run([[text("partial")]], { fail: { code: "server_error", message: "upstream reset the connection" } })
    expect(types(sse)).toEqual(textAnswerTypes(1, "response.failed"))
    const list = expectStrictStream(sse)
    expect((list[7].item as { status: string }).status).toBe("incomplete")
    const result = decodeResult(list.at(-1)?.response)
    expect(result.status).toBe("failed")
    expect(result.error).toEqual({ code: "server_error", message: "upstream reset the connection" })
    expect(result.output[0]).toMatchObject({ type: "message", status: "incomplete" })
    expect(sse.endsWith("data: [DONE]\n\n")).toBe(true)
    expect(assembler.status).toBe("failed")
  })

  test("an upstream that finishes with reason error ends as response.failed", () => {
    const { sse } = run([[text("x"), finishWith("error")]])
    const list = expectStrictStream(sse)
    expect(list.at(-1)?.type).toBe("response.failed")
    expect(decodeResult(list.at(-1)?.response).error?.code).toBe("server_error")
  })

  test("after the terminal event nothing more is written", () => {
    const { assembler } = run([[text("x")]])
    expect(assembler.push([text("more")])).toBe("")
    expect(assembler.finish()).toBe("")
    expect(assembler.fail({ code: "x", message: "y" })).toBe("")
  })
})

describe("Streaming: the token limit", () => {
  test("finish reason length → status incomplete with incomplete_details {reason: max_output_tokens}", () => {
    const { sse } = run([[text("cut sho")], [usage, finishWith("length")]])
    const list = expectStrictStream(sse)
    expect(list.at(-1)?.type).toBe("response.completed")
    const result = decodeResult(list.at(-1)?.response)
    expect(result.status).toBe("incomplete")
    expect(result.incomplete_details).toEqual({ reason: "max_output_tokens" })
    expect(result.output[0]).toMatchObject({ status: "incomplete" })
  })

  test("finish reason content_filter → status incomplete with reason content_filter", () => {
    const { sse } = run([[text("x"), finishWith("content_filter")]])
    const result = decodeResult(payloads(parseSse(sse)).at(-1)?.response)
    expect(result.incomplete_details).toEqual({ reason: "content_filter" })
  })
})

describe("Non-streaming", () => {
  test("every method returns \"\" and result() is the same object a stream would complete with", () => {
    const batches = [[thinking("r")], [text("Hello")], [callStart(0, "call_1", "f"), callDelta(0, "{}")], [usage, finishWith("tool_calls")]]
    const quiet = new ResponseAssembler(BASE, { stream: false, newId: counterIds(), now: () => 1_700_000_009 })
    expect(quiet.start()).toBe("")
    for (const batch of batches) expect(quiet.push(batch)).toBe("")
    expect(quiet.finish({ cost: 0.0012 })).toBe("")
    const streamed = run(batches)
    const completed = payloads(streamed.events).at(-1)?.response
    expect(quiet.result()).toEqual(decodeResult(completed))
    for (const key of REQUIRED_RESULT_KEYS) expect(Object.hasOwn(quiet.result(), key)).toBe(true)
  })

  test("extras: usage override, cost, is_byok and service_metadata", () => {
    const a = new ResponseAssembler(BASE, { stream: false })
    a.push([text("x"), usage, finishWith("stop")])
    a.finish({ usage: { ...USAGE, outputTokens: 1 }, cost: 0.5, isByok: true, serviceMetadata: { strategy: "direct" } })
    const result = decodeResult(a.result())
    expect(result.usage).toMatchObject({ output_tokens: 1, total_tokens: 13, cost: 0.5, is_byok: true })
    expect(result.service_metadata).toEqual({ strategy: "direct" })
    expect(result.output[0].id).toMatch(/^msg_[0-9a-f]{24}$/)
  })

  test("no usage from the upstream → zero usage, still the full shape", () => {
    const a = new ResponseAssembler(BASE, { stream: false })
    a.push([text("x")])
    a.finish()
    expect(decodeResult(a.result()).usage).toEqual({
      input_tokens: 0,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 0,
    })
  })
})

describe("The result base", () => {
  test("defaults: parallel_tool_calls true, tool_choice auto, tools [], text format text, service_tier auto", () => {
    const result = decodeResult(new ResponseAssembler(BASE, { stream: false }).result())
    expect(result).toMatchObject({
      parallel_tool_calls: true,
      tool_choice: "auto",
      tools: [],
      text: { format: { type: "text" } },
      instructions: null,
      metadata: null,
      temperature: null,
      max_output_tokens: null,
      service_tier: "auto",
    })
  })

  test("resultBaseOf echoes the request's settings; function tools get null description/parameters/strict", () => {
    const req = Either.getOrThrow(
      decodeResponsesRequest({
        input: "hi",
        instructions: "be brief",
        metadata: { k: "v" },
        temperature: 0.3,
        top_p: 0.9,
        parallel_tool_calls: null,
        tool_choice: { type: "function", name: "f" },
        tools: [{ type: "function", name: "f" }, { type: "web_search", search_context_size: "low" }],
        max_output_tokens: 100,
        service_tier: "flex",
        text: { format: { type: "json_object" }, verbosity: "low" },
      }),
    )
    const base = resultBaseOf(req, { id: "resp_x", createdAt: 5, model: "m" })
    const result = decodeResult(new ResponseAssembler(base, { stream: false }).result())
    expect(result).toMatchObject({
      id: "resp_x",
      created_at: 5,
      model: "m",
      instructions: "be brief",
      metadata: { k: "v" },
      temperature: 0.3,
      top_p: 0.9,
      frequency_penalty: null,
      parallel_tool_calls: true,
      tool_choice: { type: "function", name: "f" },
      max_output_tokens: 100,
      service_tier: "flex",
      text: { format: { type: "json_object" }, verbosity: "low" },
    })
    expect(result.tools).toEqual([
      { type: "function", name: "f", description: null, parameters: null, strict: null },
      { type: "web_search", search_context_size: "low" },
    ])
    expect(resultBaseOf(req, { model: "m" }).id).toMatch(/^resp_[0-9a-f]{24}$/)
  })
})

describe("Debug chunk", () => {
  test("carries the upstream body, names its type, and takes no sequence number", () => {
    const chunk = debugChunk({ model: "x", messages: [] })
    expect(chunk).toBe('event: debug\ndata: {"type":"debug","debug":{"echo_upstream_body":{"model":"x","messages":[]}}}\n\n')
    const { sse } = run([[text("x")]])
    expect(payloads(parseSse(sse))[0].sequence_number).toBe(0)
  })
})

describe("The openai SDK accepts the stream", () => {
  const sdkOver = (sse: string) =>
    new OpenAI({
      apiKey: "sk-test",
      baseURL: "http://gateway.test/v1",
      maxRetries: 0,
      fetch: async () => new Response(sse, { headers: { "content-type": "text/event-stream" } }),
    })

  test("responses.stream() accumulates text, reasoning and calls to the same final response", async () => {
    const { sse, assembler } = run([
      [thinking("hmm")],
      [text("Hello ")],
      [text("there")],
      [callStart(0, "call_1", "f"), callDelta(0, '{"a":1}')],
      [usage, finishWith("tool_calls")],
    ])
    const stream = sdkOver(sse).responses.stream({ model: "acme/model-1", input: "hi" })
    const deltas: Array<string> = []
    stream.on("response.output_text.delta", (e) => deltas.push(e.delta))
    const final = await stream.finalResponse()
    expect(deltas).toEqual(["Hello ", "there"])
    expect(final.output_text).toBe("Hello there")
    expect(final.status).toBe("completed")
    expect(final.output.map((i) => i.type)).toEqual(["reasoning", "message", "function_call"])
    expect(final.usage?.total_tokens).toBe(19)
    expect(final.id).toBe(assembler.result().id)
  })

  test("responses.stream() accepts an incomplete answer (token limit)", async () => {
    const { sse } = run([[text("cut")], [finishWith("length")]])
    const final = await sdkOver(sse).responses.stream({ model: "acme/model-1", input: "hi" }).finalResponse()
    expect(final.status).toBe("incomplete")
    expect(final.incomplete_details?.reason).toBe("max_output_tokens")
    expect(final.output_text).toBe("cut")
  })

  test("responses.stream() accepts a failed stream with its terminal event", async () => {
    const { sse } = run([[text("part")]], { fail: { code: "server_error", message: "boom" } })
    const final = await sdkOver(sse).responses.stream({ model: "acme/model-1", input: "hi" }).finalResponse()
    expect(final.status).toBe("failed")
    expect(final.error).toEqual({ code: "server_error", message: "boom" } as typeof final.error)
  })
})

describe("Streaming: envelope events written as text", () => {
  /** Each event's raw data line, as the client receives it. */
  const rawEvents = (sse: string) =>
    sse
      .slice(0, -2)
      .split("\n\n")
      .filter((block) => block.startsWith("event: "))
      .map((block) => block.slice(block.indexOf("\ndata: ") + 7))

  // The envelope's JSON is built from pieces (the text serialized once); a client must get exactly
  // what JSON.stringify of the event object writes, key order included.
  const check = (sse: string, assembler: ResponseAssembler) => {
    const result = assembler.result()
    let seen = 0
    for (const data of rawEvents(sse)) {
      const e = JSON.parse(data) as Record<string, unknown> & { type: string; sequence_number: number }
      const head = { type: e.type, sequence_number: e.sequence_number }
      const item = typeof e.output_index === "number" ? result.output[e.output_index] : undefined
      switch (e.type) {
        case "response.created":
        case "response.in_progress":
          expect(data).toBe(JSON.stringify({ ...head, response: e.response }))
          break
        case "response.completed":
        case "response.failed":
          expect(data).toBe(JSON.stringify({ ...head, response: result }))
          break
        case "response.output_item.done":
          expect(data).toBe(JSON.stringify({ ...head, output_index: e.output_index, item }))
          break
        case "response.output_item.added": {
          if (item?.type !== "message") continue
          const added = { type: "message", id: item.id, role: "assistant", status: "in_progress", content: [] }
          expect(data).toBe(JSON.stringify({ ...head, output_index: e.output_index, item: added }))
          break
        }
        case "response.content_part.added": {
          if (item?.type !== "message") throw new Error(`${e.type} for a ${item?.type} item`)
          const part = { type: "output_text", text: "", annotations: [], logprobs: [] }
          expect(data).toBe(JSON.stringify({ ...head, item_id: item.id, output_index: e.output_index, content_index: 0, part }))
          break
        }
        case "response.output_text.done":
        case "response.content_part.done": {
          if (item?.type !== "message") throw new Error(`${e.type} for a ${item?.type} item`)
          const at = { item_id: item.id, output_index: e.output_index, content_index: 0 }
          const part = item.content[0]!
          const expected = e.type === "response.output_text.done" ? { ...at, text: part.type === "output_text" ? part.text : "", logprobs: [] } : { ...at, part }
          expect(data).toBe(JSON.stringify({ ...head, ...expected }))
          break
        }
        default:
          continue
      }
      seen++
    }
    return seen
  }

  test("text with quotes, escapes and non-ASCII, between a reasoning item and a call: each done event and the result", () => {
    const { assembler, sse } = run([
      [thinking("Let me think")],
      [text('He said "hi"\n\t\\ — ünïcödé 🎉'), text(" and more")],
      [callStart(0, "call_1", "lookup"), callDelta(0, '{"q":1}')],
      [text("after the call")],
      [usage, finishWith("stop")],
    ])
    // created, in_progress, 2 × (2 message added and 3 message done events), 2 other output_item.done, completed
    expect(check(sse, assembler)).toBe(15)
    expect(assembler.result().output.map((i) => i.type)).toEqual(["reasoning", "message", "function_call", "message"])
  })

  test("an answer cut at the token limit (status incomplete) and one that failed mid-stream", () => {
    const cut = run([[text("partial")], [finishWith("length")]])
    expect(check(cut.sse, cut.assembler)).toBe(8)
    expect(cut.assembler.status).toBe("incomplete")
    const failed = run([[text("so far")]], { fail: { code: "server_error", message: 'upstream "broke"' } })
    expect(check(failed.sse, failed.assembler)).toBe(8)
    expect(failed.assembler.result().output[0]).toMatchObject({ type: "message", status: "incomplete" })
  })

  test("a stream with no output item: created, in_progress and completed", () => {
    const { assembler, sse } = run([[usage, finishWith("stop")]])
    expect(check(sse, assembler)).toBe(3)
  })
})

describe("Text deltas given as the upstream's literals (text_literals)", () => {
  const encoder = new TextEncoder()
  let seed = 11
  const next = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    return seed
  }
  const alphabet = ["a", "Z", " ", "0", '"', "\\", "/", "\n", "\t", "{", "é", "🎉", "\u2028", "~"]
  /** A literal of `delta` as an upstream may write it: JSON.stringify's, or with `\\u` and `\\/` escapes of its own. */
  const literalOf = (delta: string): string =>
    next() % 3 === 0 ? JSON.stringify(delta).replaceAll("a", "\\u0061").replaceAll("/", "\\/") : JSON.stringify(delta)
  const plain = (literal: string) => /^"[\x20-\x7e]*"$/.test(literal)

  /**
   * One random stream twice: once with every delta a text event carrying its literal, once with
   * the printable-ASCII literals in runs of `text_literals` (in place in a read, bytes around
   * them), the others text events, as the chat translator gives them.
   */
  const randomStream = () => {
    const asEvents: Array<Array<ProviderEvent>> = []
    const asRuns: Array<Array<ProviderEvent>> = []
    for (let b = 0; b < 1 + (next() % 6); b++) {
      const events: Array<ProviderEvent> = []
      const runs: Array<ProviderEvent> = []
      let read = ""
      let spans: Array<number> | undefined
      for (let i = 0; i < next() % 80; i++) {
        if (next() % 23 === 0) {
          // Another item between runs: the message is closed and a new one opened after.
          const other = thinking("hmm")
          events.push(other)
          runs.push(other)
          spans = undefined
          continue
        }
        const delta = Array.from({ length: 1 + (next() % 5) }, () => alphabet[next() % alphabet.length]).join("")
        const literal = literalOf(delta)
        events.push({ type: "text", delta, json: literal })
        if (!plain(literal)) {
          runs.push({ type: "text", delta, json: literal })
          spans = undefined
          continue
        }
        if (spans === undefined) {
          spans = []
          runs.push({ type: "text_literals", source: new Uint8Array(0), spans })
        }
        read += "data: {"
        spans.push(encoder.encode(read).length, encoder.encode(read + literal).length)
        read += `${literal}}\n\n`
      }
      // Every run of the batch points into the same read.
      const source = encoder.encode(read)
      for (let i = 0; i < runs.length; i++) {
        const e = runs[i]!
        if (e.type === "text_literals") runs[i] = { type: "text_literals", source, spans: e.spans }
      }
      asEvents.push(events)
      asRuns.push(runs)
    }
    asEvents.push([usage, finishWith("stop")])
    asRuns.push([usage, finishWith("stop")])
    return { asEvents, asRuns }
  }

  test("streamed: the same SSE text, byte for byte, and the same result as text events with their literals", () => {
    let runsSeen = 0
    for (let round = 0; round < 150; round++) {
      const { asEvents, asRuns } = randomStream()
      runsSeen += asRuns.flat().filter((e) => e.type === "text_literals").length
      const expected = run(asEvents)
      const got = run(asRuns)
      expect(got.sse).toBe(expected.sse)
      expect(got.assembler.result()).toEqual(expected.assembler.result())
      expect(got.assembler.completionText).toBe(expected.assembler.completionText)
    }
    expect(runsSeen).toBeGreaterThan(200)
  })

  test("not streamed: the same result", () => {
    for (let round = 0; round < 50; round++) {
      const { asEvents, asRuns } = randomStream()
      const results = [asEvents, asRuns].map((batches) => {
        const assembler = new ResponseAssembler(BASE, { stream: false, newId: counterIds(), now: () => 1_700_000_009 })
        for (const batch of batches) expect(assembler.push(batch)).toBe("")
        assembler.finish({})
        return assembler.result()
      })
      expect(results[1]).toEqual(results[0]!)
    }
  })

  test("a run of 2,000 deltas: every delta event in order, numbered without a gap, the text whole", () => {
    const words = Array.from({ length: 2000 }, (_, i) => ` w${i}`)
    let read = ""
    const spans: Array<number> = []
    for (const word of words) {
      read += "data: "
      spans.push(read.length, read.length + word.length + 2)
      read += `"${word}"\n\n`
    }
    const { assembler, events } = run([[{ type: "text_literals", source: encoder.encode(read), spans }], [finishWith("stop")]])
    const deltas = payloads(events).filter((e) => e.type === "response.output_text.delta")
    expect(deltas.map((e) => e.delta)).toEqual(words)
    const numbers = payloads(events).map((e) => e.sequence_number)
    expect(numbers).toEqual(numbers.map((_, i) => i))
    expect(assembler.completionText).toBe(words.join(""))
  })

  test("literals longer than the text's byte buffer, and escapes cut at its edge, give the same text", () => {
    // Deltas of ~300 to ~3,000 bytes, with escapes and a surrogate pair split over two literals.
    const deltas = ["a".repeat(1000), 'q"\\/\n'.repeat(700), "x", "b".repeat(1023), "\ud83d", "\ude00 end"]
    const literals = deltas.map((d) => JSON.stringify(d).replace("\\ud83d", "\\uD83D").replace("\\ude00", "\\uDE00"))
    let read = ""
    const spans: Array<number> = []
    for (const literal of literals) {
      read += "data: "
      spans.push(read.length, read.length + literal.length)
      read += `${literal}\n\n`
    }
    const asEvents = run([literals.map((json, i): ProviderEvent => ({ type: "text", delta: deltas[i]!, json })), [finishWith("stop")]])
    const asRun = run([[{ type: "text_literals", source: encoder.encode(read), spans }], [finishWith("stop")]])
    expect(asRun.sse).toBe(asEvents.sse)
    expect(asRun.assembler.completionText).toBe(deltas.join(""))
    expect(asRun.assembler.completionText).toContain("\u{1F600} end")
  })

  test("the bytes of one push are handed out before the next push overwrites them", () => {
    const a = new ResponseAssembler(BASE, { stream: true, newId: counterIds() })
    const b = new ResponseAssembler(BASE, { stream: true, newId: counterIds() })
    a.start()
    b.start()
    const literals = (word: string): ProviderEvent => ({ type: "text_literals", source: encoder.encode(`"${word}"`), spans: [0, word.length + 2] })
    const first = a.push([literals("first")])
    if (typeof first === "string") throw new Error("bytes expected")
    const copy = first.slice()
    const second = b.push([literals("other")])
    expect(new TextDecoder().decode(copy)).toContain('"delta":"first"')
    expect(sseText(second)).toContain('"delta":"other"')
    expect(sseText(second)).not.toContain("first")
  })
})
