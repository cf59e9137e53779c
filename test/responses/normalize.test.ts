import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { toNormalizedRequest } from "../../src/pipeline/normalize.js"
import type { NormalizedRequest } from "../../src/providers/types.js"

const normalize = (body: Record<string, unknown>, upstreamModel = "upstream-model"): NormalizedRequest => {
  const req = Either.getOrThrow(decodeResponsesRequest(body))
  const r = toNormalizedRequest(req, upstreamModel)
  if (Either.isLeft(r)) throw new Error(`expected a normalized request, got: ${r.left.message}`)
  return r.right
}

const refusal = (body: Record<string, unknown>): string => {
  const req = Either.getOrThrow(decodeResponsesRequest(body))
  const r = toNormalizedRequest(req, "m")
  if (Either.isRight(r)) throw new Error("expected a refusal")
  expect(r.left.status).toBe(400)
  return r.left.message
}

describe("Normalizing input", () => {
  test("a string input is one user message; the upstream model replaces the requested one", () => {
    expect(normalize({ model: "alias", input: "Hi" }, "vendor-model-v2")).toEqual({
      model: "vendor-model-v2",
      input: [{ type: "message", role: "user", content: [{ type: "text", text: "Hi" }] }],
      tools: [],
    })
  })

  test("no input is an empty input list", () => {
    expect(normalize({}).input).toEqual([])
  })

  test("system and developer messages stay messages; string content becomes one text part; null content none", () => {
    expect(
      normalize({
        input: [
          { role: "system", content: "sys" },
          { role: "developer", content: "dev" },
          { type: "message", role: "assistant", content: null },
        ],
      }).input,
    ).toEqual([
      { type: "message", role: "system", content: [{ type: "text", text: "sys" }] },
      { type: "message", role: "developer", content: [{ type: "text", text: "dev" }] },
      { type: "message", role: "assistant", content: [] },
    ])
  })

  test("parts map to content parts and keep their cache_control", () => {
    const cc = { type: "ephemeral", ttl: "1h" }
    const { input } = normalize({
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "long context", cache_control: cc },
            { type: "input_image", image_url: "https://x/i.png", detail: "high", cache_control: { type: "ephemeral" } },
            { type: "input_image", image_url: "data:image/png;base64,AA" },
            { type: "input_file", file_data: "data:application/pdf;base64,AA", filename: "a.pdf", cache_control: cc },
            { type: "input_file", file_url: "https://x/b.pdf" },
            { type: "input_file", file_id: "file_1", filename: null },
          ],
        },
        { role: "assistant", content: [{ type: "output_text", text: "before", annotations: [] }, { type: "refusal", refusal: "cannot" }] },
      ],
    })
    expect(input).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "text", text: "long context", cacheControl: { type: "ephemeral", ttl: "1h" } },
          { type: "image", url: "https://x/i.png", detail: "high", cacheControl: { type: "ephemeral" } },
          { type: "image", url: "data:image/png;base64,AA" },
          { type: "file", filename: "a.pdf", fileData: "data:application/pdf;base64,AA", cacheControl: { type: "ephemeral", ttl: "1h" } },
          { type: "file", fileUrl: "https://x/b.pdf" },
          { type: "file", fileId: "file_1" },
        ],
      },
      { type: "message", role: "assistant", content: [{ type: "text", text: "before" }, { type: "text", text: "cannot" }] },
    ])
  })

  test("function calls, their outputs and reasoning items map", () => {
    const { input } = normalize({
      input: [
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "a" }, { type: "summary_text", text: "b" }], encrypted_content: "enc" },
        { type: "reasoning", summary: [] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "get", arguments: '{"a":1}', status: "completed" },
        { type: "function_call_output", call_id: "call_1", output: "result" },
        { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "part 1, " }, { type: "input_text", text: "part 2" }] },
      ],
    })
    expect(input).toEqual([
      { type: "reasoning", summary: "a\n\nb", encryptedContent: "enc" },
      { type: "reasoning", summary: "" },
      { type: "function_call", callId: "call_1", name: "get", arguments: '{"a":1}' },
      { type: "function_call_output", callId: "call_1", output: "result" },
      { type: "function_call_output", callId: "call_2", output: "part 1, part 2" },
    ])
  })

  test("item_reference is refused, naming the kind and the index (the service is stateless)", () => {
    const message = refusal({ input: [{ role: "user", content: "x" }, { type: "item_reference", id: "msg_1" }] })
    expect(message).toContain('input[1]: item kind "item_reference" cannot be sent to this provider')
  })

  test("other item kinds are refused, naming the kind and the index", () => {
    const input = [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
      { role: "user", content: "c" },
      { type: "web_search_call", id: "ws_1", status: "completed" },
    ]
    expect(refusal({ input })).toContain('input[3]: item kind "web_search_call" cannot be sent to this provider')
  })

  test("an image by file_id only, and a non-text function output part, are refused at their path", () => {
    expect(refusal({ input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] })).toContain("input[0].content[0]: an input_image by file_id")
    expect(
      refusal({ input: [{ type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: "https://x" }] }] }),
    ).toContain("input[0].output[0]: only text parts")
  })
})

