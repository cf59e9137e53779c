/**
 * POST /v1/chat/completions with the real clients: `openai` `chat.completions.create` (JSON,
 * stream, a tools round trip, `stream_options.include_usage`) and `@openrouter/sdk` `chat.send`
 * (its zod schemas validate every answer and chunk), each against the fake provider and against
 * scripts/mock-upstream.ts in the three upstream formats; presets by `@preset/slug`, the
 * `X-Generation-Id` header, the generation record, routing metadata, and refusals in the envelope.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as sdkErrors from "@openrouter/sdk/models/errors"
import OpenAI from "openai"
import type { ConfigFile } from "../../src/config/file.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { MOCK_PRICE, MOCK_SCENARIOS, type MockScenario, mockScenarioCatalog, UPSTREAM_FORMATS } from "../support/catalog.js"
import { expectError, startTestGateway, type TestGateway } from "../support/gateway.js"
import { caught, openaiAt, openRouterAt } from "../support/sdk.js"
import { parseSse } from "../support/sse.js"

let mock: MockUpstream
let gw: TestGateway & { stop: () => Promise<void> }

const catalogFor = (url: string): ConfigFile =>
  mockScenarioCatalog(url, {
    providers: [{ id: "mock-failing", kind: "openai-chat", base_url: url, headers: { "x-mock-error": "reset-mid-stream" } }],
    models: [{ id: "mock/reset", context_length: 1000, endpoints: [{ provider: "mock-failing", upstream_model: "m", pricing: MOCK_PRICE }] }],
  })

beforeAll(async () => {
  process.env.MOCK_UPSTREAM_KEY = "sk-upstream-secret"
  mock = await startMockUpstream()
  gw = await startTestGateway({ catalog: catalogFor(mock.url), streamKeepAliveMs: 40 })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

/** The `X-Generation-Id` of the last answer either client received. */
let lastGenerationId: string | null = null
const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
  const res = await fetch(input, init)
  const id = res.headers.get("x-generation-id")
  if (id !== null) lastGenerationId = id
  return res
}

const openai = (apiKey = gw.adminKey) => openaiAt(gw, apiKey, { fetch: recordingFetch as typeof fetch })
const sdk = () => openRouterAt(gw)

const WEATHER: OpenAI.Chat.ChatCompletionTool = {
  type: "function",
  function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } },
}

/** Each upstream: the model, what a text answer says, and the tool-call marker it needs. */
interface Upstream {
  readonly name: string
  readonly model: (scenario: MockScenario) => string
  readonly prompt: (scenario: MockScenario) => string
  readonly text: (prompt: string) => string
}

const UPSTREAMS: ReadonlyArray<Upstream> = [
  {
    name: "the fake provider",
    model: () => "demo/echo",
    prompt: (scenario) => (scenario === "tool_call" ? "call it [tool:get_weather]" : scenario === "reasoning" ? "think [reasoning]" : "hello chat"),
    text: (prompt) => `Echo: ${prompt}`,
  },
  ...UPSTREAM_FORMATS.map(
    (kind): Upstream => ({
      name: `mock upstream ${kind}`,
      model: (scenario) => `mock/${kind}-${scenario}`,
      prompt: () => "What now?",
      text: () => "tok ".repeat(5),
    }),
  ),
]

const messages = (prompt: string): Array<OpenAI.Chat.ChatCompletionMessageParam> => [
  { role: "system", content: "Be brief." },
  { role: "user", content: prompt },
]

