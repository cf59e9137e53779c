/**
 * The context-compression plugin (middle-out), end to end against the mock upstream (whose log
 * shows what the upstream was sent): system, first user and most recent messages kept, the middle
 * dropped, a tool call never without its output, the largest text cut with a marker; on by
 * default for contexts ≤ 8,192; candidates that cannot take the prompt dropped, a failover to a
 * smaller context compressed again; a provider's message cap; off, a 400 naming both numbers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway, TAG } from "../routing/helpers.js"

let mock: MockUpstream
let gw: Gateway

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 2 })
  const small = (context: number) => ({ context_length: context, max_output_tokens: 200 })
  gw = await startGateway({
    ...catalogOf(
      [
        mockProvider(mock, "small"),
        mockProvider(mock, "second"),
        mockProvider(mock, "big"),
        mockProvider(mock, "fail", { "x-mock-error": "500" }),
        mockProvider(mock, "capped"),
      ],
      [
        { ...model("t/small", endpoint("small", 1, 1, { max_output_tokens: 200 })), context_length: 2000 },
        { ...model("t/wide", endpoint("big", 1, 1, { max_output_tokens: 200 })), context_length: 20_000 },
        model("t/drop", endpoint("small", 1, 1, small(1500)), endpoint("big", 2, 2, small(100_000))),
        model("t/failover", endpoint("fail", 1, 1, small(3000)), endpoint("second", 2, 2, small(1500))),
        model("t/capped", endpoint("capped", 1, 1, { max_output_tokens: 200 })),
      ],
    ),
    plugins: { context_compression: { max_messages: { capped: 6 } } },
  })
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const FILLER = "the quick brown fox jumps over the lazy dog and keeps running through the field ".repeat(4)

/** A conversation: the first user message, `middle` alternating turns, the last user message. */
const conversation = (middle: number) => {
  const items: Array<Record<string, unknown>> = [{ type: "message", role: "user", content: "FIRST question" }]
  for (let i = 0; i < middle; i++) {
    items.push({ type: "message", role: i % 2 === 0 ? "assistant" : "user", content: `turn-${i}: ${FILLER}` })
  }
  items.push({ type: "message", role: "user", content: "LAST question" })
  return items
}

interface Entry {
  readonly type: string
  readonly name: string
  readonly data: { readonly engine: string; readonly original_count: number; readonly compressed_count: number }
}

