/**
 * POST /v1/messages with Anthropic's own client (`@anthropic-ai/sdk`, base URL `http://host:port`,
 * the key as `x-api-key`): messages.create (JSON, tool use and its round trip), messages.stream
 * (text, tool use), count_tokens, presets, routing metadata, and the errors in Anthropic's
 * envelope as the SDK parses them; against the fake provider and against scripts/mock-upstream.ts
 * in all three upstream formats (Messages in → Chat, Responses and Anthropic upstream).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { MOCK_PRICE, type MockScenario, mockScenarioCatalog, UPSTREAM_FORMATS } from "../support/catalog.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { anthropicAt } from "../support/sdk.js"
import { parseSse } from "../support/sse.js"

let mock: MockUpstream
let gw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  process.env.MOCK_UPSTREAM_KEY = "sk-upstream-secret"
  mock = await startMockUpstream()
  gw = await startTestGateway({ catalog: mockScenarioCatalog(mock.url) })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const client = (key = gw.adminKey, headers: Record<string, string> = {}) => anthropicAt(gw, key, { defaultHeaders: headers })

/** demo/echo pinned to the fake provider (the default spreads load across its endpoints). */
const ECHO = { model: "demo/echo", provider: { order: ["fake"], allow_fallbacks: false } }
const user = (content: string) => [{ role: "user" as const, content }]
const WEATHER: Anthropic.Tool = {
  name: "get_weather",
  description: "The weather of a city",
  input_schema: { type: "object", properties: { city: { type: "string" } } },
}

/** The SDK's params do not know this API's extras: they go in the body as they are. */
const create = (body: Record<string, unknown>, c = client()) =>
  c.messages.create(body as unknown as Anthropic.MessageCreateParamsNonStreaming)
const stream = (body: Record<string, unknown>, c = client()) =>
  c.messages.stream(body as unknown as Anthropic.MessageStreamParams)

const caught = async (p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> => {
  try {
    await p
  } catch (e) {
    if (e instanceof Anthropic.APIError) return e
    throw e
  }
  throw new Error("expected an APIError")
}

describe("messages.create against the fake provider", () => {
  test("a text answer: the message object, usage with cost, provider, and X-Generation-Id", async () => {
    const { data: message, response } = await create({ ...ECHO, max_tokens: 64, messages: user("Hello gateway") }).withResponse()
    expect(message.type).toBe("message")
    expect(message.role).toBe("assistant")
    expect(message.model).toBe("demo/echo")
    expect(message.id).toMatch(/^msg_[0-9A-Za-z]{24}$/)
    expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "Echo: Hello gateway" }])
    expect(message.stop_reason).toBe("end_turn")
    expect(message.stop_sequence).toBeNull()
    expect(message.usage.output_tokens).toBe(3)
    expect(message.usage.input_tokens).toBeGreaterThan(0)
    expect(message.usage.cache_read_input_tokens).toBe(0)
    const extra = message as unknown as { provider: string; usage: { cost: number; is_byok: boolean } }
    expect(extra.provider).toBe("fake")
    expect(extra.usage.cost).toBeGreaterThan(0)
    expect(extra.usage.is_byok).toBe(false)
    expect(response.headers.get("x-generation-id")).toMatch(/^gen-/)
  })

  test("tool use, then the round trip with a tool_result answers text", async () => {
    const first = await create({ ...ECHO, max_tokens: 64, tools: [WEATHER], messages: user("Paris [tool:get_weather]") })
    expect(first.stop_reason).toBe("tool_use")
    const call = first.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock
    expect(call.name).toBe("get_weather")
    // The arguments follow the tool's input_schema, filled from the message (its marker left out).
    expect(call.input).toEqual({ city: "Paris" })
    const second = await create({
      ...ECHO,
      max_tokens: 64,
      tools: [WEATHER],
      messages: [
        ...user("Paris [tool:get_weather]"),
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: call.id, content: "18C and sunny" }] },
      ],
    })
    expect(second.stop_reason).toBe("end_turn")
    expect((second.content[0] as Anthropic.TextBlock).text).toBe("The tool get_weather answered: 18C and sunny")
  })

  test("the beta client (POST /v1/messages?beta=true with anthropic-beta, as coding agents call it) is answered the same", async () => {
    const message = await client().beta.messages.create({
      ...(ECHO as unknown as { model: string }),
      max_tokens: 32,
      betas: ["interleaved-thinking-2025-05-14"],
      messages: user("beta hi"),
    })
    expect((message.content[0] as { text: string }).text).toBe("Echo: beta hi")
  })

  test("system prompt, thinking and routing metadata (X-Service-Metadata: enabled)", async () => {
    const message = await create(
      {
        ...ECHO,
        max_tokens: 4096,
        system: "Be brief.",
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: user("Think [reasoning]"),
      },
      client(gw.adminKey, { "x-service-metadata": "enabled" }),
    )
    expect(message.content.map((b) => b.type)).toEqual(["thinking", "text"])
    expect((message.content[0] as Anthropic.ThinkingBlock).thinking).toBe("Thinking it over step by step.")
    const meta = (message as unknown as { service_metadata: { requested: string } }).service_metadata
    expect(meta.requested).toBe("demo/echo")
  })
})

