/**
 * The gateway in front of the fake Bedrock: JSON and streamed answers in the three client formats
 * (Responses, Chat Completions, Messages), a tool round trip, errors mapped to the contract's
 * statuses (never the upstream's credentials), a stream split at awkward byte boundaries, and the
 * config's own rules for the kind.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Either } from "effect"
import { MOCK_ACCESS_KEY_ID, MOCK_SECRET_ACCESS_KEY, type MockBedrock, startMockBedrock } from "../../scripts/mock-bedrock.js"
import { demoCatalog, parseConfigFile } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { parseSse } from "../support/sse.js"

const PRICE = { prompt: 3, completion: 15 }
let mock: MockBedrock
let gw: InProcessGateway & { stop: () => Promise<void> }

const provider = (id: string, url: string, headers: Record<string, string> = {}) => ({
  id,
  kind: "bedrock" as const,
  base_url: url,
  region: "us-east-1",
  access_key_id_env: "E2E_BEDROCK_KEY",
  secret_access_key_env: "E2E_BEDROCK_SECRET",
  headers,
})

const catalogFor = (url: string): ConfigFile => ({
  ...demoCatalog,
  providers: [
    ...demoCatalog.providers,
    provider("bedrock", url, { "x-mock-tokens": "3" }),
    provider("bedrock-tools", url, { "x-mock-scenario": "tool_call" }),
    provider("bedrock-split", url, { "x-mock-tokens": "6", "x-mock-split": "5" }),
    provider("bedrock-throttled", url, { "x-mock-error": "throttling" }),
    provider("bedrock-denied", url, { "x-mock-error": "denied" }),
    provider("bedrock-invalid", url, { "x-mock-error": "validation" }),
    provider("bedrock-unavailable", url, { "x-mock-error": "unavailable" }),
  ],
  models: [
    ...demoCatalog.models,
    ...["bedrock", "bedrock-tools", "bedrock-split", "bedrock-throttled", "bedrock-denied", "bedrock-invalid", "bedrock-unavailable"].map((id) => ({
      id: `aws/${id}`,
      context_length: 100000,
      endpoints: [{ provider: id, upstream_model: "anthropic.claude-3-5-haiku-20241022-v1:0", pricing: PRICE, supports: ["tools" as const] }] as const,
    })),
    {
      id: "aws/fallback",
      context_length: 100000,
      endpoints: [
        { provider: "bedrock-throttled", upstream_model: "amazon.nova-pro-v1:0", pricing: PRICE },
        { provider: "bedrock", upstream_model: "amazon.nova-lite-v1:0", pricing: PRICE },
      ] as const,
    },
  ],
})

beforeAll(async () => {
  process.env.E2E_BEDROCK_KEY = MOCK_ACCESS_KEY_ID
  process.env.E2E_BEDROCK_SECRET = MOCK_SECRET_ACCESS_KEY
  mock = await startMockBedrock()
  gw = await startInProcessGateway({ catalog: catalogFor(mock.url) })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const post = (path: string, json: unknown) => gw.fetch(path, { method: "POST", json })
const TOOL_RESPONSES = [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }]
const TOOL_CHAT = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }]
const TOOL_MESSAGES = [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }]
/** The fake's usage: 11 input + 2 cache reads, 7 output. */
const COST = (13 * PRICE.prompt + 7 * PRICE.completion) / 1e6