const post = async (path: string, json: Record<string, unknown>) => {
  const from = mock.requests.length
  const res = await gw.fetch(path, { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
  const body = (await res.json()) as Record<string, unknown>
  const meta = body["service_metadata"] as { pipeline?: ReadonlyArray<Entry> } | undefined
  const sent = mock.requests.slice(from).map((r) => ({
    provider: r.headers[TAG],
    messages: (r.body as { messages: ReadonlyArray<{ role: string; content: unknown; tool_call_id?: string; tool_calls?: ReadonlyArray<{ id: string }> }> }).messages,
  }))
  return { status: res.status, body, entry: meta?.pipeline?.find((e) => e.name === "context-compression"), sent }
}

const textOf = (content: unknown): string => (typeof content === "string" ? content : JSON.stringify(content))

describe("context-compression: middle-out", () => {
  test("on by default for a context ≤ 8,192: system, first user and most recent kept, the middle dropped", async () => {
    const input = [{ type: "message", role: "system", content: "SYS rules" }, ...conversation(40)]
    const { status, entry, sent } = await post("/v1/responses", { model: "t/small", input })
    expect(status).toBe(200)
    expect(sent).toHaveLength(1)
    const texts = sent[0]!.messages.map((m) => textOf(m.content))
    expect(texts[0]).toContain("SYS rules")
    expect(texts.some((t) => t.includes("FIRST question"))).toBe(true)
    expect(texts[texts.length - 1]).toContain("LAST question")
    expect(texts.length).toBeLessThan(input.length)
    // The middle went first: the turns kept are the oldest and the newest.
    expect(texts.some((t) => t.includes("turn-0:"))).toBe(true)
    expect(texts.some((t) => t.includes("turn-39:"))).toBe(true)
    expect(texts.some((t) => t.includes("turn-20:"))).toBe(false)
    expect(entry).toMatchObject({ type: "plugin", name: "context-compression", data: { engine: "middle-out", original_count: input.length, compressed_count: texts.length } })
    // The first request near the limit loads the tokenizer (seconds on a busy machine).
  }, 60_000)

  test("a tool call is never sent without its output (or the output without its call)", async () => {
    const input = conversation(40)
    input.splice(21, 0, { type: "function_call", call_id: "call_mid", name: "lookup", arguments: `{"q":"${"x".repeat(50)}"}` }, {
      type: "function_call_output",
      call_id: "call_mid",
      output: `result ${FILLER}`,
    })
    const { status, sent } = await post("/v1/responses", {
      model: "t/small",
      input,
      tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} } }],
    })
    expect(status).toBe(200)
    const messages = sent[0]!.messages
    const calls = new Set(messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id)))
    const outputs = new Set(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id))
    expect([...calls].sort()).toEqual([...outputs].sort() as Array<string>)
  })

  test("a single text too long for the context has its middle cut, with a marker saying how much", async () => {
    const long = `START ${"lorem ipsum dolor sit amet ".repeat(1500)} END`
    const { status, entry, sent } = await post("/v1/responses", { model: "t/small", input: long })
    expect(status).toBe(200)
    const text = textOf(sent[0]!.messages.at(-1)!.content)
    expect(text.startsWith("START")).toBe(true)
    expect(text.endsWith("END")).toBe(true)
    expect(text).toMatch(/\[… \d+ characters cut by context-compression …\]/)
    expect(text.length).toBeLessThan(long.length / 2)
    expect(entry?.data).toEqual({ engine: "middle-out", original_count: 1, compressed_count: 1 })
  })

  test("Chat Completions: the messages are compressed the same way", async () => {
    const messages = [
      { role: "system", content: "SYS chat" },
      { role: "user", content: "FIRST question" },
      ...Array.from({ length: 40 }, (_, i) => ({ role: i % 2 === 0 ? "assistant" : "user", content: `turn-${i}: ${FILLER}` })),
      { role: "user", content: "LAST question" },
    ]
    const { status, entry, sent } = await post("/v1/chat/completions", { model: "t/small", messages })
    expect(status).toBe(200)
    const texts = sent[0]!.messages.map((m) => textOf(m.content))
    expect(texts[0]).toContain("SYS chat")
    expect(texts.at(-1)).toContain("LAST question")
    expect(texts.length).toBeLessThan(messages.length)
    expect(entry?.data.engine).toBe("middle-out")
  })

  test("Messages: the messages are compressed the same way", async () => {
    const messages = [
      { role: "user", content: "FIRST question" },
      ...Array.from({ length: 40 }, (_, i) => ({ role: i % 2 === 0 ? "assistant" : "user", content: `turn-${i}: ${FILLER}` })),
      { role: "user", content: "LAST question" },
    ]
    const { status, sent } = await post("/v1/messages", { model: "t/small", max_tokens: 100, system: "SYS msgs", messages })
    expect(status).toBe(200)
    const texts = sent[0]!.messages.map((m) => textOf(m.content))
    expect(texts[0]).toContain("SYS msgs")
    expect(texts.some((t) => t.includes("FIRST question"))).toBe(true)
    expect(texts.at(-1)).toContain("LAST question")
    expect(texts.length).toBeLessThan(messages.length + 1)
  })

  test("a prompt that fits is sent as it is, with no pipeline entry", async () => {
    const input = conversation(2)
    const { status, entry, sent } = await post("/v1/responses", { model: "t/small", input })
    expect(status).toBe(200)
    expect(sent[0]!.messages).toHaveLength(input.length)
    expect(entry).toBeUndefined()
  })
})

describe("context-compression: the plan's candidates", () => {
  test("a candidate too small for the prompt is dropped when another takes it whole", async () => {
    const input = conversation(40)
    const { status, sent, entry } = await post("/v1/responses", { model: "t/drop", input, provider: { sort: "price" } })
    expect(status).toBe(200)
    expect(sent.map((s) => s.provider)).toEqual(["big"])
    expect(sent[0]!.messages).toHaveLength(input.length)
    expect(entry).toBeUndefined()
  })

  test("a failover to a smaller context compresses again for it", async () => {
    const input = conversation(60)
    const { status, sent, entry } = await post("/v1/responses", { model: "t/failover", input, provider: { sort: "price" } })
    expect(status).toBe(200)
    expect(sent.map((s) => s.provider)).toEqual(["fail", "second"])
    const [first, second] = sent
    expect(first!.messages.length).toBeLessThan(input.length)
    expect(second!.messages.length).toBeLessThan(first!.messages.length)
    expect(textOf(second!.messages.at(-1)!.content)).toContain("LAST question")
    expect(entry?.data.compressed_count).toBe(first!.messages.length)
  })

  test("a provider's message cap keeps half from the start and half from the end", async () => {
    const input = conversation(18)
    const { status, sent, entry } = await post("/v1/responses", {
      model: "t/capped",
      input,
      plugins: [{ id: "context-compression", engine: "middle-out" }],
    })
    expect(status).toBe(200)
    const texts = sent[0]!.messages.map((m) => textOf(m.content))
    expect(texts).toHaveLength(6)
    expect(texts[0]).toContain("FIRST question")
    expect(texts[2]).toContain("turn-1:")
    expect(texts[3]).toContain("turn-16:")
    expect(texts[5]).toContain("LAST question")
    expect(entry?.data).toEqual({ engine: "middle-out", original_count: 20, compressed_count: 6 })
  })
})