for (const up of UPSTREAMS) {
  describe(`openai chat.completions.create, ${up.name}`, () => {
    test("JSON: the text, finish reason, usage with cost, provider and the X-Generation-Id header", async () => {
      const prompt = up.prompt("text")
      const { data, response } = await openai()
        .chat.completions.create({ model: up.model("text"), messages: messages(prompt) })
        .withResponse()
      expect(data.object).toBe("chat.completion")
      expect(data.id).toMatch(/^chatcmpl-/)
      expect(Number.isInteger(data.created)).toBe(true)
      expect(data.model).toBe(up.model("text"))
      const choice = data.choices[0]!
      expect(choice.message.role).toBe("assistant")
      expect(choice.message.content).toBe(up.text(prompt))
      expect(choice.finish_reason).toBe("stop")
      expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens)
      expect(data.usage!.completion_tokens).toBeGreaterThan(0)
      const extra = data as unknown as { provider: string; usage: { cost: number; is_byok: boolean } }
      expect(extra.usage.cost).toBeGreaterThan(0)
      expect(extra.usage.is_byok).toBe(false)
      expect(typeof extra.provider).toBe("string")
      expect(response.headers.get("x-generation-id")).toMatch(/^gen-/)
    })

    test("stream: a role chunk first, the text in content deltas, a finish chunk, the usage chunk with no choices", async () => {
      const prompt = up.prompt("text")
      const stream = await openai().chat.completions.create({ model: up.model("text"), messages: messages(prompt), stream: true })
      const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
      for await (const chunk of stream) chunks.push(chunk)
      expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant")
      expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0]!.id)).toBe(true)
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(up.text(prompt))
      const finish = chunks.findIndex((c) => c.choices[0]?.finish_reason != null)
      expect(chunks[finish]!.choices[0]!.finish_reason).toBe("stop")
      expect(finish).toBe(chunks.length - 2)
      const last = chunks.at(-1)!
      expect(last.choices).toEqual([])
      expect(last.usage!.completion_tokens).toBeGreaterThan(0)
      expect((last.usage as unknown as { cost: number }).cost).toBeGreaterThan(0)
    })

    test("stream_options.include_usage false: no usage chunk; true: the usage chunk", async () => {
      const prompt = up.prompt("text")
      const without = await openai().chat.completions.create({
        model: up.model("text"),
        messages: messages(prompt),
        stream: true,
        stream_options: { include_usage: false },
      })
      const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
      for await (const chunk of without) chunks.push(chunk)
      expect(chunks.some((c) => c.usage != null)).toBe(false)
      expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop")
      const withUsage = await openai().chat.completions.create({
        model: up.model("text"),
        messages: messages(prompt),
        stream: true,
        stream_options: { include_usage: true },
      })
      let usage: OpenAI.CompletionUsage | undefined
      for await (const chunk of withUsage) if (chunk.usage) usage = chunk.usage
      expect(usage?.prompt_tokens).toBeGreaterThan(0)
    })

    test("tools round trip: tool_calls come back, the tool's output goes back, the answer follows", async () => {
      const prompt = up.prompt("tool_call")
      const first = await openai().chat.completions.create({ model: up.model("tool_call"), messages: messages(prompt), tools: [WEATHER] })
      const choice = first.choices[0]!
      expect(choice.finish_reason).toBe("tool_calls")
      const call = choice.message.tool_calls![0]!
      expect(call.type).toBe("function")
      if (call.type !== "function") throw new Error("not a function call")
      expect(call.function.name).toBe("get_weather")
      expect(() => JSON.parse(call.function.arguments)).not.toThrow()
      const from = mock.requests.length
      const second = await openai().chat.completions.create({
        model: up.model("tool_call"),
        messages: [
          ...messages(prompt),
          choice.message,
          { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" },
        ],
        tools: [WEATHER],
      })
      expect(second.choices[0]!.message.role).toBe("assistant")
      if (up.name === "the fake provider") {
        expect(second.choices[0]!.message.content).toContain("sunny, 21 C")
        expect(second.choices[0]!.finish_reason).toBe("stop")
      } else {
        // The upstream got the call and its output in its own wire format.
        const sent = JSON.stringify(mock.requests.at(-1)!.body)
        expect(mock.requests.length).toBe(from + 1)
        expect(sent).toContain(call.id)
        expect(sent).toContain("sunny, 21 C")
      }
    })

    test("stream of a tool call: the call's id and name first, then its arguments, finish reason tool_calls", async () => {
      const stream = await openai().chat.completions.create({
        model: up.model("tool_call"),
        messages: messages(up.prompt("tool_call")),
        tools: [WEATHER],
        stream: true,
      })
      let id: string | undefined
      let name: string | undefined
      let args = ""
      let finish: string | null | undefined
      for await (const chunk of stream) {
        for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
          expect(call.index).toBe(0)
          id ??= call.id
          name ??= call.function?.name
          args += call.function?.arguments ?? ""
        }
        finish = chunk.choices[0]?.finish_reason ?? finish
      }
      expect(id?.length).toBeGreaterThan(0)
      expect(name).toBe("get_weather")
      expect(() => JSON.parse(args)).not.toThrow()
      expect(finish).toBe("tool_calls")
    })

    test("reasoning: message.reasoning in JSON, delta.reasoning in the stream, before the text", async () => {
      const prompt = up.prompt("reasoning")
      const body = { model: up.model("reasoning"), messages: messages(prompt), reasoning_effort: "low" as const }
      const data = await openai().chat.completions.create(body)
      const message = data.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning?: string }
      expect(message.reasoning?.length).toBeGreaterThan(0)
      expect(message.content).toBe(up.text(prompt))
      const stream = await openai().chat.completions.create({ ...body, stream: true })
      const order: Array<string> = []
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as { reasoning?: string; content?: string } | undefined
        if (delta?.reasoning) order.push("reasoning")
        if (delta?.content) order.push("content")
      }
      expect(order[0]).toBe("reasoning")
      expect(order.at(-1)).toBe("content")
    })
  })

  describe(`@openrouter/sdk chat.send validates every answer, ${up.name}`, () => {
    for (const scenario of MOCK_SCENARIOS) {
      test(`JSON and stream, ${scenario}`, async () => {
        const prompt = up.prompt(scenario)
        const chatRequest = {
          model: up.model(scenario),
          messages: [
            { role: "system" as const, content: "Be brief." },
            { role: "user" as const, content: prompt },
          ],
          ...(scenario === "tool_call" ? { tools: [{ type: "function" as const, function: { name: "get_weather", parameters: { type: "object" } } }] } : {}),
          ...(scenario === "reasoning" ? { reasoning: { effort: "low" as const } } : {}),
        }
        const result = await sdk().chat.send({ chatRequest })
        if (Symbol.asyncIterator in result) throw new Error("expected a JSON result")
        expect(result.object).toBe("chat.completion")
        expect(result.usage?.totalTokens).toBeGreaterThan(0)
        if (scenario === "tool_call") expect(result.choices[0]!.message.toolCalls?.[0]?.function.name).toBe("get_weather")
        else expect(result.choices[0]!.message.content).toBe(up.text(prompt))
        if (scenario === "reasoning") expect(result.choices[0]!.message.reasoningDetails?.length).toBe(1)

        const stream = await sdk().chat.send({ chatRequest: { ...chatRequest, stream: true } })
        if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
        let text = ""
        let usage: number | undefined
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? ""
          if (chunk.usage) usage = chunk.usage.totalTokens
        }
        if (scenario !== "tool_call") expect(text).toBe(up.text(prompt))
        expect(usage).toBeGreaterThan(0)
      })
    }

    test("routing metadata: openrouter_metadata on the result and on the last chunk when the SDK asks", async () => {
      const chatRequest = { model: up.model("text"), messages: [{ role: "user" as const, content: up.prompt("text") }] }
      const result = await sdk().chat.send({ chatRequest, xOpenRouterMetadata: "enabled" })
      if (Symbol.asyncIterator in result) throw new Error("expected a JSON result")
      expect(result.openrouterMetadata?.requested).toBe(up.model("text"))
      expect(result.openrouterMetadata?.endpoints.available.length).toBeGreaterThan(0)
      const stream = await sdk().chat.send({ chatRequest: { ...chatRequest, stream: true }, xOpenRouterMetadata: "enabled" })
      if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
      const chunks = []
      for await (const chunk of stream) chunks.push(chunk)
      expect(chunks.at(-1)?.openrouterMetadata?.requested).toBe(up.model("text"))
      expect(chunks.slice(0, -1).every((c) => c.openrouterMetadata === undefined)).toBe(true)
    })
  })
}

