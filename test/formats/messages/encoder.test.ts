import { describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import type { ResponsesRequest } from "../../../src/domain/responses.js"
import { MessagesEncoder } from "../../../src/formats/messages/encoder.js"
import type { FinishExtras, StreamFailure } from "../../../src/formats/format.js"
import type { ProviderEvent } from "../../../src/providers/types.js"
import type { Usage } from "../../../src/domain/pricing.js"
import { callDelta, callStart, finishWith, text, thinking, usageOf } from "../../support/provider-events.js"

const REQUEST: ResponsesRequest = { stream: true, store: false, model: "acme/model-1" }
const USAGE: Usage = { inputTokens: 100, cachedTokens: 30, cacheWriteTokens: 20, outputTokens: 7, reasoningTokens: 0 }

const usage = usageOf(USAGE)

/** Upstream literals as an adapter gives them: printable-ASCII JSON string literals in place in one read. */
const literals = (...texts: Array<string>): ProviderEvent => {
  let source = "{"
  const spans: Array<number> = []
  for (const t of texts) {
    source += '"x":'
    const start = source.length
    source += JSON.stringify(t).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
    spans.push(start, source.length)
    source += ","
  }
  return { type: "text_literals", source: new TextEncoder().encode(source), spans }
}

const counterIds = () => {
  let n = 0
  return (prefix: string) => `${prefix}_${++n}`
}

const encoder = (stream: boolean, provider?: string) =>
  new MessagesEncoder(REQUEST, { stream, model: "acme/model-1", newId: counterIds(), ...(provider === undefined ? {} : { provider }) })

/** One answer through the encoder: start, one push per batch, then finish (or fail). */
const run = (
  batches: ReadonlyArray<ReadonlyArray<ProviderEvent>>,
  end: { readonly fail?: StreamFailure; readonly extras?: FinishExtras; readonly stream?: boolean } = {},
) => {
  const enc = encoder(end.stream ?? true, "acme")
  let sse = enc.start()
  for (const batch of batches) sse += enc.push(batch)
  sse += end.fail === undefined ? enc.finish(end.extras ?? { cost: 0.5, isByok: false }) : enc.fail(end.fail, end.extras)
  return { enc, sse }
}

interface Frame {
  readonly event: string
  readonly data: Record<string, unknown>
}

/** The SSE text as frames; every frame's `event:` equals its payload's `type`. */
const frames = (sse: string): Array<Frame> => {
  expect(sse.endsWith("\n\n")).toBe(true)
  return sse
    .slice(0, -2)
    .split("\n\n")
    .map((block) => {
      const [eventLine, dataLine, ...rest] = block.split("\n")
      expect(rest).toEqual([])
      expect(eventLine.startsWith("event: ")).toBe(true)
      expect(dataLine.startsWith("data: ")).toBe(true)
      const data = JSON.parse(dataLine.slice(6)) as Record<string, unknown>
      expect(data.type).toBe(eventLine.slice(7))
      return { event: eventLine.slice(7), data }
    })
}

const typesOf = (sse: string) => frames(sse).map((f) => f.event)

/** The real SDK reading `sse` as the answer of POST /v1/messages (its own SSE parser and accumulator). */
const sdkOver = (body: string, contentType: string, status = 200) =>
  new Anthropic({
    apiKey: "sk-test",
    baseURL: "http://gateway.test",
    maxRetries: 0,
    fetch: (async () => new Response(body, { status, headers: { "content-type": contentType } })) as unknown as typeof fetch,
  })

const PARAMS = { model: "acme/model-1", max_tokens: 100, messages: [{ role: "user" as const, content: "Hi" }] }

describe("Messages encoder: JSON message object", () => {
  test("text answer: id, type, role, model, content, stop_reason, stop_sequence, usage, provider", () => {
    const { enc } = run([[text("Hello"), text(", world")], [usage, finishWith("stop")]], { stream: false })
    expect(enc.result()).toEqual({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "acme/model-1",
      content: [{ type: "text", text: "Hello, world" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 50, output_tokens: 7, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, cost: 0.5, is_byok: false },
      provider: "acme",
    })
    expect(enc.status).toBe("completed")
    expect(enc.completionText).toBe("Hello, world")
  })

  test("not streaming, every method returns empty text", () => {
    const enc = encoder(false)
    expect(enc.start()).toBe("")
    expect(enc.push([text("a"), usage])).toBe("")
    expect(enc.finish()).toBe("")
  })

  test("thinking, text and two tool calls become blocks in order; stop reason tool_use", () => {
    const { enc } = run(
      [
        [thinking("Let me "), thinking("think.")],
        [text("Calling.")],
        [callStart(0, "call_a", "get_weather"), callDelta(0, '{"city":'), callDelta(0, '"Paris"}')],
        [callStart(1, "", "get_time"), callDelta(1, "{}")],
        [usage, finishWith("tool_calls")],
      ],
      { stream: false },
    )
    expect(enc.result().content).toEqual([
      { type: "thinking", thinking: "Let me think.", signature: "" },
      { type: "text", text: "Calling." },
      { type: "tool_use", id: "call_a", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "toolu_2", name: "get_time", input: {} },
    ])
    expect(enc.result().stop_reason).toBe("tool_use")
    expect(enc.reasoningText).toBe("Let me think.")
    expect(enc.finishReason).toBe("tool_calls")
  })

  test("a thinking block carries its signature; a redacted block its data", () => {
    const { enc } = run(
      [[thinking("Let me think."), { type: "reasoning_signature", signature: "sig-1" }, { type: "reasoning_signature", signature: "opaque", redacted: true }], [text("Done.")], [usage, finishWith("stop")]],
      { stream: false },
    )
    expect(enc.result().content).toEqual([
      { type: "thinking", thinking: "Let me think.", signature: "sig-1" },
      { type: "redacted_thinking", data: "opaque" },
      { type: "text", text: "Done." },
    ])
  })

  test("arguments that are not a JSON object become an empty input (Anthropic requires an object)", () => {
    const { enc } = run([[callStart(0, "c", "f"), callDelta(0, "[1,2")], [finishWith("tool_calls")]], { stream: false })
    expect(enc.result().content).toEqual([{ type: "tool_use", id: "c", name: "f", input: {} }])
  })

  test("length ends as max_tokens and content_filter as refusal, both incomplete", () => {
    const long = run([[text("a"), finishWith("length")]], { stream: false }).enc
    expect(long.result().stop_reason).toBe("max_tokens")
    expect(long.status).toBe("incomplete")
    const filtered = run([[text("a"), finishWith("content_filter")]], { stream: false }).enc
    expect(filtered.result().stop_reason).toBe("refusal")
  })

  test("usage from the route overrides the upstream's; no usage at all is zeros", () => {
    const charged: Usage = { inputTokens: 10, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 3, reasoningTokens: 0 }
    expect(run([[text("a"), usage]], { stream: false, extras: { usage: charged } }).enc.result().usage).toEqual({
      input_tokens: 10,
      output_tokens: 3,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    })
    expect(run([[text("a")]], { stream: false, extras: {} }).enc.result().usage.output_tokens).toBe(0)
  })

  test("counts that are not counts are no usage (the route estimates)", () => {
    const bad: ProviderEvent = { type: "usage", usage: { ...USAGE, outputTokens: -1 } }
    expect(run([[text("a"), bad]], { stream: false }).enc.usage).toBeUndefined()
  })

  test("service_metadata rides on the result, and openrouter_metadata with the SDK's header", () => {
    const meta = { requested: "acme/model-1", attempt: 1 }
    const plain = run([[text("a")]], { stream: false, extras: { serviceMetadata: meta } }).enc.result()
    expect(plain.service_metadata).toEqual(meta)
    expect(plain.openrouter_metadata).toBeUndefined()
    const alias = run([[text("a")]], { stream: false, extras: { serviceMetadata: meta, metadataAlias: true } }).enc.result()
    expect(alias.openrouter_metadata).toEqual(meta)
  })

  test("text_literals are the upstream's literals decoded into the text", () => {
    const { enc } = run([[literals("Hel", 'lo "q"\n', "é")], [text("!")]], { stream: false })
    expect(enc.result().content).toEqual([{ type: "text", text: 'Hello "q"\né!' }])
  })

  test("the result JSON is the SDK's Message (messages.create through the real client)", async () => {
    const { enc } = run([[text("Hi there"), usage, finishWith("stop")]], { stream: false })
    const message = await sdkOver(JSON.stringify(enc.result()), "application/json").messages.create(PARAMS)
    expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "Hi there" }])
    expect(message.usage.input_tokens).toBe(50)
    expect(message.stop_reason).toBe("end_turn")
  })
})