describe("bedrock through /v1/responses", () => {
  test("JSON: the text, usage and cost; the call signed with SigV4", async () => {
    const res = await post("/v1/responses", { model: "aws/bedrock", input: "hello" })
    const body = (await res.json()) as { output: Array<{ content: Array<{ text: string }> }>; usage: { input_tokens: number; output_tokens: number; cost: number } }
    expect(res.status).toBe(200)
    expect(body.output[0]?.content[0]?.text).toBe("Echo: hello")
    expect(body.usage).toMatchObject({ input_tokens: 13, output_tokens: 7 })
    expect(body.usage.cost).toBeCloseTo(COST, 12)
    expect(mock.requests.at(-1)?.auth).toBe("sigv4")
    expect(mock.requests.at(-1)?.path).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse")
  })

  test("stream: text deltas and the completed response", async () => {
    const res = await post("/v1/responses", { model: "aws/bedrock", input: "hello", stream: true })
    const { events } = parseSse(await res.text())
    const deltas = events.filter((e) => e.json?.type === "response.output_text.delta").map((e) => e.json?.delta)
    expect(deltas).toEqual(["tok ", "tok ", "tok "])
    expect(events.filter((e) => e.json !== undefined).at(-1)?.json?.type).toBe("response.completed")
  })

  test("a stream written 5 bytes at a time: every delta, in order", async () => {
    const res = await post("/v1/responses", { model: "aws/bedrock-split", input: "hello", stream: true })
    const { events } = parseSse(await res.text())
    const text = events.filter((e) => e.json?.type === "response.output_text.delta").map((e) => e.json?.delta).join("")
    expect(text).toBe("tok ".repeat(6))
    expect(events.filter((e) => e.json !== undefined).at(-1)?.json?.type).toBe("response.completed")
  })

  test("a tool round trip: the call, then the answer to its output", async () => {
    const first = (await (await post("/v1/responses", { model: "aws/bedrock-tools", input: "weather?", tools: TOOL_RESPONSES })).json()) as {
      output: Array<{ type: string; call_id?: string; name?: string; arguments?: string }>
    }
    const call = first.output.find((o) => o.type === "function_call")
    expect(call).toMatchObject({ name: "get_weather", call_id: "tooluse_1", arguments: '{"city":"Paris"}' })
    const second = await post("/v1/responses", {
      model: "aws/bedrock-tools",
      tools: TOOL_RESPONSES,
      input: [{ role: "user", content: "weather?" }, call, { type: "function_call_output", call_id: "tooluse_1", output: "sunny" }],
    })
    const body = (await second.json()) as { output: Array<{ content?: Array<{ text: string }> }> }
    expect(body.output[0]?.content?.[0]?.text).toBe("Echo: sunny")
  })
})

describe("bedrock through /v1/chat/completions", () => {
  test("JSON: the message and usage", async () => {
    const res = await post("/v1/chat/completions", { model: "aws/bedrock", messages: [{ role: "user", content: "hi" }] })
    const body = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }>; usage: { prompt_tokens: number; completion_tokens: number } }
    expect(body.choices[0]?.message.content).toBe("Echo: hi")
    expect(body.choices[0]?.finish_reason).toBe("stop")
    expect(body.usage).toMatchObject({ prompt_tokens: 13, completion_tokens: 7 })
  })

  test("stream: deltas, then [DONE]", async () => {
    const res = await post("/v1/chat/completions", { model: "aws/bedrock", messages: [{ role: "user", content: "hi" }], stream: true })
    const { events } = parseSse(await res.text())
    const text = events.map((e) => (e.json?.choices as Array<{ delta?: { content?: string } }> | undefined)?.[0]?.delta?.content ?? "").join("")
    expect(text).toBe("tok tok tok ")
    expect(events.at(-1)?.data).toBe("[DONE]")
  })

  test("a streamed tool call as tool_calls deltas, finish_reason tool_calls", async () => {
    const res = await post("/v1/chat/completions", { model: "aws/bedrock-tools", messages: [{ role: "user", content: "weather?" }], tools: TOOL_CHAT, stream: true })
    const { events } = parseSse(await res.text())
    const choices = events.flatMap((e) => (e.json?.choices as Array<{ delta: { tool_calls?: Array<{ function: { name?: string; arguments?: string } }> }; finish_reason: string | null }>) ?? [])
    const args = choices.flatMap((c) => c.delta.tool_calls ?? []).map((t) => t.function.arguments ?? "").join("")
    expect(args).toBe('{"city":"Paris"}')
    expect(choices.at(-1)?.finish_reason).toBe("tool_calls")
  })
})