describe("native_finish_reason", () => {
  test("is the upstream's own word where it has one (Anthropic's end_turn, tool_use), in JSON and in the stream", async () => {
    const cases = [
      ["mock/anthropic-text", "stop", "end_turn"],
      ["mock/anthropic-tool_call", "tool_calls", "tool_use"],
      ["mock/openai-chat-text", "stop", "stop"],
    ] as const
    for (const [model, reason, native] of cases) {
      const body = { model, messages: messages("What now?"), ...(model.endsWith("tool_call") ? { tools: [WEATHER] } : {}) }
      const choice = (await openai().chat.completions.create(body)).choices[0] as unknown as { finish_reason: string; native_finish_reason: string }
      expect([model, choice.finish_reason, choice.native_finish_reason]).toEqual([model, reason, native])
      const last: Array<unknown> = []
      for await (const chunk of await openai().chat.completions.create({ ...body, stream: true })) {
        const c = chunk.choices[0] as unknown as { finish_reason: string | null; native_finish_reason: string | null } | undefined
        if (c?.finish_reason != null) last.push(c.finish_reason, c.native_finish_reason)
      }
      expect([model, ...last]).toEqual([model, reason, native])
    }
  })
})

describe("reasoning details sent back to Anthropic", () => {
  const chatRequest = {
    model: "mock/anthropic-reasoning",
    messages: [{ role: "user" as const, content: "What now?" }],
    reasoning: { effort: "low" as const },
  }

  test("the SDK reads the signature on the text detail, in JSON and in the stream; sent back, it is the thinking block it was", async () => {
    const result = await sdk().chat.send({ chatRequest })
    if (Symbol.asyncIterator in result) throw new Error("expected a JSON result")
    const details = result.choices[0]!.message.reasoningDetails
    expect(details).toEqual([{ type: "reasoning.text", text: "think ".repeat(5), signature: "mock-signature", format: "anthropic-claude-v1", index: 0 }])

    const stream = await sdk().chat.send({ chatRequest: { ...chatRequest, stream: true } })
    if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
    let text = ""
    let signature: string | undefined
    for await (const chunk of stream) {
      for (const detail of chunk.choices[0]?.delta.reasoningDetails ?? []) {
        if (detail.type !== "reasoning.text") continue
        text += detail.text ?? ""
        signature = detail.signature ?? signature
      }
    }
    expect({ text, signature }).toEqual({ text: "think ".repeat(5), signature: "mock-signature" })

    mock.reset()
    const back = [
      { role: "user", content: "What now?" },
      {
        role: "assistant",
        content: "tok tok",
        reasoning_details: [
          { type: "reasoning.text", text: "think ".repeat(3), index: 0 },
          { type: "reasoning.text", text: "think think ", signature: "mock-signature", format: "anthropic-claude-v1", index: 0 },
          // Another family's (a turn answered by an OpenAI model): not Claude's to take.
          { type: "reasoning.encrypted", data: "gAAAAB-openai", format: "openai-responses-v1", index: 0 },
        ],
      },
      { role: "user", content: "And then?" },
    ] as unknown as Array<OpenAI.Chat.ChatCompletionMessageParam>
    await openai().chat.completions.create({ model: chatRequest.model, messages: back, reasoning_effort: "low" })
    const sent = mock.requests[mock.requests.length - 1]!.body as { messages: Array<{ content: unknown }> }
    expect(sent.messages[1]!.content).toEqual([
      { type: "thinking", thinking: "think ".repeat(5), signature: "mock-signature" },
      { type: "text", text: "tok tok" },
    ])
  })
})