describe("context-compression: off, or asked for wrongly", () => {
  const tooLong = () => conversation(40)

  test("enabled: false on a small context: a 400 before any upstream call, naming both numbers and the plugin", async () => {
    const { status, body, sent } = await post("/v1/responses", {
      model: "t/small",
      input: tooLong(),
      plugins: [{ id: "context-compression", enabled: false }],
    })
    expect(status).toBe(400)
    expect(sent).toHaveLength(0)
    const error = body["error"] as { code: number; message: string; metadata: { reason: string } }
    expect(error.code).toBe(400)
    expect(error.metadata.reason).toBe("context_length_exceeded")
    expect(error.message).toMatch(/needs \d+ tokens/)
    expect(error.message).toContain("context of 2000 tokens")
    expect(error.message).toContain("context-compression")
  })

  test("a context over 8,192 is not compressed unless asked: 400; asked, it fits", async () => {
    const huge = [{ type: "message", role: "user", content: `${"lorem ipsum dolor sit amet ".repeat(5000)}` }]
    const off = await post("/v1/responses", { model: "t/wide", input: huge })
    expect(off.status).toBe(400)
    expect((off.body["error"] as { metadata: { reason: string } }).metadata.reason).toBe("context_length_exceeded")
    expect(off.sent).toHaveLength(0)
    const on = await post("/v1/responses", { model: "t/wide", input: huge, plugins: [{ id: "context-compression" }] })
    expect(on.status).toBe(200)
    expect(textOf(on.sent[0]!.messages[0]!.content)).toContain("characters cut by context-compression")
  })

  test("Messages: the refusal is an invalid_request_error with the reason", async () => {
    const messages = Array.from({ length: 41 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: `turn-${i}: ${FILLER}` }))
    const { status, body } = await post("/v1/messages", {
      model: "t/small",
      max_tokens: 100,
      messages,
      plugins: [{ id: "context-compression", enabled: false }],
    })
    expect(status).toBe(400)
    const error = body["error"] as { type: string; message: string; metadata?: { reason: string } }
    expect(body["type"]).toBe("error")
    expect(error.type).toBe("invalid_request_error")
    expect(error.message).toContain("context-compression")
    expect(error.metadata?.reason).toBe("context_length_exceeded")
  })

  test("an engine other than middle-out is a 400 naming the field", async () => {
    const { status, body } = await post("/v1/responses", { model: "t/small", input: "hi", plugins: [{ id: "context-compression", engine: "squeeze" }] })
    expect(status).toBe(400)
    expect((body["error"] as { message: string }).message).toContain("plugins[0].engine: one of middle-out")
  })
})

describe("context-compression: its config", () => {
  const file = (plugins: unknown) =>
    JSON.stringify({
      providers: [{ id: "p", kind: "fake" }],
      models: [{ id: "a/b", context_length: 10, endpoints: [{ provider: "p", upstream_model: "m", pricing: { prompt: 0, completion: 0 } }] }],
      plugins,
    })

  test("plugins.context_compression is decoded; an unknown key or provider is refused naming it", async () => {
    const { parseConfigFile } = await import("../../src/config/Config.js")
    const { Either } = await import("effect")
    expect(Either.isRight(parseConfigFile("c.json", file({ context_compression: { max_messages: { p: 10 }, safety_margin: 0.2 } })))).toBe(true)
    const unknown = parseConfigFile("c.json", file({ context_compression: { max_mesages: {} } }))
    expect(Either.isLeft(unknown) && unknown.left.message).toContain("max_mesages")
    const provider = parseConfigFile("c.json", file({ context_compression: { max_messages: { nope: 10 } } }))
    expect(Either.isLeft(provider) && provider.left.message).toContain('plugins.context_compression.max_messages.nope: unknown provider "nope"')
    const margin = parseConfigFile("c.json", file({ context_compression: { safety_margin: 2 } }))
    expect(Either.isLeft(margin) && margin.left.message).toContain("safety_margin")
  })
})
