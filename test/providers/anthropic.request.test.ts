import { describe, expect, test } from "bun:test"
import { anthropicRequestBody, thinkingBudget } from "../../src/providers/anthropic/request"
import { ProviderError, type NormalizedRequest } from "../../src/providers/types"
import { textRequest, weatherTool } from "./helpers"

const conversation: NormalizedRequest = {
  model: "claude",
  instructions: "Be brief.",
  input: [
    { type: "message", role: "system", content: [{ type: "text", text: "System rule." }] },
    { type: "message", role: "user", content: [{ type: "text", text: "Hello" }] },
    {
      type: "message",
      role: "user",
      content: [
        { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" },
        { type: "image", url: "https://example.test/cat.jpg" },
      ],
    },
    { type: "message", role: "developer", content: [{ type: "text", text: "Dev rule." }] },
    { type: "message", role: "assistant", content: [{ type: "text", text: "Let me check." }] },
    { type: "function_call", callId: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' },
    { type: "function_call_output", callId: "toolu_1", output: "sunny" },
    { type: "message", role: "user", content: [{ type: "text", text: "Thanks" }] },
  ],
  tools: [],
}

describe("anthropic request mapping", () => {
  test("system comes from instructions and system/developer messages; roles alternate", () => {
    const body = anthropicRequestBody(conversation, false)
    expect(body.system).toBe("Be brief.\n\nSystem rule.\n\nDev rule.")
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Hello" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          { type: "image", source: { type: "url", url: "https://example.test/cat.jpg" } },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me check." },
          { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "sunny" },
          { type: "text", text: "Thanks" },
        ],
      },
    ])
    expect(body.max_tokens).toBe(4096)
    expect(body.stream).toBe(false)
  })

  test("tools get input_schema and tool choices map to auto/any/tool/none", () => {
    const base = textRequest("hi", { tools: [weatherTool, { type: "function", name: "ping" }] })
    const body = anthropicRequestBody(base, true)
    expect(body.tools).toEqual([
      { name: "get_weather", description: "Weather of a city", input_schema: weatherTool.parameters },
      { name: "ping", input_schema: { type: "object", properties: {} } },
    ])
    expect(anthropicRequestBody({ ...base, toolChoice: "auto" }, false).tool_choice).toEqual({ type: "auto" })
    expect(anthropicRequestBody({ ...base, toolChoice: "required" }, false).tool_choice).toEqual({ type: "any" })
    expect(anthropicRequestBody({ ...base, toolChoice: "none" }, false).tool_choice).toEqual({ type: "none" })
    expect(anthropicRequestBody({ ...base, toolChoice: { type: "function", name: "ping" } }, false).tool_choice).toEqual({ type: "tool", name: "ping" })
    expect(anthropicRequestBody({ ...base, parallelToolCalls: false }, false).tool_choice).toEqual({ type: "auto", disable_parallel_tool_use: true })
    expect(anthropicRequestBody({ ...base, toolChoice: "required", parallelToolCalls: false }, false).tool_choice).toEqual({
      type: "any",
      disable_parallel_tool_use: true,
    })
  })

  test("sampling options, max tokens and user map to Messages fields", () => {
    const body = anthropicRequestBody(textRequest("hi", { temperature: 0.5, topP: 0.9, topK: 20, maxOutputTokens: 300, user: "u-1" }), false)
    expect(body).toEqual({
      model: "mock-model",
      max_tokens: 300,
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      metadata: { user_id: "u-1" },
      stream: false,
    })
  })

  test("reasoning effort sets a thinking budget and max_tokens above it", () => {
    expect(thinkingBudget({ effort: "low" })).toBe(1024)
    expect(thinkingBudget({ effort: "medium" })).toBe(4096)
    expect(thinkingBudget({ effort: "high" })).toBe(16384)
    expect(thinkingBudget({ effort: "none" })).toBeUndefined()
    expect(thinkingBudget({ enabled: false, effort: "high" })).toBeUndefined()
    expect(thinkingBudget({ summary: "auto" })).toBeUndefined()
    const high = anthropicRequestBody(textRequest("hi", { reasoning: { effort: "high" }, temperature: 0.2, topK: 5 }), false)
    expect(high.thinking).toEqual({ type: "enabled", budget_tokens: 16384 })
    expect(high.max_tokens).toBe(16384 + 4096)
    // Anthropic refuses temperature and top_k with thinking on.
    expect("temperature" in high || "top_k" in high).toBe(false)
  })

  test("Claude's signed reasoning goes back as thinking blocks opening the assistant turn, only with thinking on", () => {
    const input: NormalizedRequest["input"] = [
      { type: "message", role: "user", content: [{ type: "text", text: "Weather?" }] },
      { type: "message", role: "assistant", content: [{ type: "text", text: "Checking." }] },
      { type: "reasoning", summary: "The user wants weather.", encryptedContent: "sig-1" },
      { type: "reasoning", summary: "", encryptedContent: "opaque-data", redacted: true },
      { type: "reasoning", summary: "Unsigned thoughts." },
      { type: "reasoning", summary: "OpenAI's", encryptedContent: "gAAAA-enc", format: "openai-responses-v1" },
      { type: "function_call", callId: "toolu_1", name: "get_weather", arguments: "{}" },
      { type: "function_call_output", callId: "toolu_1", output: "sunny" },
    ]
    const on = anthropicRequestBody(textRequest("x", { input, reasoning: { effort: "low" }, cacheControl: { type: "ephemeral" } }), false)
    expect(on.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "The user wants weather.", signature: "sig-1" },
        { type: "redacted_thinking", data: "opaque-data" },
        { type: "text", text: "Checking." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} },
      ],
    })
    const off = anthropicRequestBody(textRequest("x", { input }), false)
    expect(off.messages[1].content.map((block) => block.type)).toEqual(["text", "tool_use"])
  })

  test("reasoning maxTokens is the budget; a large enough max_tokens stays", () => {
    const body = anthropicRequestBody(textRequest("hi", { reasoning: { maxTokens: 2000 }, maxOutputTokens: 8000 }), false)
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 2000 })
    expect(body.max_tokens).toBe(8000)
    const small = anthropicRequestBody(textRequest("hi", { reasoning: { enabled: true, maxTokens: 3000 }, maxOutputTokens: 500 }), false)
    expect(small.max_tokens).toBe(3500)
    expect(anthropicRequestBody(textRequest("hi", { reasoning: { enabled: true } }), false).thinking).toEqual({ type: "enabled", budget_tokens: 4096 })
  })

  test("explicit cache_control goes on its own block, with its ttl", () => {
    const body = anthropicRequestBody(
      {
        model: "claude",
        input: [
          { type: "message", role: "system", content: [{ type: "text", text: "Long rules", cacheControl: { type: "ephemeral", ttl: "1h" } }] },
          {
            type: "message",
            role: "user",
            content: [
              { type: "text", text: "Big document", cacheControl: { type: "ephemeral" } },
              { type: "text", text: "Question" },
            ],
          },
        ],
        tools: [],
      },
      false,
    )
    expect(body.system).toEqual([{ type: "text", text: "Long rules", cache_control: { type: "ephemeral", ttl: "1h" } }])
    expect(body.messages[0].content).toEqual([
      { type: "text", text: "Big document", cache_control: { type: "ephemeral" } },
      { type: "text", text: "Question" },
    ])
  })

  test("top-level cache_control marks the last block of the last message only", () => {
    const body = anthropicRequestBody({ ...conversation, cacheControl: { type: "ephemeral", ttl: "5m" } }, false)
    expect(body.system).toBe("Be brief.\n\nSystem rule.\n\nDev rule.")
    const last = body.messages[body.messages.length - 1]
    expect(last.content[last.content.length - 1]).toEqual({ type: "text", text: "Thanks", cache_control: { type: "ephemeral", ttl: "5m" } })
    const marked = body.messages.flatMap((message) => message.content).filter((block) => "cache_control" in block && block.cache_control !== undefined)
    expect(marked.length).toBe(1)
  })

  test("top-level cache_control with no messages marks the last system block, in array form", () => {
    const body = anthropicRequestBody(
      { model: "claude", instructions: "A", input: [{ type: "message", role: "system", content: [{ type: "text", text: "B" }] }], tools: [], cacheControl: { type: "ephemeral" } },
      false,
    )
    expect(body.messages).toEqual([])
    expect(body.system).toEqual([
      { type: "text", text: "A" },
      { type: "text", text: "B", cache_control: { type: "ephemeral" } },
    ])
  })

  test("an explicit breakpoint on the last block is kept over the top-level one", () => {
    const body = anthropicRequestBody(
      textRequest("x", {
        input: [{ type: "message", role: "user", content: [{ type: "text", text: "x", cacheControl: { type: "ephemeral", ttl: "1h" } }] }],
        cacheControl: { type: "ephemeral" },
      }),
      false,
    )
    expect(body.messages[0].content[0]).toEqual({ type: "text", text: "x", cache_control: { type: "ephemeral", ttl: "1h" } })
  })

  test("arguments that are not a JSON object become an empty tool input", () => {
    const body = anthropicRequestBody(
      textRequest("x", { input: [{ type: "function_call", callId: "t", name: "f", arguments: "not json" }] }),
      false,
    )
    expect(body.messages).toEqual([{ role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }])
  })
})