describe("routing metadata with X-Service-Metadata", () => {
  const chat = (json: unknown) =>
    gw.fetch("/v1/chat/completions", { method: "POST", json, headers: { "x-service-metadata": "enabled" } })

  test("service_metadata on the JSON result, not openrouter_metadata", async () => {
    const body = (await (await chat({ model: "demo/echo", messages: [{ role: "user", content: "hi" }] })).json()) as Record<string, any>
    expect(body.service_metadata.requested).toBe("demo/echo")
    expect(typeof body.service_metadata.attempt).toBe("number")
    expect(body.openrouter_metadata).toBeUndefined()
  })

  test("on the usage chunk, or on the finish chunk when include_usage is false", async () => {
    for (const include_usage of [true, false]) {
      const res = await chat({ model: "demo/echo", stream: true, stream_options: { include_usage }, messages: [{ role: "user", content: "hi" }] })
      const { events } = parseSse(await res.text())
      const chunks = events.filter((e) => e.json !== undefined).map((e) => e.json as Record<string, any>)
      expect(chunks.at(-1)!.service_metadata.requested).toBe("demo/echo")
      expect(chunks.slice(0, -1).some((c) => "service_metadata" in c)).toBe(false)
      expect(chunks.at(-1)!.choices.length).toBe(include_usage ? 0 : 1)
    }
  })
})