describe("bedrock through /v1/messages", () => {
  test("JSON: the content and usage", async () => {
    const res = await post("/v1/messages", { model: "aws/bedrock", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    const body = (await res.json()) as { content: Array<{ type: string; text: string }>; stop_reason: string }
    expect(body.content).toEqual([{ type: "text", text: "Echo: hi" }])
    expect(body.stop_reason).toBe("end_turn")
    expect((mock.requests.at(-1)?.body as { inferenceConfig?: unknown } | undefined)?.inferenceConfig).toEqual({ maxTokens: 100 })
  })

  test("stream: text deltas and message_stop", async () => {
    const res = await post("/v1/messages", { model: "aws/bedrock", max_tokens: 100, messages: [{ role: "user", content: "hi" }], stream: true })
    const { events } = parseSse(await res.text())
    const text = events.map((e) => (e.json?.delta as { text?: string } | undefined)?.text ?? "").join("")
    expect(text).toBe("tok tok tok ")
    expect(events.at(-1)?.json?.type).toBe("message_stop")
  })

  test("a tool_use block, and its tool_result answered", async () => {
    const first = (await (await post("/v1/messages", { model: "aws/bedrock-tools", max_tokens: 100, tools: TOOL_MESSAGES, messages: [{ role: "user", content: "weather?" }] })).json()) as {
      content: Array<{ type: string; id?: string; input?: unknown }>
      stop_reason: string
    }
    const use = first.content.find((b) => b.type === "tool_use")
    expect(use).toMatchObject({ id: "tooluse_1", input: { city: "Paris" } })
    expect(first.stop_reason).toBe("tool_use")
    const second = (await (
      await post("/v1/messages", {
        model: "aws/bedrock-tools",
        max_tokens: 100,
        tools: TOOL_MESSAGES,
        messages: [
          { role: "user", content: "weather?" },
          { role: "assistant", content: first.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "tooluse_1", content: "sunny" }] },
        ],
      })
    ).json()) as { content: Array<{ text?: string }> }
    expect(second.content[0]?.text).toBe("Echo: sunny")
  })
})

describe("bedrock errors reach the caller as the contract's statuses", () => {
  test("throttling is 429 with Retry-After", async () => {
    const res = await post("/v1/responses", { model: "aws/bedrock-throttled", input: "x" })
    expect(res.status).toBe(429)
    expect(res.headers.get("retry-after")).toBe("3")
  })
  test("a refused signature or access is 502, naming no credential", async () => {
    const res = await post("/v1/chat/completions", { model: "aws/bedrock-denied", messages: [{ role: "user", content: "x" }] })
    const text = await res.text()
    expect(res.status).toBe(502)
    expect(text).not.toContain(MOCK_SECRET_ACCESS_KEY)
    expect(text).not.toContain(MOCK_ACCESS_KEY_ID)
  })
  test("a validation error is 400", async () => {
    expect((await post("/v1/messages", { model: "aws/bedrock-invalid", max_tokens: 10, messages: [{ role: "user", content: "x" }] })).status).toBe(400)
  })
  test("service unavailable is 529 (overloaded)", async () => {
    expect((await post("/v1/responses", { model: "aws/bedrock-unavailable", input: "x" })).status).toBe(529)
  })
  test("a throttled endpoint fails over to the next one", async () => {
    const res = await post("/v1/responses", { model: "aws/fallback", input: "x", provider: { order: ["bedrock-throttled", "bedrock"] } })
    expect(res.status).toBe(200)
    expect(mock.requests.at(-1)?.path).toBe("/model/amazon.nova-lite-v1%3A0/converse")
  })
})

describe("config: the bedrock kind's own settings", () => {
  const withProvider = (entry: Record<string, unknown>) =>
    parseConfigFile("test.json", JSON.stringify({ providers: [{ id: "a", kind: "fake" }, { id: "b", kind: "fake" }, entry], models: [] }))
  test("a bedrock provider needs a region, named with its path", () => {
    const parsed = withProvider({ id: "aws", kind: "bedrock" })
    expect(Either.isLeft(parsed) && parsed.left.message).toBe('test.json: providers[2].region: is required for kind "bedrock"')
  })
  test("base_url is optional for bedrock (the region's host)", () => {
    expect(Either.isRight(withProvider({ id: "aws", kind: "bedrock", region: "eu-central-1" }))).toBe(true)
  })
  test("a key id without its secret is refused", () => {
    const parsed = withProvider({ id: "aws", kind: "bedrock", region: "eu-central-1", access_key_id_env: "K" })
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("providers[2].secret_access_key_env: is required with access_key_id_env")
  })
  test("region is only for bedrock", () => {
    const parsed = withProvider({ id: "x", kind: "openai-chat", base_url: "http://x", region: "us-east-1" })
    expect(Either.isLeft(parsed) && parsed.left.message).toContain('providers[2].region: is only for kind "bedrock"')
  })
})
