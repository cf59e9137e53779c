/**
 * End to end against scripts/mock-upstream.ts: the gateway speaks each wire format upstream
 * (openai-chat, openai-responses, anthropic), JSON and streamed, for text, tool calls and
 * reasoning, and answers the client in the Responses format with exact events, usage and cost.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Either, ParseResult } from "effect"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { ResponseResult } from "../../src/domain/responses.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { MOCK_PRICE, MOCK_SCENARIOS, MOCK_UPSTREAM_KEY_ENV, mockScenarioCatalog, UPSTREAM_FORMATS } from "../support/catalog.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse, typesOf } from "../support/sse.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }

const catalogFor = (url: string): ConfigFile =>
  mockScenarioCatalog(url, {
    providers: [{ id: "openai-chat-long", kind: "openai-chat", base_url: url, api_key_env: MOCK_UPSTREAM_KEY_ENV, headers: { "x-mock-tokens": "300" } }],
    models: [
      {
        id: "mock/openai-chat-long",
        context_length: 100000,
        endpoints: [{ provider: "openai-chat-long", upstream_model: "upstream-openai-chat", pricing: MOCK_PRICE }] as const,
      },
    ],
  })

beforeAll(async () => {
  process.env.MOCK_UPSTREAM_KEY = "sk-upstream-secret"
  mock = await startMockUpstream()
  gw = await startInProcessGateway({ catalog: catalogFor(mock.url) })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const decodeResult = ParseResult.decodeUnknownEither(ResponseResult, { onExcessProperty: "ignore" })
const TOOLS = [{ type: "function", name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } }]
const request = (kind: string, scenario: string, stream: boolean) => ({
  model: `mock/${kind}-${scenario}`,
  input: [{ role: "user", content: [{ type: "input_text", text: "What now?" }] }],
  instructions: "Be brief.",
  stream,
  ...(scenario === "tool_call" ? { tools: TOOLS } : {}),
  ...(scenario === "reasoning" ? { reasoning: { effort: "low" } } : {}),
})

/** The mock's answer: 5 deltas of "tok "; usage input 10, output = deltas (reasoning deltas too). */
const expectedUsage = (kind: string, scenario: string) => {
  const output = scenario === "reasoning" ? 10 : 5
  // Anthropic reports no separate thinking-token count.
  const reasoning = scenario === "reasoning" && kind !== "anthropic" ? 5 : 0
  return { input_tokens: 10, output_tokens: output, reasoning }
}

const cost = (input: number, output: number) => Math.round((input * MOCK_PRICE.prompt + output * MOCK_PRICE.completion) * 1e6) / 1e12

const checkOutput = (kind: string, scenario: string, result: Record<string, any>) => {
  expect(Either.isRight(decodeResult(result))).toBe(true)
  expect(result.status).toBe("completed")
  expect(result.model).toBe(`mock/${kind}-${scenario}`)
  const types = result.output.map((o: { type: string }) => o.type)
  if (scenario === "text") {
    expect(types).toEqual(["message"])
    expect(result.output[0].content[0].text).toBe("tok ".repeat(5))
  } else if (scenario === "tool_call") {
    expect(types).toEqual(["function_call"])
    expect(result.output[0].name).toBe("get_weather")
    expect(JSON.parse(result.output[0].arguments)).toEqual({ input: "tok ".repeat(5) })
  } else {
    expect(types).toEqual(["reasoning", "message"])
    // The mock upstream thinks in five "think " deltas, as it answers in five "tok ".
    expect(result.output[0].summary[0].text).toBe("think ".repeat(5))
    expect(result.output[1].content[0].text).toBe("tok ".repeat(5))
  }
  const u = expectedUsage(kind, scenario)
  expect(result.usage).toMatchObject({
    input_tokens: u.input_tokens,
    output_tokens: u.output_tokens,
    total_tokens: u.input_tokens + u.output_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    input_tokens_details: { cached_tokens: 0 },
  })
  expect(result.usage.cost).toBeCloseTo(cost(u.input_tokens, u.output_tokens), 12)
}