describe("messages.stream against the fake provider", () => {
  test("text deltas accumulate into the final message; usage from message_delta", async () => {
    const s = stream({ ...ECHO, max_tokens: 64, messages: user("Stream me please") })
    const deltas: Array<string> = []
    s.on("text", (delta) => deltas.push(delta))
    const message = await s.finalMessage()
    expect(deltas.length).toBeGreaterThan(1)
    expect(deltas.join("")).toBe("Echo: Stream me please")
    expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "Echo: Stream me please" }])
    expect(message.stop_reason).toBe("end_turn")
    expect(message.usage.output_tokens).toBe(4)
    expect(message.usage.input_tokens).toBeGreaterThan(0)
  })

  test("tool use streams as a tool_use block with input_json_delta", async () => {
    const s = stream({ ...ECHO, max_tokens: 64, tools: [WEATHER], messages: user("Oslo [tool:get_weather]") })
    const json: Array<string> = []
    s.on("inputJson", (partial) => json.push(partial))
    const message = await s.finalMessage()
    expect(json.join("")).toBe(JSON.stringify({ city: "Oslo" }))
    expect(message.stop_reason).toBe("tool_use")
    expect(message.content as Array<unknown>).toEqual([
      { type: "tool_use", id: "call_fake_0", name: "get_weather", input: { city: "Oslo" } },
    ])
  })

  test("the raw stream: message_start, ping, blocks, message_delta with service_metadata, message_stop", async () => {
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": gw.adminKey, "anthropic-version": "2023-06-01", "content-type": "application/json", "x-service-metadata": "enabled" },
      body: JSON.stringify({ ...ECHO, max_tokens: 64, stream: true, messages: user("Hi") }),
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    const { events } = parseSse(await res.text())
    const types = events.map((e) => e.event)
    expect(types.slice(0, 3)).toEqual(["message_start", "ping", "content_block_start"])
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"])
    for (const e of events) expect(e.json?.type).toBe(e.event)
    const delta = events.find((e) => e.event === "message_delta")?.json as { service_metadata?: { requested: string } }
    expect(delta.service_metadata?.requested).toBe("demo/echo")
  })

  test("a failure after the first byte is an error event the SDK raises", async () => {
    const s = stream({ ...ECHO, max_tokens: 64, messages: user("Break [fail-mid]") })
    const error = await caught(s.finalMessage())
    expect(error.type).toBe("api_error")
  })
})

describe("errors in Anthropic's envelope, as the SDK parses them", () => {
  test("401 with a wrong x-api-key is an AuthenticationError", async () => {
    const error = await caught(create({ ...ECHO, max_tokens: 8, messages: user("x") }, client(`sk-gw-v1-${"0".repeat(64)}`)))
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(error.status).toBe(401)
    expect(error.error).toEqual({ type: "error", error: { type: "authentication_error", message: "Invalid API key" } })
  })

  test("400 names the field: max_tokens missing, an unknown field", async () => {
    const missing = await caught(create({ ...ECHO, messages: user("x") }))
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError)
    expect(missing.type).toBe("invalid_request_error")
    expect((missing.error as { error: { message: string } }).error.message).toBe(
      "Invalid request: max_tokens: is missing (an integer of at least 1, as Anthropic requires)",
    )
    const unknown = await caught(create({ ...ECHO, max_tokens: 8, messages: user("x"), container: "c" }))
    expect((unknown.error as { error: { message: string } }).error.message).toContain("container:")
  })

  test("402 on a key over its limit is a billing_error", async () => {
    const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "broke", limit: 0 } })).json()) as { key: string }
    const error = await caught(create({ ...ECHO, max_tokens: 8, messages: user("x") }, client(made.key)))
    expect(error.status).toBe(402)
    expect(error.type).toBe("billing_error")
    expect((error.error as { error: { message: string } }).error.message).toContain("key's limit")
  })

  test("404 for a model the catalog does not serve is a NotFoundError", async () => {
    const error = await caught(create({ model: "nobody/nothing", max_tokens: 8, messages: user("x") }))
    expect(error).toBeInstanceOf(Anthropic.NotFoundError)
    expect(error.type).toBe("not_found_error")
  })

  test("the upstream's failure before the first byte (529, no fallback) is in the envelope", async () => {
    const error = await caught(create({ model: "demo/echo", provider: { order: ["fake"], allow_fallbacks: false }, max_tokens: 8, messages: user("x [fail:529]") }))
    expect(error.status).toBe(529)
    expect(error.type).toBe("overloaded_error")
  })
})