/** The refusal a request builder throws: a bad request (a 400 to the caller) and its message. */
const refusalOf = (build: () => unknown): { readonly kind: string; readonly message: string } => {
  try {
    build()
  } catch (e) {
    if (e instanceof ProviderError) return { kind: e.kind, message: e.message }
    throw e
  }
  throw new Error("the request was not refused")
}

describe("anthropic structured output", () => {
  const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }

  test("a json_schema format goes as output_config.format with its schema", () => {
    const body = anthropicRequestBody(textRequest("hi", { responseFormat: { type: "json_schema", name: "place", schema, strict: true } }), true)
    expect(body.output_config).toEqual({ format: { type: "json_schema", schema } })
  })

  test("a json_schema format stays beside thinking and tools", () => {
    const body = anthropicRequestBody(
      textRequest("hi", { tools: [weatherTool], reasoning: { effort: "low" }, responseFormat: { type: "json_schema", name: "place", schema } }),
      false,
    )
    expect(body.output_config).toEqual({ format: { type: "json_schema", schema } })
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 1024 })
  })

  test("a text format or none sends no output_config", () => {
    expect("output_config" in anthropicRequestBody(textRequest("hi", { responseFormat: { type: "text" } }), false)).toBe(false)
    expect("output_config" in anthropicRequestBody(textRequest("hi"), false)).toBe(false)
  })

  test("json_object sends no output_config: Anthropic has no JSON mode without a schema", () => {
    expect("output_config" in anthropicRequestBody(textRequest("hi", { responseFormat: { type: "json_object" } }), false)).toBe(false)
  })
})