for (const kind of UPSTREAM_FORMATS) {
  describe(`upstream ${kind}`, () => {
    for (const scenario of MOCK_SCENARIOS) {
      test(`JSON, ${scenario}: the result, usage and cost`, async () => {
        const res = await gw.fetch("/v1/responses", { method: "POST", json: request(kind, scenario, false) })
        expect(res.status).toBe(200)
        checkOutput(kind, scenario, (await res.json()) as Record<string, any>)
      })

      test(`stream, ${scenario}: the exact event order, sequence numbers, ids and final usage`, async () => {
        const res = await gw.fetch("/v1/responses", { method: "POST", json: request(kind, scenario, true) })
        expect(res.status).toBe(200)
        const { events } = parseSse(await res.text())
        checkStreamRules(events)
        const types = typesOf(events)
        const text = [
          "response.output_item.added",
          "response.content_part.added",
          ...Array(5).fill("response.output_text.delta"),
          "response.output_text.done",
          "response.content_part.done",
          "response.output_item.done",
        ]
        const call = [
          "response.output_item.added",
          ...Array(5).fill("response.function_call_arguments.delta"),
          "response.function_call_arguments.done",
          "response.output_item.done",
        ]
        const reasoningTypes = types.slice(2, types.indexOf("response.output_item.done") + 1)
        const expected =
          scenario === "text" ? text : scenario === "tool_call" ? call : [...reasoningTypes, ...text]
        if (scenario === "reasoning") {
          expect(reasoningTypes[0]).toBe("response.output_item.added")
          expect(reasoningTypes).toContain("response.reasoning_summary_text.delta")
          expect(reasoningTypes).toContain("response.reasoning_summary_part.done")
        }
        expect(types).toEqual(["response.created", "response.in_progress", ...expected, "response.completed", "[DONE]"])
        const completed = events.find((e) => e.json?.type === "response.completed")!.json!.response as Record<string, any>
        checkOutput(kind, scenario, completed)
      })
    }

    test("the upstream got its own wire format, the key and the instructions", async () => {
      mock.reset()
      await gw.fetch("/v1/responses", { method: "POST", json: request(kind, "text", false) })
      const sent = mock.requests[mock.requests.length - 1]!
      const body = sent.body as Record<string, any>
      if (kind === "openai-chat") {
        expect(sent.path).toBe("/v1/chat/completions")
        expect(sent.headers.authorization).toBe("Bearer sk-upstream-secret")
        expect(body.messages[0]).toEqual({ role: "system", content: "Be brief." })
      } else if (kind === "openai-responses") {
        expect(sent.path).toBe("/v1/responses")
        expect(sent.headers.authorization).toBe("Bearer sk-upstream-secret")
        expect(body.instructions).toBe("Be brief.")
      } else {
        expect(sent.path).toBe("/v1/messages")
        expect(sent.headers["x-api-key"]).toBe("sk-upstream-secret")
        expect(JSON.stringify(body.system)).toContain("Be brief.")
      }
      expect(body.model).toBe(`upstream-${kind}`)
    })
  })
}

describe("reasoning sent back to Anthropic", () => {
  const turn = (reasoning: Record<string, unknown>) => ({
    model: "mock/anthropic-reasoning",
    reasoning: { effort: "low" },
    input: [
      { role: "user", content: "What now?" },
      reasoning,
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "tok tok" }] },
      { role: "user", content: "And then?" },
    ],
  })

  for (const stream of [false, true]) {
    test(`the reasoning item carries the signature as encrypted_content (${stream ? "stream" : "JSON"}); sent back, it is the thinking block it was`, async () => {
      const res = await gw.fetch("/v1/responses", { method: "POST", json: { ...request("anthropic", "reasoning", stream) } })
      expect(res.status).toBe(200)
      const result = stream
        ? (parseSse(await res.text()).events.find((e) => e.json?.type === "response.completed")!.json!.response as Record<string, any>)
        : ((await res.json()) as Record<string, any>)
      const reasoning = result.output[0]
      expect(reasoning).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "think ".repeat(5) }], encrypted_content: "mock-signature", format: "anthropic-claude-v1" })
      mock.reset()
      const next = await gw.fetch("/v1/responses", { method: "POST", json: turn(reasoning) })
      expect(next.status).toBe(200)
      const sent = mock.requests[mock.requests.length - 1]!.body as Record<string, any>
      expect(sent.messages[1].content).toEqual([
        { type: "thinking", thinking: "think ".repeat(5), signature: "mock-signature" },
        { type: "text", text: "tok tok" },
      ])
    })
  }

  test("a redacted block sent back goes as redacted_thinking; reasoning with no signature, or another family's, is left out", async () => {
    mock.reset()
    const res = await gw.fetch("/v1/responses", { method: "POST", json: turn({ type: "reasoning", summary: [], encrypted_content: "redacted_thinking:opaque" }) })
    expect(res.status).toBe(200)
    expect((mock.requests[mock.requests.length - 1]!.body as Record<string, any>).messages[1].content[0]).toEqual({ type: "redacted_thinking", data: "opaque" })
    mock.reset()
    await gw.fetch("/v1/responses", { method: "POST", json: turn({ type: "reasoning", summary: [{ type: "summary_text", text: "unsigned" }] }) })
    expect((mock.requests[mock.requests.length - 1]!.body as Record<string, any>).messages[1].content).toEqual([{ type: "text", text: "tok tok" }])
    mock.reset()
    const openai = { type: "reasoning", summary: [], encrypted_content: "gAAAAB-openai", format: "openai-responses-v1" }
    expect((await gw.fetch("/v1/responses", { method: "POST", json: turn(openai) })).status).toBe(200)
    expect((mock.requests[mock.requests.length - 1]!.body as Record<string, any>).messages[1].content).toEqual([{ type: "text", text: "tok tok" }])
  })
})