describe("Normalizing tools and choices", () => {
  test("function tools map; nulls become absent", () => {
    expect(
      normalize({
        tools: [
          { type: "function", name: "a", description: "does a", parameters: { type: "object", properties: {} }, strict: true },
          { type: "function", name: "b", description: null, parameters: null, strict: null },
        ],
        tool_choice: { type: "function", name: "a" },
        parallel_tool_calls: false,
      }),
    ).toMatchObject({
      tools: [
        { type: "function", name: "a", description: "does a", parameters: { type: "object", properties: {} }, strict: true },
        { type: "function", name: "b" },
      ],
      toolChoice: { type: "function", name: "a" },
      parallelToolCalls: false,
    })
    expect(normalize({ tools: [{ type: "function", name: "b", description: null }] }).tools[0]).toEqual({ type: "function", name: "b" })
  })

  test("string tool choices pass through", () => {
    const tools = [{ type: "function", name: "f" }]
    for (const choice of ["auto", "none", "required"] as const) expect(normalize({ tools, tool_choice: choice }).toolChoice).toBe(choice)
    expect(normalize({ tool_choice: "none" }).toolChoice).toBe("none")
  })

  test("a choice the request's tools cannot meet is refused: a function it does not declare, required with none", () => {
    expect(refusal({ tools: [{ type: "function", name: "f" }], tool_choice: { type: "function", name: "g" } })).toContain(
      'tool_choice.name: "g" is not the name of a function tool of this request (tools[].name)',
    )
    expect(refusal({ tool_choice: { type: "function", name: "g" } })).toContain('tool_choice.name: "g"')
    expect(refusal({ tool_choice: "required" })).toContain('tool_choice: "required" needs at least one function tool in tools')
  })

  test("parameters that are no object schema are refused naming the tool", () => {
    const tool = (parameters: Record<string, unknown>) => ({ tools: [{ type: "function", name: "f" }, { type: "function", name: "g", parameters }] })
    expect(refusal(tool({ type: "string" }))).toContain('tools[1].parameters: must be an object schema (type "object")')
    expect(refusal(tool({ type: "object", properties: 5 }))).toContain("tools[1].parameters: properties must be an object")
    expect(refusal(tool({ type: "object", required: 7 }))).toContain("tools[1].parameters: required must be an array of property names")
    expect(normalize(tool({ type: ["object", "null"], properties: { a: { type: "string" } }, required: ["a"] })).tools).toHaveLength(2)
    expect(normalize(tool({ properties: {} })).tools).toHaveLength(2)
  })

  test("a non-function tool is refused naming its type and index", () => {
    expect(refusal({ tools: [{ type: "function", name: "f" }, { type: "web_search_preview" }] })).toContain(
      'tools[1]: tool type "web_search_preview" cannot be sent to this provider',
    )
  })

  test("a tool choice of another kind is refused naming its type", () => {
    expect(refusal({ tool_choice: { type: "allowed_tools", mode: "auto", tools: [] } })).toContain('tool_choice: type "allowed_tools"')
  })
})

describe("Normalizing settings", () => {
  test("sampling parameters, instructions, user, metadata and cache_control map", () => {
    expect(
      normalize({
        instructions: "be brief",
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        max_output_tokens: 256,
        frequency_penalty: 0.1,
        presence_penalty: -0.1,
        user: "end-user-1",
        metadata: { trace: "1" },
        cache_control: { type: "ephemeral", ttl: "5m" },
      }),
    ).toEqual({
      model: "upstream-model",
      input: [],
      tools: [],
      instructions: "be brief",
      temperature: 0.2,
      topP: 0.9,
      topK: 40,
      maxOutputTokens: 256,
      frequencyPenalty: 0.1,
      presencePenalty: -0.1,
      user: "end-user-1",
      metadata: { trace: "1" },
      cacheControl: { type: "ephemeral", ttl: "5m" },
    })
  })

  test("the route's output bound replaces max_output_tokens, with or without one in the request", () => {
    const bounded = (body: Record<string, unknown>, bound: number) => {
      const r = toNormalizedRequest(Either.getOrThrow(decodeResponsesRequest(body)), "m", bound)
      if (Either.isLeft(r)) throw new Error(r.left.message)
      return r.right.maxOutputTokens
    }
    expect(bounded({ input: "Hi", max_output_tokens: 256 }, 100)).toBe(100)
    expect(bounded({ input: "Hi" }, 4096)).toBe(4096)
    expect(bounded({ input: "Hi", max_output_tokens: null }, 64)).toBe(64)
  })

  test("null settings are absent keys, not nulls or undefined", () => {
    const n = normalize({
      instructions: null,
      temperature: null,
      top_p: null,
      top_k: null,
      max_output_tokens: null,
      frequency_penalty: null,
      presence_penalty: null,
      parallel_tool_calls: null,
      metadata: null,
      reasoning: null,
    })
    expect(Object.keys(n).sort()).toEqual(["input", "model", "tools"])
  })

  test("text.format maps to responseFormat", () => {
    expect(normalize({ text: { format: { type: "text" } } }).responseFormat).toEqual({ type: "text" })
    expect(normalize({ text: { format: { type: "json_object" } } }).responseFormat).toEqual({ type: "json_object" })
    expect(
      normalize({ text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } } }).responseFormat,
    ).toEqual({ type: "json_schema", name: "out", schema: { type: "object" }, strict: true })
    expect(normalize({ text: { verbosity: "low" } }).responseFormat).toBeUndefined()
  })

  test("reasoning maps (max_tokens → maxTokens); an all-null reasoning object is absent", () => {
    expect(normalize({ reasoning: { effort: "high", summary: "auto", enabled: true, max_tokens: 2048 } }).reasoning).toEqual({
      effort: "high",
      summary: "auto",
      enabled: true,
      maxTokens: 2048,
    })
    expect("reasoning" in normalize({ reasoning: { effort: null, summary: null } })).toBe(false)
  })
})