describe("anthropic tool_choice while thinking", () => {
  const tools = { tools: [weatherTool] }

  test("a required or named tool_choice with reasoning on is refused naming tool_choice", () => {
    for (const toolChoice of ["required", { type: "function", name: "get_weather" }] as const) {
      const refusal = refusalOf(() => anthropicRequestBody(textRequest("hi", { ...tools, toolChoice, reasoning: { effort: "medium" } }), false))
      expect(refusal.kind).toBe("bad_request")
      expect(refusal.message).toStartWith("tool_choice: anthropic takes only auto or none while reasoning (thinking) is on")
    }
  })

  test("auto and none stay with reasoning on; a forced tool stays with reasoning off", () => {
    const thinking = { ...tools, reasoning: { enabled: true } }
    expect(anthropicRequestBody(textRequest("hi", { ...thinking, toolChoice: "auto" }), false).tool_choice).toEqual({ type: "auto" })
    expect(anthropicRequestBody(textRequest("hi", { ...thinking, toolChoice: "none" }), false).tool_choice).toEqual({ type: "none" })
    const off = { ...tools, toolChoice: "required" as const, reasoning: { effort: "none" as const } }
    expect(anthropicRequestBody(textRequest("hi", off), false).tool_choice).toEqual({ type: "any" })
  })

  test("a forced tool_choice without tools is not sent, so thinking stays", () => {
    const body = anthropicRequestBody(textRequest("hi", { toolChoice: "required", reasoning: { enabled: true } }), false)
    expect("tool_choice" in body).toBe(false)
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 4096 })
  })
})