describe("count_tokens, presets", () => {
  test("messages.countTokens answers the gateway's own estimate, more for a longer prompt", async () => {
    const short = await client().messages.countTokens({ model: "demo/echo", messages: user("Hi") })
    const long = await client().messages.countTokens({ model: "demo/echo", system: "x".repeat(400), messages: user("Hi") })
    expect(short.input_tokens).toBe(Math.ceil(JSON.stringify({ model: "demo/echo", messages: user("Hi") }).length / 4))
    expect(long.input_tokens).toBeGreaterThanOrEqual(short.input_tokens + 100)
  })

  test("count_tokens counts an image at its allowance, not its base64", async () => {
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "A".repeat(40_000) } }
    const counted = await client().messages.countTokens({
      model: "demo/echo",
      messages: [{ role: "user", content: [image as Anthropic.ImageBlockParam, { type: "text", text: "What is it?" }] }],
    })
    expect(counted.input_tokens).toBeLessThan(10_000)
    expect(counted.input_tokens).toBeGreaterThan(100)
  })

  test("count_tokens refuses a wrong key and a bad body in Anthropic's envelope", async () => {
    const auth = await caught(client(`sk-gw-v1-${"0".repeat(64)}`).messages.countTokens({ model: "m", messages: user("x") }))
    expect(auth).toBeInstanceOf(Anthropic.AuthenticationError)
    const res = await fetch(`${gw.url}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": gw.adminKey, "content-type": "application/json" },
      body: JSON.stringify({ model: "m" }),
    })
    expect(res.status).toBe(400)
    expect(await res.json()).toEqual({ type: "error", error: { type: "invalid_request_error", message: "Invalid request: messages: is missing" } })
    const refusal = async (body: unknown) => {
      const r = await fetch(`${gw.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers: { "x-api-key": gw.adminKey, "content-type": "application/json" },
        body: JSON.stringify(body),
      })
      expect(r.status).toBe(400)
      return ((await r.json()) as { error: { message: string } }).error.message
    }
    // As the model route refuses them: no model, more messages than a request may carry.
    expect(await refusal({ messages: user("x") })).toBe("Invalid request: model: is missing")
    expect(await refusal({ model: "m", messages: Array.from({ length: 10_001 }, () => ({ role: "user", content: "x" })) })).toBe(
      "Invalid request: messages: at most 10000 items in one request, got 10001",
    )
  })

  test("POST /v1/presets/{slug}/messages makes a version from a Messages body; @preset/slug uses it", async () => {
    const made = await gw.fetch("/v1/presets/brief-echo/messages", {
      method: "POST",
      json: { model: "demo/echo", system: [{ type: "text", text: "Answer briefly." }], max_tokens: 32, temperature: 0.3 },
    })
    expect(made.status).toBe(200)
    const version = ((await made.json()) as { data: { designated_version: { system_prompt: string; config: Record<string, unknown> } } }).data
      .designated_version
    expect(version.system_prompt).toBe("Answer briefly.")
    expect(version.config).toMatchObject({ model: "demo/echo", max_output_tokens: 32, temperature: 0.3 })
    const message = await create({ model: "@preset/brief-echo", provider: ECHO.provider, max_tokens: 16, messages: user("preset hi") })
    expect(message.model).toBe("demo/echo")
    expect((message.content[0] as Anthropic.TextBlock).text).toBe("Echo: preset hi")
    const counted = await client().messages.countTokens({ model: "@preset/brief-echo", messages: user("preset hi") })
    const plain = await client().messages.countTokens({ model: "demo/echo", messages: user("preset hi") })
    expect(counted.input_tokens).toBeGreaterThan(plain.input_tokens)
  })

  test("a preset body with a field the gateway does not carry is refused naming it", async () => {
    const res = await gw.fetch("/v1/presets/bad-one/messages", { method: "POST", json: { model: "demo/echo", stop_sequences: ["x"] } })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("stop_sequences")
  })
})

