/**
 * The Chat Completions encoder (src/formats/chat/encoder.ts) driven by `ProviderEvent` arrays: the
 * `chat.completion` result and the `chat.completion.chunk` stream for text, reasoning, tool calls,
 * usage, failure and `include_usage: false`. Every result and chunk must pass the official SDK's
 * own zod schemas (`ChatResult`, `ChatStreamChunk`), as `chat.send` applies them.
 */
import { describe, expect, test } from "bun:test"
import { ChatResult$inboundSchema, ChatStreamChunk$inboundSchema } from "@openrouter/sdk/models"
import { ChatEncoder, type ChatEncoderBase, newChatId } from "../../src/formats/chat/encoder.js"
import type { FinishExtras } from "../../src/formats/format.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import type { Usage } from "../../src/domain/pricing.js"
import { parseSse } from "../support/sse.js"
import { callDelta, callStart, finishWith, text, thinking, usageOf } from "../support/provider-events.js"

const BASE: ChatEncoderBase = { id: "chatcmpl-test", created: 1_700_000_000, model: "acme/model-1", provider: "acme" }
const USAGE: Usage = { inputTokens: 12, cachedTokens: 4, cacheWriteTokens: 1, outputTokens: 7, reasoningTokens: 2 }

const usage = usageOf(USAGE)

let calls = 0
const counterId = (prefix: string) => `${prefix}_${++calls}`

/** Runs one answer: start, one push per batch, then finish (or fail). */
const run = (
  batches: ReadonlyArray<ReadonlyArray<ProviderEvent>>,
  options: { stream?: boolean; includeUsage?: boolean; fail?: { code: string; message: string }; extras?: FinishExtras; base?: ChatEncoderBase } = {},
) => {
  const encoder = new ChatEncoder(options.base ?? BASE, {
    stream: options.stream ?? true,
    includeUsage: options.includeUsage ?? true,
    newId: counterId,
  })
  let sse = encoder.start()
  for (const batch of batches) sse += encoder.push(batch)
  const extras = options.extras ?? { cost: 0.0012, isByok: false }
  sse += options.fail === undefined ? encoder.finish(extras) : encoder.fail(options.fail, extras)
  return { encoder, sse }
}

/** The chunks of a stream, each validated by the SDK's schema; [DONE] last and once. */
const chunksOf = (sse: string): Array<Record<string, any>> => {
  const { events } = parseSse(sse)
  expect(events.at(-1)?.data).toBe("[DONE]")
  expect(events.filter((e) => e.data === "[DONE]").length).toBe(1)
  // Chat Completions streams are data-only: no `event:` lines.
  expect(sse).not.toContain("event:")
  const chunks = events.filter((e) => e.data !== "[DONE]").map((e) => e.json as Record<string, any>)
  for (const chunk of chunks) {
    const parsed = ChatStreamChunk$inboundSchema.safeParse(chunk)
    if (!parsed.success) throw new Error(`the SDK refuses ${JSON.stringify(chunk)}: ${parsed.error.message}`)
    expect(chunk).toMatchObject({ id: BASE.id, object: "chat.completion.chunk", created: BASE.created, model: BASE.model, provider: "acme" })
  }
  return chunks
}

/** The result, validated by the SDK's schema. */
const resultOf = (encoder: ChatEncoder): Record<string, any> => {
  const result = JSON.parse(JSON.stringify(encoder.result())) as Record<string, any>
  const parsed = ChatResult$inboundSchema.safeParse(result)
  if (!parsed.success) throw new Error(`the SDK refuses ${JSON.stringify(result)}: ${parsed.error.message}`)
  return result
}

const deltas = (chunks: Array<Record<string, any>>) => chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0].delta)

/** Routing metadata as the route makes it (the SDK validates it under openrouter_metadata). */
const METADATA = {
  attempt: 0,
  endpoints: { total: 1, available: [{ model: "acme/model-1", provider: "acme", selected: true }] },
  is_byok: false,
  region: null,
  requested: "acme/model-1",
  strategy: "price",
  summary: "Routed acme/model-1 to acme",
}

