import { describe, expect, test } from "bun:test"
import { chatRequestBody } from "../../src/providers/openai-chat/request"
import type { NormalizedRequest } from "../../src/providers/types"
import { textRequest, weatherTool } from "./helpers"

describe("openai-chat request mapping", () => {
  test("instructions become the first system message and developer becomes system", () => {
    const body = chatRequestBody(
      {
        model: "gpt",
        instructions: "Be brief.",
        input: [
          { type: "message", role: "developer", content: [{ type: "text", text: "Dev rule." }] },
          { type: "message", role: "user", content: [{ type: "text", text: "Hi" }] },
        ],
        tools: [],
      },
      false,
    )
    expect(body.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "system", content: "Dev rule." },
      { role: "user", content: "Hi" },
    ])
    expect(body.stream).toBe(false)
    expect(body.stream_options).toBeUndefined()
  })

  test("images become image_url parts next to the text", () => {
    const body = chatRequestBody(
      {
        model: "gpt",
        input: [
          {
            type: "message",
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image", url: "https://example.test/cat.png", detail: "low" },
              { type: "image", url: "data:image/png;base64,AAAA" },
            ],
          },
        ],
        tools: [],
      },
      false,
    )
    expect(body.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "https://example.test/cat.png", detail: "low" } },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        ],
      },
    ])
  })

  test("consecutive function calls join one assistant message, outputs become tool messages", () => {
    const body = chatRequestBody(
      {
        model: "gpt",
        input: [
          { type: "message", role: "user", content: [{ type: "text", text: "Weather in Paris and Rome?" }] },
          { type: "message", role: "assistant", content: [{ type: "text", text: "Checking." }] },
          { type: "reasoning", summary: "two cities" },
          { type: "function_call", callId: "c1", name: "get_weather", arguments: '{"city":"Paris"}' },
          { type: "function_call", callId: "c2", name: "get_weather", arguments: '{"city":"Rome"}' },
          { type: "function_call_output", callId: "c1", output: "sunny" },
          { type: "function_call_output", callId: "c2", output: "rain" },
          { type: "function_call", callId: "c3", name: "get_weather", arguments: '{"city":"Oslo"}' },
        ],
        tools: [],
      },
      false,
    )
    expect(body.messages).toEqual([
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "c2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "sunny" },
      { role: "tool", tool_call_id: "c2", content: "rain" },
      { role: "assistant", content: null, tool_calls: [{ id: "c3", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
    ])
  })

  test("tools, tool_choice, parallel_tool_calls and sampling options map to Chat fields", () => {
    const request: NormalizedRequest = textRequest("hi", {
      tools: [{ ...weatherTool, strict: true }],
      toolChoice: { type: "function", name: "get_weather" },
      parallelToolCalls: false,
      temperature: 0.3,
      topP: 0.9,
      topK: 40,
      maxOutputTokens: 256,
      frequencyPenalty: 0.5,
      presencePenalty: -0.5,
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true },
      reasoning: { effort: "high", summary: "auto" },
      user: "user-1",
    })
    const body = chatRequestBody(request, true)
    expect(body).toEqual({
      model: "mock-model",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
      tools: [
        {
          type: "function",
          function: { name: "get_weather", description: "Weather of a city", parameters: weatherTool.parameters, strict: true },
        },
      ],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 256,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object" }, strict: true } },
      reasoning_effort: "high",
      user: "user-1",
    })
    expect("top_k" in body).toBe(false)
  })

  test("string tool choices pass as they are", () => {
    for (const choice of ["auto", "none", "required"] as const) {
      expect(chatRequestBody(textRequest("hi", { tools: [weatherTool], toolChoice: choice }), false).tool_choice).toBe(choice)
    }
  })

  test("tool_choice and parallel_tool_calls are left out without tools", () => {
    const body = chatRequestBody(textRequest("hi", { toolChoice: "auto", parallelToolCalls: true }), false)
    expect("tools" in body || "tool_choice" in body || "parallel_tool_calls" in body).toBe(false)
  })

  test("json_object and reasoning without effort", () => {
    const body = chatRequestBody(textRequest("hi", { responseFormat: { type: "json_object" }, reasoning: { enabled: true } }), false)
    expect(body.response_format).toEqual({ type: "json_object" })
    expect("reasoning_effort" in body).toBe(false)
  })
})