describe("waiting for the first token", () => {
  test("keep-alive comment lines are sent after the role chunk; the openai client reads through them", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "demo/echo", stream: true, messages: [{ role: "user", content: "wait [ttft:300]" }] },
    })
    const { events, comments } = parseSse(await res.text())
    expect(comments).toContain("keep-alive")
    expect(events.map((e) => (e.json?.choices as Array<{ delta: { content?: string } }> | undefined)?.[0]?.delta.content ?? "").join("")).toBe(
      "Echo: wait [ttft:300]",
    )
    const stream = await openai().chat.completions.create({ model: "demo/echo", stream: true, messages: [{ role: "user", content: "wait [ttft:200]" }] })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
    expect(text).toBe("Echo: wait [ttft:200]")
  })
})

describe("debug.echo_upstream_body", () => {
  test("the stream's first chunk has no choices and carries the body sent upstream; the SDK takes it", async () => {
    mock.reset()
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "mock/openai-chat-text", stream: true, debug: { echo_upstream_body: true }, messages: [{ role: "user", content: "dbg" }] },
    })
    const chunks = parseSse(await res.text()).events.filter((e) => e.json !== undefined).map((e) => e.json as Record<string, any>)
    expect(chunks[0]!.choices).toEqual([])
    expect(chunks[0]!.debug.echo_upstream_body).toEqual(mock.requests.at(-1)!.body)
    expect(chunks[1]!.choices[0].delta.role).toBe("assistant")
    const stream = await sdk().chat.send({
      chatRequest: { model: "demo/echo", stream: true, debug: { echoUpstreamBody: true }, messages: [{ role: "user", content: "dbg" }] },
    })
    if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
    expect(text).toBe("Echo: dbg")
  })
})

describe("a failure after the first byte", () => {
  test("the fake provider's mid-stream failure: a chunk with top-level error and finish_reason error, then [DONE]", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "demo/echo", stream: true, messages: [{ role: "user", content: "break [fail-mid]" }] },
    })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    expect(events.at(-1)!.data).toBe("[DONE]")
    const failed = events.find((e) => e.json?.error !== undefined)!.json as Record<string, any>
    expect(failed.error).toMatchObject({ code: 502, message: expect.stringContaining("failed mid-stream") })
    expect(failed.choices[0].finish_reason).toBe("error")
  })

  test("openai's client raises an APIError from the error chunk, after the text before it", async () => {
    const stream = await openai().chat.completions.create({ model: "mock/reset", stream: true, messages: [{ role: "user", content: "x" }] })
    let text = ""
    const error = await caught(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
      })(),
    )
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect(text.length).toBeGreaterThan(0)
  })
})

describe("refusals in the contract's envelope", () => {
  test("n > 1, logprobs and stop are 400s naming the field; the openai client raises BadRequestError", async () => {
    for (const [field, value] of [["n", 2], ["logprobs", true], ["stop", ["\n"]], ["seed", 7]] as const) {
      const res = await gw.fetch("/v1/chat/completions", {
        method: "POST",
        json: { model: "demo/echo", messages: [{ role: "user", content: "x" }], [field]: value },
      })
      expect(await expectError(res, 400)).toStartWith(`Invalid request: ${field}: `)
    }
    const error = await caught(openai().chat.completions.create({ model: "demo/echo", messages: [{ role: "user", content: "x" }], n: 3 }))
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
  })

  test("a missing key is 401, an unknown model 404, with the SDK's typed errors", async () => {
    expect(await caught(openai("sk-gw-v1-nope").chat.completions.create({ model: "demo/echo", messages: [{ role: "user", content: "x" }] }))).toBeInstanceOf(
      OpenAI.AuthenticationError,
    )
    const notFound = await caught(sdk().chat.send({ chatRequest: { model: "nobody/none", messages: [{ role: "user", content: "x" }] } }))
    expect(notFound).toBeInstanceOf(sdkErrors.NotFoundResponseError)
  })
})