const CHAT_USAGE = {
  prompt_tokens: 12,
  completion_tokens: 7,
  total_tokens: 19,
  prompt_tokens_details: { cached_tokens: 4, cache_write_tokens: 1 },
  completion_tokens_details: { reasoning_tokens: 2 },
  cost: 0.0012,
  is_byok: false,
}

describe("the JSON result (chat.completion)", () => {
  test("text: the content joined, finish reason, usage with cost and is_byok, provider, system_fingerprint null", () => {
    const { encoder, sse } = run([[text("Hel"), text("lo")], [usage, finishWith("stop")]], { stream: false })
    expect(sse).toBe("")
    expect(resultOf(encoder)).toEqual({
      id: BASE.id,
      object: "chat.completion",
      created: BASE.created,
      model: BASE.model,
      provider: "acme",
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          logprobs: null,
          finish_reason: "stop",
          native_finish_reason: "stop",
          message: { role: "assistant", content: "Hello", refusal: null },
        },
      ],
      usage: CHAT_USAGE,
    })
    expect(encoder.status).toBe("completed")
    expect(encoder.completionText).toBe("Hello")
    expect(encoder.usage).toEqual(USAGE)
  })

  test("no provider given: no provider key; no usage event: zero counts; extras.usage overrides the upstream's", () => {
    const bare = run([[text("x")]], { stream: false, base: { id: "chatcmpl-1", created: 1, model: "m" }, extras: {} })
    const result = resultOf(bare.encoder)
    expect("provider" in result).toBe(false)
    expect(result.usage).toEqual({
      prompt_tokens: 0,
      completion_tokens: 0,
      total_tokens: 0,
      prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    })
    expect(result.choices[0].finish_reason).toBe("stop")
    const charged: Usage = { inputTokens: 3, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 2, reasoningTokens: 0 }
    const over = run([[text("x"), usage]], { stream: false, extras: { usage: charged, cost: 0.5, isByok: true } })
    expect(resultOf(over.encoder).usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, cost: 0.5, is_byok: true })
  })

  test("reasoning: message.reasoning and one reasoning.text detail", () => {
    const { encoder } = run([[thinking("Let me "), thinking("think."), text("Answer")]], { stream: false })
    expect(resultOf(encoder).choices[0].message).toEqual({
      role: "assistant",
      content: "Answer",
      refusal: null,
      reasoning: "Let me think.",
      reasoning_details: [{ type: "reasoning.text", text: "Let me think.", index: 0 }],
    })
    expect(encoder.reasoningText).toBe("Let me think.")
  })

  test("tool calls: content null, each call with its id, name and joined arguments; interleaved deltas by upstream index", () => {
    const { encoder } = run(
      [[callStart(5, "call_a", "first"), callDelta(5, '{"a"'), callStart(9, "call_b", "second"), callDelta(9, "{}"), callDelta(5, ":1}")], [finishWith("tool_calls")]],
      { stream: false },
    )
    const choice = resultOf(encoder).choices[0]
    expect(choice.finish_reason).toBe("tool_calls")
    expect(choice.message.content).toBeNull()
    expect(choice.message.tool_calls).toEqual([
      { id: "call_a", type: "function", function: { name: "first", arguments: '{"a":1}' } },
      { id: "call_b", type: "function", function: { name: "second", arguments: "{}" } },
    ])
  })

  test("a call's delta before its start opens it with an id of the gateway's; calls with no finish event end as tool_calls", () => {
    const { encoder } = run([[callDelta(0, "{}")]], { stream: false })
    const choice = resultOf(encoder).choices[0]
    expect(choice.message.tool_calls[0].id).toMatch(/^call_/)
    expect(choice.finish_reason).toBe("tool_calls")
  })

  test("length and content_filter end incomplete with their reason", () => {
    for (const reason of ["length", "content_filter"] as const) {
      const { encoder } = run([[text("cut"), finishWith(reason)]], { stream: false })
      expect(encoder.status).toBe("incomplete")
      expect(resultOf(encoder).choices[0].finish_reason).toBe(reason)
    }
  })

  test("routing metadata: service_metadata when given, openrouter_metadata too with the alias", () => {
    const metadata = METADATA
    const plain = run([[text("x")]], { stream: false, extras: { serviceMetadata: metadata } })
    expect(resultOf(plain.encoder)).toMatchObject({ service_metadata: metadata })
    expect("openrouter_metadata" in resultOf(plain.encoder)).toBe(false)
    const alias = run([[text("x")]], { stream: false, extras: { serviceMetadata: metadata, metadataAlias: true } })
    expect(resultOf(alias.encoder)).toMatchObject({ service_metadata: metadata, openrouter_metadata: metadata })
  })

  test("usage counts that are not counts are no usage (the route estimates them)", () => {
    const { encoder } = run([[{ type: "usage", usage: { ...USAGE, outputTokens: -1 } }]], { stream: false })
    expect(encoder.usage).toBeUndefined()
  })

  test("an upstream that finished with reason error fails the answer", () => {
    const { encoder } = run([[text("x"), finishWith("error")]], { stream: false })
    expect(encoder.status).toBe("failed")
    expect(encoder.ended).toBe(true)
    expect(encoder.finishReason).toBe("error")
  })
})

