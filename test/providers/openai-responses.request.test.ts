import { describe, expect, test } from "bun:test"
import { responsesRequestBody } from "../../src/providers/openai-responses/request"
import { textRequest, weatherTool } from "./helpers"

describe("openai-responses request mapping", () => {
  test("input items keep the Responses form, assistant text as output_text", () => {
    const body = responsesRequestBody(
      {
        model: "gpt",
        instructions: "Be brief.",
        input: [
          { type: "message", role: "developer", content: [{ type: "text", text: "Dev rule." }] },
          {
            type: "message",
            role: "user",
            content: [
              { type: "text", text: "Look" },
              { type: "image", url: "https://example.test/a.png", detail: "high" },
              { type: "file", filename: "a.pdf", fileData: "data:application/pdf;base64,AAAA" },
            ],
          },
          { type: "message", role: "assistant", content: [{ type: "text", text: "Calling." }] },
          { type: "reasoning", summary: "thought", encryptedContent: "enc" },
          { type: "reasoning", summary: "lost without encrypted content" },
          { type: "reasoning", summary: "Claude's", encryptedContent: "sig", format: "anthropic-claude-v1" },
          { type: "function_call", callId: "c1", name: "get_weather", arguments: "{}" },
          { type: "function_call_output", callId: "c1", output: "sunny" },
        ],
        tools: [],
      },
      false,
    )
    expect(body.instructions).toBe("Be brief.")
    expect(body.input).toEqual([
      { type: "message", role: "developer", content: [{ type: "input_text", text: "Dev rule." }] },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "Look" },
          { type: "input_image", image_url: "https://example.test/a.png", detail: "high" },
          { type: "input_file", filename: "a.pdf", file_data: "data:application/pdf;base64,AAAA" },
        ],
      },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Calling.", annotations: [] }] },
      { type: "reasoning", summary: [{ type: "summary_text", text: "thought" }], encrypted_content: "enc" },
      { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "sunny" },
    ])
    expect(body.store).toBe(false)
  })

  test("tools, tool choice, text format, reasoning and limits map to Responses fields", () => {
    const body = responsesRequestBody(
      textRequest("hi", {
        tools: [weatherTool],
        toolChoice: { type: "function", name: "get_weather" },
        parallelToolCalls: true,
        temperature: 0.2,
        topP: 0.8,
        maxOutputTokens: 100,
        frequencyPenalty: 1,
        responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: false },
        reasoning: { effort: "low", summary: "detailed" },
        user: "u",
      }),
      true,
    )
    expect(body).toEqual({
      model: "mock-model",
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }],
      tools: [{ type: "function", name: "get_weather", description: "Weather of a city", parameters: weatherTool.parameters }],
      tool_choice: { type: "function", name: "get_weather" },
      parallel_tool_calls: true,
      temperature: 0.2,
      top_p: 0.8,
      max_output_tokens: 100,
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: false } },
      reasoning: { effort: "low", summary: "detailed" },
      user: "u",
      store: false,
      stream: true,
    })
  })

  test("a tool without parameters gets an empty object schema", () => {
    const body = responsesRequestBody(textRequest("hi", { tools: [{ type: "function", name: "ping" }] }), false)
    expect(body.tools).toEqual([{ type: "function", name: "ping", parameters: { type: "object", properties: {} } }])
  })
})