/** The mock's answers (scripts/mock-upstream.ts): 5 deltas of "tok "; usage input 10, output 5 (10 with reasoning). */
for (const kind of UPSTREAM_FORMATS) {
  describe(`Messages in, ${kind} upstream (mock)`, () => {
    const body = (scenario: MockScenario) => ({
      model: `mock/${kind}-${scenario}`,
      max_tokens: 4096,
      system: "Be brief.",
      messages: user("What now?"),
      ...(scenario === "tool_call" ? { tools: [WEATHER] } : {}),
      ...(scenario === "reasoning" ? { thinking: { type: "enabled", budget_tokens: 1024 } } : {}),
    })

    /** The SDK's stream accumulator keeps only Anthropic's usage fields: `cost` is checked on JSON answers. */
    const expectUsage = (usage: Anthropic.Usage, scenario: string, withCost = true) => {
      expect(usage.input_tokens).toBe(10)
      expect(usage.output_tokens).toBe(scenario === "reasoning" ? 10 : 5)
      if (!withCost) return
      const cost = (usage as unknown as { cost: number }).cost
      expect(cost).toBeCloseTo((10 * MOCK_PRICE.prompt + usage.output_tokens * MOCK_PRICE.completion) / 1e6, 12)
    }

    test("messages.create: text", async () => {
      const message = await create(body("text"))
      expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "tok ".repeat(5) }])
      expect(message.model).toBe(`mock/${kind}-text`)
      expect(message.stop_reason).toBe("end_turn")
      expectUsage(message.usage, "text")
    })

    test("messages.create: tool use", async () => {
      const message = await create(body("tool_call"))
      const call = message.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock
      expect(call.name).toBe("get_weather")
      expect(call.input).toEqual({ input: "tok ".repeat(5) })
      expect(message.stop_reason).toBe("tool_use")
    })

    test("messages.stream: text", async () => {
      const s = stream(body("text"))
      const deltas: Array<string> = []
      s.on("text", (d) => deltas.push(d))
      const message = await s.finalMessage()
      expect(deltas).toEqual(Array(5).fill("tok "))
      expect(message.content as Array<unknown>).toEqual([{ type: "text", text: "tok ".repeat(5) }])
      expectUsage(message.usage, "text", false)
    })

    test("messages.stream: tool use", async () => {
      const message = await stream(body("tool_call")).finalMessage()
      const call = message.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock
      expect(call.name).toBe("get_weather")
      expect(call.input).toEqual({ input: "tok ".repeat(5) })
      expect(message.stop_reason).toBe("tool_use")
    })

    test("messages.stream: thinking then text", async () => {
      const message = await stream(body("reasoning")).finalMessage()
      expect(message.content.map((b) => b.type)).toEqual(["thinking", "text"])
      expect((message.content[0] as Anthropic.ThinkingBlock).thinking).toBe("think ".repeat(5))
      expectUsage(message.usage, "reasoning", false)
    })

    // Anthropic signs its thinking; another upstream's reasoning has no signature to give.
    const signature = kind === "anthropic" ? "mock-signature" : ""

    test("the thinking block carries the upstream's signature (create and stream)", async () => {
      const created = await create(body("reasoning"))
      expect(created.content[0]).toEqual({ type: "thinking", thinking: "think ".repeat(5), signature })
      const streamed = await stream(body("reasoning")).finalMessage()
      expect(streamed.content[0]).toEqual({ type: "thinking", thinking: "think ".repeat(5), signature })
    })

    test("thinking sent back with a tool result reaches the upstream as it came, before the tool use", async () => {
      const first = await stream({ ...body("reasoning"), tools: [WEATHER] }).finalMessage()
      const call: Anthropic.ToolUseBlockParam = { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
      mock.reset()
      await create({
        ...body("text"),
        tools: [WEATHER],
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: [
          ...user("What now?"),
          { role: "assistant", content: [...first.content, call] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18C" }] },
        ],
      })
      const sent = mock.requests[mock.requests.length - 1]!.body as { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> }
      if (kind !== "anthropic") {
        expect(JSON.stringify(sent)).not.toContain("mock-signature")
        return
      }
      const assistant = sent.messages[1]!
      expect(assistant.role).toBe("assistant")
      expect(assistant.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use"])
      expect(assistant.content[0]).toEqual({ type: "thinking", thinking: "think ".repeat(5), signature: "mock-signature" })
    })

    test("the upstream got its own wire format, the system prompt and the max_tokens", async () => {
      mock.reset()
      await create(body("text"))
      const sent = mock.requests[mock.requests.length - 1]!
      const sentBody = sent.body as Record<string, any>
      expect(JSON.stringify(sentBody)).toContain("Be brief.")
      expect(sent.path).toBe(kind === "openai-chat" ? "/v1/chat/completions" : kind === "openai-responses" ? "/v1/responses" : "/v1/messages")
      expect(sentBody.max_tokens ?? sentBody.max_output_tokens ?? sentBody.max_completion_tokens).toBe(4096)
    })
  })
}