describe("presets", () => {
  test("POST /v1/presets/{slug}/chat/completions: system messages become system_prompt, the rest the config", async () => {
    const made = await gw.fetch("/v1/presets/chat-brief/chat/completions", {
      method: "POST",
      json: {
        model: "mock/openai-chat-text",
        temperature: 0.25,
        messages: [
          { role: "system", content: "Answer in French." },
          { role: "developer", content: [{ type: "text", text: "Be brief." }] },
          { role: "user", content: "not stored" },
        ],
      },
    })
    expect(made.status).toBe(200)
    const version = ((await made.json()) as { data: { designated_version: { system_prompt: string; config: Record<string, unknown> } } }).data
      .designated_version
    expect(version.system_prompt).toBe("Answer in French.\n\nBe brief.")
    expect(version.config).toMatchObject({ model: "mock/openai-chat-text", temperature: 0.25 })
    expect(JSON.stringify(version.config)).not.toContain("not stored")
  })

  test("the SDK's presets.createPresetsChatCompletions validates; a bad body is its BadRequest", async () => {
    const made = await sdk().presets.createPresetsChatCompletions({
      slug: "sdk-chat",
      chatRequest: { model: "demo/echo", messages: [{ role: "system", content: "Terse." }] },
    })
    expect(made.data.designatedVersion?.systemPrompt).toBe("Terse.")
    const bad = await caught(
      sdk().presets.createPresetsChatCompletions({ slug: "sdk-chat", chatRequest: { model: "demo/echo", messages: [], temperature: 9 } }),
    )
    expect(bad).toBeInstanceOf(sdkErrors.BadRequestResponseError)
  })

  test("@preset/slug: the preset's model, settings and system prompt reach the upstream; include_usage false holds", async () => {
    mock.reset()
    const stream = await openai().chat.completions.create({
      model: "@preset/chat-brief",
      messages: [{ role: "user", content: "Bonjour" }],
      stream: true,
      stream_options: { include_usage: false },
    })
    const chunks: Array<OpenAI.Chat.ChatCompletionChunk> = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks.some((c) => c.usage != null)).toBe(false)
    expect(chunks[0]!.model).toBe("mock/openai-chat-text")
    const sent = mock.requests.at(-1)!.body as { messages: Array<{ role: string; content: unknown }>; temperature: number }
    expect(sent.messages[0]).toEqual({ role: "system", content: "Answer in French.\n\nBe brief." })
    expect(sent.temperature).toBe(0.25)
  })
})

describe("the generation record", () => {
  test("X-Generation-Id names a record of the chat answer: model, tokens, cost, finish reason, streamed, content", async () => {
    // The workspace keeps prompts and completions (GET /generation/content).
    const workspace = ((await (await gw.fetch("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id
    const patched = await gw.fetch(`/v1/workspaces/${workspace}`, { method: "PATCH", json: { is_observability_io_logging_enabled: true } })
    expect(patched.status).toBe(200)
    const stream = await openai().chat.completions.create({ model: "demo/echo", messages: [{ role: "user", content: "record me" }], stream: true })
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage
    const id = lastGenerationId
    expect(id).toMatch(/^gen-/)
    await gw.server.drain()
    const g = ((await (await gw.fetch(`/v1/generation?id=${id}`)).json()) as { data: Record<string, any> }).data
    expect(g).toMatchObject({ id, model: "demo/echo", streamed: true, finish_reason: "stop", tokens_completion: usage!.completion_tokens })
    expect(g.total_cost).toBeCloseTo((usage as unknown as { cost: number }).cost, 12)
    const content = ((await (await gw.fetch(`/v1/generation/content?id=${id}`)).json()) as { data: Record<string, any> }).data
    expect(content.output.completion).toBe("Echo: record me")
    expect(content.input.messages).toEqual([{ role: "user", content: "record me" }])
  })
})