describe("upstream failures end to end", () => {
  test("a stream the upstream resets mid-way ends with response.failed and [DONE], and the mock saw it end", async () => {
    const extra = await startInProcessGateway({
      catalog: {
        ...demoCatalog,
        providers: [{ id: "resetting", kind: "openai-chat", base_url: mock.url, headers: { "x-mock-error": "reset-mid-stream" } }],
        models: [{ id: "mock/reset", context_length: 1000, endpoints: [{ provider: "resetting", upstream_model: "m", pricing: MOCK_PRICE }] }],
      },
    })
    try {
      const res = await extra.fetch("/v1/responses", { method: "POST", json: { model: "mock/reset", input: "x", stream: true } })
      const { events } = parseSse(await res.text())
      expect(typesOf(events).slice(-2)).toEqual(["response.failed", "[DONE]"])
    } finally {
      await extra.stop()
    }
  })

  test("a client that disconnects aborts the upstream stream at once", async () => {
    const extra = await startInProcessGateway({
      catalog: {
        ...demoCatalog,
        providers: [{ id: "slow", kind: "openai-chat", base_url: mock.url, headers: { "x-mock-interval-ms": "50", "x-mock-tokens": "100" } }],
        models: [{ id: "mock/slow", context_length: 1000, endpoints: [{ provider: "slow", upstream_model: "m", pricing: MOCK_PRICE }] }],
      },
    })
    try {
      mock.reset()
      const controller = new AbortController()
      const res = await extra.fetch("/v1/responses", {
        method: "POST",
        json: { model: "mock/slow", input: "x", stream: true },
        signal: controller.signal,
      })
      const reader = res.body!.getReader()
      let text = ""
      while (!text.includes("output_text.delta")) text += new TextDecoder().decode((await reader.read()).value)
      expect(mock.stats.open).toBe(1)
      controller.abort()
      await reader.cancel().catch(() => {})
      for (let i = 0; i < 50 && mock.stats.aborted === 0; i++) await Bun.sleep(10)
      expect(mock.stats.aborted).toBe(1)
      expect(mock.stats.open).toBe(0)
    } finally {
      await extra.stop()
    }
  })
})

describe("a long stream whose deltas arrive together", () => {
  test("300 deltas in one upstream read are written in pieces: every delta, in order, numbered without a gap", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "mock/openai-chat-long", input: "Go on.", stream: true },
    })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    checkStreamRules(events)
    const json = events.filter((e) => e.json !== undefined).map((e) => e.json as Record<string, any>)
    expect(json.map((e) => e.sequence_number)).toEqual(json.map((_, i) => i))
    const deltas = json.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta as string)
    expect(deltas).toHaveLength(300)
    const completed = json.find((e) => e.type === "response.completed")!
    expect(completed.response.output[0].content[0].text).toBe(deltas.join(""))
    expect(typesOf(events).at(-1)).toBe("[DONE]")
  })
})