describe("Messages encoder: the stream", () => {
  test("a text answer: message_start, ping, one block, message_delta, message_stop", () => {
    const { sse } = run([[text("Hel"), text("lo")], [usage, finishWith("stop")]])
    expect(typesOf(sse)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
    const list = frames(sse)
    expect(list[0].data.message).toEqual({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "acme/model-1",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      provider: "acme",
    })
    expect(list[2].data).toEqual({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })
    expect(list[3].data).toEqual({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } })
    expect(list[5].data).toEqual({ type: "content_block_stop", index: 0 })
    expect(list[6].data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { input_tokens: 50, output_tokens: 7, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, cost: 0.5, is_byok: false },
    })
  })

  test("thinking then text then a tool call: three blocks with their own indexes and delta types", () => {
    const { sse } = run([
      [thinking("hmm")],
      [text("ok")],
      [callStart(3, "toolu_x", "f"), callDelta(3, '{"a":'), callDelta(3, "1}")],
      [usage, finishWith("tool_calls")],
    ])
    const list = frames(sse).filter((f) => f.event.startsWith("content_block"))
    expect(list.map((f) => [f.event, f.data.index])).toEqual([
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_delta", 2],
      ["content_block_delta", 2],
      ["content_block_stop", 2],
    ])
    expect(list[0].data.content_block).toEqual({ type: "thinking", thinking: "", signature: "" })
    expect(list[1].data.delta).toEqual({ type: "thinking_delta", thinking: "hmm" })
    expect(list[6].data.content_block).toEqual({ type: "tool_use", id: "toolu_x", name: "f", input: {} })
    expect(list[7].data.delta).toEqual({ type: "input_json_delta", partial_json: '{"a":' })
    const delta = frames(sse).find((f) => f.event === "message_delta")
    expect(delta?.data.delta).toEqual({ stop_reason: "tool_use", stop_sequence: null })
  })

  test("a signed thinking block ends with a signature_delta; a redacted one is a whole block of its own", () => {
    const seal: ProviderEvent = { type: "reasoning_signature", signature: "sig-1" }
    const redacted: ProviderEvent = { type: "reasoning_signature", signature: "opaque", redacted: true }
    const { sse } = run([[thinking("hmm"), seal], [redacted], [text("ok")], [usage, finishWith("stop")]])
    const list = frames(sse).filter((f) => f.event.startsWith("content_block"))
    expect(list.map((f) => [f.event, f.data.index])).toEqual([
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_delta", 2],
      ["content_block_stop", 2],
    ])
    expect(list[2].data.delta).toEqual({ type: "signature_delta", signature: "sig-1" })
    expect(list[4].data.content_block).toEqual({ type: "redacted_thinking", data: "opaque" })
  })

  test("a repeated tool_call_start of the open call opens nothing; a late delta of a closed call is dropped", () => {
    const { sse, enc } = run([
      [callStart(0, "a", "f"), callStart(0, "a", "f"), callDelta(0, "{}")],
      [callStart(1, "b", "g"), callDelta(0, "late")],
      [finishWith("tool_calls")],
    ])
    expect(frames(sse).filter((f) => f.event === "content_block_start").length).toBe(2)
    expect(enc.result().content).toEqual([
      { type: "tool_use", id: "a", name: "f", input: {} },
      { type: "tool_use", id: "b", name: "g", input: {} },
    ])
  })

  test("text_literals are written as the upstream's literals, one text_delta each", () => {
    const { sse } = run([[text("a"), literals("b", 'c\\"d'), text("e")]])
    const deltas = frames(sse)
      .filter((f) => f.event === "content_block_delta")
      .map((f) => (f.data.delta as { text: string }).text)
    expect(deltas).toEqual(["a", "b", 'c\\"d', "e"])
    expect(frames(sse).filter((f) => f.event === "content_block_start").length).toBe(1)
  })

  test("service_metadata rides on message_delta (and openrouter_metadata with the SDK's header)", () => {
    const meta = { requested: "acme/model-1" }
    const { sse } = run([[text("a")]], { extras: { serviceMetadata: meta, metadataAlias: true } })
    const delta = frames(sse).find((f) => f.event === "message_delta")
    expect(delta?.data.service_metadata).toEqual(meta)
    expect(delta?.data.openrouter_metadata).toEqual(meta)
    expect(frames(sse).at(-1)?.data).toEqual({ type: "message_stop" })
  })

  test("a failure after the first byte closes the open block and ends with an error event in Anthropic's envelope", () => {
    const { sse, enc } = run([[text("partial")]], { fail: { code: "rate_limit_exceeded", message: "slow down" } })
    expect(typesOf(sse)).toEqual(["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "error"])
    expect(frames(sse).at(-1)?.data).toEqual({ type: "error", error: { type: "rate_limit_error", message: "slow down" } })
    expect(enc.status).toBe("failed")
    expect(enc.ended).toBe(true)
    expect(enc.completionText).toBe("partial")
    expect(enc.finish()).toBe("")
  })

  test("an upstream that finished with reason error ends as a failure (api_error)", () => {
    const { sse } = run([[text("x"), finishWith("error")]])
    expect(frames(sse).at(-1)?.data).toEqual({
      type: "error",
      error: { type: "api_error", message: "The upstream provider ended the response with an error" },
    })
  })

  test("failure codes map to Anthropic's error types", () => {
    const typeOf = (code: string) => (frames(run([], { fail: { code, message: "m" } }).sse).at(-1)?.data.error as { type: string } | undefined)?.type
    expect(typeOf("timeout")).toBe("timeout_error")
    expect(typeOf("upstream_timeout")).toBe("timeout_error")
    expect(typeOf("overloaded")).toBe("overloaded_error")
    expect(typeOf("server_shutting_down")).toBe("overloaded_error")
    expect(typeOf("invalid_request")).toBe("invalid_request_error")
    expect(typeOf("server_error")).toBe("api_error")
  })

  test("messages.stream through the real client: text, thinking and a tool call accumulate into the final message", async () => {
    const { sse } = run([
      [thinking("plan")],
      [text("Hello "), literals("from", " the gateway")],
      [callStart(0, "toolu_1", "get_weather"), callDelta(0, '{"city"'), callDelta(0, ':"Paris"}')],
      [usage, finishWith("tool_calls")],
    ])
    const stream = sdkOver(sse, "text/event-stream").messages.stream(PARAMS)
    const texts: Array<string> = []
    stream.on("text", (delta) => texts.push(delta))
    const message = await stream.finalMessage()
    expect(texts.join("")).toBe("Hello from the gateway")
    expect(message.content as Array<unknown>).toEqual([
      { type: "thinking", thinking: "plan", signature: "" },
      { type: "text", text: "Hello from the gateway" },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
    ])
    expect(message.stop_reason).toBe("tool_use")
    expect(message.usage.input_tokens).toBe(50)
    expect(message.usage.output_tokens).toBe(7)
    expect(message.usage.cache_read_input_tokens).toBe(30)
  })

  test("the route's keep-alive comment lines between events are ignored by the real client", async () => {
    const enc = encoder(true)
    const sse = `${enc.start()}: keep-alive\n\n: keep-alive\n\n${enc.push([text("late"), usage, finishWith("stop")])}${enc.finish()}`
    const message = await sdkOver(sse, "text/event-stream").messages.stream(PARAMS).finalMessage()
    expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "late" }])
  })

  test("messages.create with stream: true through the real client raises the error event as an APIError", async () => {
    const { sse } = run([[text("partial")]], { fail: { code: "overloaded", message: "busy upstream" } })
    const stream = await sdkOver(sse, "text/event-stream").messages.create({ ...PARAMS, stream: true })
    const seen: Array<string> = []
    const failure = await (async () => {
      try {
        for await (const event of stream) seen.push(event.type)
        return undefined
      } catch (e) {
        return e
      }
    })()
    expect(seen).toEqual(["message_start", "content_block_start", "content_block_delta", "content_block_stop"])
    expect(failure).toBeInstanceOf(Anthropic.APIError)
    expect((failure as InstanceType<typeof Anthropic.APIError>).type).toBe("overloaded_error")
    expect((failure as Error).message).toContain("busy upstream")
  })
})