describe("the stream (chat.completion.chunk)", () => {
  test("text: a role chunk, one content chunk per delta, the finish chunk, the usage chunk with no choices, [DONE]", () => {
    const { sse } = run([[text("Hel"), text("lo")], [usage, finishWith("stop")]])
    const chunks = chunksOf(sse)
    expect(deltas(chunks)).toEqual([{ role: "assistant", content: "" }, { content: "Hel" }, { content: "lo" }, {}])
    expect(chunks.slice(0, 3).every((c) => c.choices[0].finish_reason === null)).toBe(true)
    expect(chunks[3]!.choices[0]).toEqual({ index: 0, delta: {}, finish_reason: "stop", native_finish_reason: "stop" })
    expect(chunks[4]).toMatchObject({ choices: [], usage: CHAT_USAGE })
    expect(chunks.length).toBe(5)
  })

  test("include_usage false: no usage chunk, the finish chunk is the last", () => {
    const chunks = chunksOf(run([[text("a"), usage, finishWith("stop")]], { includeUsage: false }).sse)
    expect(chunks.some((c) => "usage" in c)).toBe(false)
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe("stop")
  })

  test("a text event's own JSON literal is written as it is", () => {
    const { sse, encoder } = run([[{ type: "text", delta: "a/b", json: '"a\\/b"' }]])
    expect(sse).toContain('"delta":{"content":"a\\/b"}')
    expect(encoder.completionText).toBe("a/b")
  })

  test("text_literals: each literal is a content chunk as the upstream wrote it, and the text is decoded", () => {
    const read = 'data: {"c":"He said \\"hi\\""}\n\ndata: {"c":"\\u00e9t\\u00e9 \\/ ok"}\n\n'
    const source = new TextEncoder().encode(read)
    const first = read.indexOf('"He')
    const second = read.indexOf('"\\u00e9')
    const spans = [first, read.indexOf("}", first), second, read.indexOf("}", second)]
    const { sse, encoder } = run([[{ type: "text_literals", source, spans }, text("!")]])
    const chunks = chunksOf(sse)
    expect(deltas(chunks).slice(1, 4)).toEqual([{ content: 'He said "hi"' }, { content: "été / ok" }, { content: "!" }])
    expect(sse).toContain('"content":"\\u00e9t\\u00e9 \\/ ok"')
    expect(encoder.completionText).toBe('He said "hi"été / ok!')
  })

  test("reasoning: reasoning deltas (with their reasoning.text detail) before the content", () => {
    const chunks = chunksOf(run([[thinking("Hmm"), text("Yes")]]).sse)
    expect(deltas(chunks).slice(1, 3)).toEqual([
      { reasoning: "Hmm", reasoning_details: [{ type: "reasoning.text", text: "Hmm", index: 0 }] },
      { content: "Yes" },
    ])
  })

  test("tool calls: the opening chunk with id, type and name, then argument deltas by the call's index", () => {
    const chunks = chunksOf(
      run([[callStart(3, "call_x", "lookup"), callDelta(3, '{"q":'), callStart(7, "call_y", "other"), callDelta(3, "1}"), callDelta(7, "{}"), finishWith("tool_calls")]]).sse,
    )
    expect(deltas(chunks).slice(1)).toEqual([
      { tool_calls: [{ index: 0, id: "call_x", type: "function", function: { name: "lookup", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] },
      { tool_calls: [{ index: 1, id: "call_y", type: "function", function: { name: "other", arguments: "" } }] },
      { tool_calls: [{ index: 0, function: { arguments: "1}" } }] },
      { tool_calls: [{ index: 1, function: { arguments: "{}" } }] },
      {},
    ])
    expect(chunks.at(-2)!.choices[0].finish_reason).toBe("tool_calls")
  })

  test("routing metadata rides on the last chunk only: the usage chunk, or the finish chunk without it", () => {
    const metadata = METADATA
    for (const includeUsage of [true, false]) {
      const chunks = chunksOf(run([[text("x")]], { includeUsage, extras: { serviceMetadata: metadata, metadataAlias: true } }).sse)
      expect(chunks.at(-1)).toMatchObject({ service_metadata: metadata, openrouter_metadata: metadata })
      expect(chunks.slice(0, -1).some((c) => "service_metadata" in c || "openrouter_metadata" in c)).toBe(false)
    }
  })

  test("a failure after the first byte: a chunk with top-level error {code, message} and finish_reason error, the usage chunk, [DONE]", () => {
    const { sse, encoder } = run([[text("partial")]], { fail: { code: "server_error", message: "Provider acme failed mid-stream: reset" } })
    const chunks = chunksOf(sse)
    const failed = chunks.at(-2)!
    expect(failed.error).toEqual({ code: 502, message: "Provider acme failed mid-stream: reset", metadata: { error_type: "server" } })
    expect(failed.choices[0]).toEqual({ index: 0, delta: {}, finish_reason: "error", native_finish_reason: "error" })
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { cost: 0.0012 } })
    expect(encoder.status).toBe("failed")
    expect(encoder.completionText).toBe("partial")
  })

  test("the failure's string code becomes the status it has before the first byte (an integer, as the SDK requires)", () => {
    const codes: Record<string, number> = {
      rate_limit_exceeded: 429,
      upstream_timeout: 524,
      timeout: 408,
      overloaded: 529,
      invalid_request: 400,
      server_shutting_down: 503,
      server_error: 502,
      something_else: 500,
    }
    for (const [code, status] of Object.entries(codes)) {
      const chunks = chunksOf(run([], { fail: { code, message: "m" }, includeUsage: false }).sse)
      expect(chunks.at(-1)!.error.code).toBe(status)
    }
  })

  test("an upstream that finished with reason error streams the failure chunk", () => {
    const chunks = chunksOf(run([[text("x"), finishWith("error")]]).sse)
    expect(chunks.at(-2)!.error.code).toBe(502)
  })

  test("the debug chunk (debug.echo_upstream_body): no choices, the body sent upstream under debug", () => {
    const encoder = new ChatEncoder(BASE, { stream: true, includeUsage: true })
    const sse = encoder.debugChunk({ model: "up", messages: [] }) + encoder.start() + encoder.finish()
    const chunks = chunksOf(sse)
    expect(chunks[0]).toMatchObject({ choices: [], debug: { echo_upstream_body: { model: "up", messages: [] } } })
    expect(chunks[1]!.choices[0].delta).toEqual({ role: "assistant", content: "" })
  })

  test("after the end nothing more is written", () => {
    const { encoder } = run([[text("x")]])
    expect(encoder.push([text("late")])).toBe("")
    expect(encoder.finish()).toBe("")
    expect(encoder.fail({ code: "server_error", message: "m" })).toBe("")
    expect(encoder.completionText).toBe("x")
  })

  test("not streaming, every method writes nothing", () => {
    const encoder = new ChatEncoder(BASE, { stream: false, includeUsage: true })
    expect(encoder.start()).toBe("")
    expect(encoder.push([text("x")])).toBe("")
    expect(encoder.finish()).toBe("")
  })

  test("push takes a batch's events [from, to)", () => {
    const encoder = new ChatEncoder(BASE, { stream: false, includeUsage: true })
    encoder.push([text("a"), text("b"), text("c")], 1, 2)
    expect(encoder.completionText).toBe("b")
  })
})

test("ids are chatcmpl- and 24 hex characters", () => {
  expect(newChatId()).toMatch(/^chatcmpl-[0-9a-f]{24}$/)
  expect(newChatId()).not.toBe(newChatId())
})
