/**
 * The Chat Completions body → the Responses request (src/formats/chat/request.ts): every message
 * kind, part, tool, format and setting maps to its Responses form; what the gateway cannot carry is
 * a 400 naming the field and the rule, never dropped.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { decodeResponsesRequest, type ResponsesRequest } from "../../src/domain/responses.js"
import { chatFormat } from "../../src/formats/chat/index.js"
import { versionBodyFromChat } from "../../src/formats/chat/preset.js"
import { type ChatOptions, decodeChatBody, decodersForTest } from "../../src/formats/chat/request.js"
import { withPluginsDecoded } from "../support/plugins.js"

const USER = { role: "user", content: "hi" } as const

/** The decoded request and options of a body that must decode. */
/** The body as the gateway decodes it: the Chat decoder, then each plugin entry by its plugin's Schema. */
const decodeChat = (body: unknown) =>
  Either.flatMap(decodeChatBody(body), (d) => Either.map(withPluginsDecoded(Either.right(d.request)), (request) => ({ ...d, request })))

const ok = (body: Record<string, unknown>): { request: ResponsesRequest; options: ChatOptions } => {
  const decoded = decodeChat(body)
  if (Either.isLeft(decoded)) throw new Error(`refused: ${decoded.left.message}`)
  return decoded.right
}

/** The input items of a conversation. */
const inputOf = (...messages: Array<unknown>) => (ok({ messages }).request.input ?? []) as ReadonlyArray<unknown>

/** The 400's message of a body that must be refused. */
const refused = (body: unknown): string => {
  const decoded = decodeChat(body)
  if (Either.isRight(decoded)) throw new Error(`decoded: ${JSON.stringify(decoded.right)}`)
  expect(decoded.left.status).toBe(400)
  return decoded.left.message
}

describe("messages become input items", () => {
  test("system, developer and user messages with string content become messages of the same role", () => {
    expect(inputOf({ role: "system", content: "S" }, { role: "developer", content: "D" }, USER)).toEqual([
      { type: "message", role: "system", content: "S" },
      { type: "message", role: "developer", content: "D" },
      { type: "message", role: "user", content: "hi" },
    ])
  })

  test("text parts become input_text, keeping cache_control", () => {
    const ttl = { type: "ephemeral", ttl: "1h" } as const
    expect(inputOf({ role: "system", content: [{ type: "text", text: "A", cache_control: ttl }, { type: "text", text: "B" }] })).toEqual([
      { type: "message", role: "system", content: [{ type: "input_text", text: "A", cache_control: ttl }, { type: "input_text", text: "B" }] },
    ])
  })

  test("image_url parts become input_image (url, detail); file parts input_file (data, url, id, filename)", () => {
    const content = [
      { type: "image_url", image_url: { url: "https://x/cat.png", detail: "low" } },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      { type: "file", file: { filename: "a.pdf", file_data: "data:application/pdf;base64,AAAA" } },
      { type: "file", file: { file_id: "file_1" } },
      { type: "file", file: { file_url: "https://x/b.pdf" } },
    ]
    expect(inputOf({ role: "user", content })).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_image", image_url: "https://x/cat.png", detail: "low" },
          { type: "input_image", image_url: "data:image/png;base64,AAAA" },
          { type: "input_file", file_data: "data:application/pdf;base64,AAAA", filename: "a.pdf" },
          { type: "input_file", file_id: "file_1" },
          { type: "input_file", file_url: "https://x/b.pdf" },
        ],
      },
    ])
  })

  test("an assistant turn: its text as output_text, its refusal, its tool calls as function_call items", () => {
    expect(
      inputOf({
        role: "assistant",
        content: "Let me look.",
        refusal: "no",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":1}' } },
          { id: "call_2", type: "function", function: { name: "other", arguments: "{}" } },
        ],
      }),
    ).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me look." }, { type: "refusal", refusal: "no" }] },
      { type: "function_call", call_id: "call_1", name: "lookup", arguments: '{"q":1}' },
      { type: "function_call", call_id: "call_2", name: "other", arguments: "{}" },
    ])
  })

  test("an assistant turn of only tool calls (content null) has no message item", () => {
    expect(inputOf({ role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "" } }] })).toEqual([
      { type: "function_call", call_id: "c", name: "f", arguments: "" },
    ])
  })

  test("an assistant turn with content parts (text and refusal), and one with nothing", () => {
    expect(inputOf({ role: "assistant", content: [{ type: "text", text: "A" }, { type: "refusal", refusal: "R" }] })).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "A" }, { type: "refusal", refusal: "R" }] },
    ])
    expect(inputOf({ role: "assistant", content: null })).toEqual([{ type: "message", role: "assistant", content: [] }])
  })

  test("an assistant turn's reasoning becomes a reasoning item before it; reasoning_details carry text, summary and the encrypted blob", () => {
    expect(inputOf({ role: "assistant", content: "A", reasoning: "Because." })[0]).toEqual({
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Because." }],
    })
    expect(
      inputOf({
        role: "assistant",
        content: "A",
        reasoning: "Because.",
        reasoning_details: [
          { type: "reasoning.text", text: "Step 1", index: 0 },
          { type: "reasoning.summary", summary: "In short" },
          { type: "reasoning.encrypted", data: "opaque" },
        ],
      })[0],
    ).toEqual({
      type: "reasoning",
      summary: [
        { type: "summary_text", text: "Step 1" },
        { type: "summary_text", text: "In short" },
      ],
      encrypted_content: "opaque",
    })
  })

  test("annotations given back with an assistant turn (the answer's own citations) are accepted", () => {
    expect(inputOf({ role: "assistant", content: "A", annotations: [{ type: "url_citation" }] })).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "A" }] },
    ])
  })

  test("tool messages become function_call_output items (string or text parts)", () => {
    expect(
      inputOf({ role: "tool", tool_call_id: "call_1", content: "42" }, { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "4" }] }),
    ).toEqual([
      { type: "function_call_output", call_id: "call_1", output: "42" },
      { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "4" }] },
    ])
  })
})

describe("messages the gateway cannot carry are refused naming the place", () => {
  test("a role that does not exist, and a message without a role", () => {
    expect(refused({ messages: [{ role: "bot", content: "x" }] })).toBe(
      "Invalid request: messages[0].role: one of system, developer, user, assistant, tool, function",
    )
    expect(refused({ messages: [{ content: "x" }] })).toBe("Invalid request: messages[0].role: is missing")
  })

  test("the deprecated function role and an assistant function_call name what to send instead", () => {
    expect(refused({ messages: [{ role: "function", name: "f", content: "x" }] })).toContain('messages[0].role: "function" messages are deprecated')
    expect(refused({ messages: [{ role: "assistant", content: null, function_call: { name: "f", arguments: "{}" } }] })).toContain(
      "messages[0].function_call: is deprecated",
    )
  })

  test("a message name, and audio in an assistant turn, are not carried", () => {
    expect(refused({ messages: [{ role: "user", content: "x", name: "alice" }] })).toStartWith("Invalid request: messages[0].name: is not supported")
    expect(refused({ messages: [{ role: "assistant", content: null, audio: { id: "a" } }] })).toStartWith(
      "Invalid request: messages[0].audio: is not supported",
    )
  })

  test("input_audio, video and other parts; an image in a system message; a text part in a tool message is fine", () => {
    expect(refused({ messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "AA", format: "wav" } }] }] })).toBe(
      "Invalid request: messages[0].content[0]: audio input is not supported by this gateway (no upstream request it sends carries audio)",
    )
    expect(refused({ messages: [{ role: "user", content: [{ type: "video_url", video_url: { url: "x" } }] }] })).toBe(
      'Invalid request: messages[0].content[0]: content part type "video_url" is not supported here',
    )
    expect(refused({ messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "x" } }] }] })).toBe(
      'Invalid request: messages[0].content[0]: content part type "image_url" is not supported here',
    )
    expect(refused({ messages: [{ role: "tool", tool_call_id: "c", content: [{ type: "refusal", refusal: "r" }] }] })).toContain(
      "messages[0].content[0]",
    )
  })

  test("malformed parts and contents name the field", () => {
    expect(refused({ messages: [{ role: "user", content: 5 }] })).toBe("Invalid request: messages[0].content: a string or an array of content parts")
    expect(refused({ messages: [{ role: "user", content: [5] }] })).toBe("Invalid request: messages[0].content[0]: a content part object with a type")
    expect(refused({ messages: [{ role: "user", content: [{ type: "image_url" }] }] })).toBe("Invalid request: messages[0].content[0].image_url: is missing")
    expect(refused({ messages: [{ role: "user", content: [{ type: "file", file: {} }] }] })).toBe(
      "Invalid request: messages[0].content[0].file: a file needs file_data, file_id or file_url",
    )
    expect(refused({ messages: [{ role: "tool", content: "x" }] })).toBe("Invalid request: messages[0].tool_call_id: is missing")
    expect(refused({ messages: [{ role: "assistant", tool_calls: [{ id: "c", type: "custom", function: { name: "f", arguments: "" } }] }] })).toBe(
      "Invalid request: messages[0].tool_calls[0].type: one of function",
    )
  })

  test("reasoning details that cannot go back", () => {
    expect(refused({ messages: [{ role: "assistant", content: "a", reasoning_details: [{ type: "reasoning.server_tool_call" }] }] })).toBe(
      'Invalid request: messages[0].reasoning_details[0]: detail type "reasoning.server_tool_call" cannot be sent back',
    )
    const two = [
      { type: "reasoning.encrypted", data: "a" },
      { type: "reasoning.encrypted", data: "b" },
    ]
    expect(refused({ messages: [{ role: "assistant", content: "a", reasoning_details: two }] })).toContain("at most one reasoning.encrypted")
  })

  test("messages is required and not empty; the body is an object", () => {
    expect(refused({ model: "m" })).toBe("Invalid request: messages: is missing")
    expect(refused({ messages: [] })).toBe("Invalid request: messages: at least one message is required")
    expect(refused({ messages: "hi" })).toBe("Invalid request: messages: an array of message objects")
    expect(refused([USER])).toBe("Invalid request: the body must be a JSON object")
    expect(refused("hi")).toBe("Invalid request: the body must be a JSON object")
  })
})

describe("tools, tool choice and response format take their Responses forms", () => {
  test("function tools flatten; other tool kinds pass as they are (the normalizer judges them)", () => {
    const { request } = ok({
      messages: [USER],
      tools: [
        { type: "function", function: { name: "f", description: "F", parameters: { type: "object" }, strict: true } },
        { type: "function", function: { name: "g" } },
        { type: "openrouter:web_search", parameters: { max_results: 2 } },
      ],
    })
    expect(request.tools).toEqual([
      { type: "function", name: "f", description: "F", parameters: { type: "object" }, strict: true },
      { type: "function", name: "g" },
      { type: "openrouter:web_search", parameters: { max_results: 2 } },
    ])
  })

  test("tool_choice: the three strings as they are, a named function as {type, name}", () => {
    for (const choice of ["auto", "none", "required"] as const) expect(ok({ messages: [USER], tool_choice: choice }).request.tool_choice).toBe(choice)
    expect(ok({ messages: [USER], tool_choice: { type: "function", function: { name: "f" } } }).request.tool_choice).toEqual({
      type: "function",
      name: "f",
    })
    expect(refused({ messages: [USER], tool_choice: "any" })).toBe(
      'Invalid request: tool_choice: "auto", "none", "required", or {type: "function", function: {name}}',
    )
  })

  test("response_format becomes text.format; verbosity text.verbosity", () => {
    expect(ok({ messages: [USER], response_format: { type: "json_object" } }).request.text).toEqual({ format: { type: "json_object" } })
    expect(ok({ messages: [USER], response_format: { type: "text" }, verbosity: "low" }).request.text).toEqual({
      format: { type: "text" },
      verbosity: "low",
    })
    const schema = { type: "object", properties: { a: { type: "string" } } }
    expect(
      ok({ messages: [USER], response_format: { type: "json_schema", json_schema: { name: "s", schema, strict: true, description: "D" } } }).request
        .text,
    ).toEqual({ format: { type: "json_schema", name: "s", schema, strict: true, description: "D" } })
    expect(refused({ messages: [USER], response_format: { type: "grammar", grammar: "x" } })).toStartWith("Invalid request: response_format: one of")
    expect(refused({ messages: [USER], response_format: { type: "json_schema", json_schema: { name: "s" } } })).toStartWith(
      "Invalid request: response_format: one of",
    )
  })
})

describe("settings", () => {
  test("max_completion_tokens or max_tokens becomes max_output_tokens; both must agree", () => {
    expect(ok({ messages: [USER], max_tokens: 50 }).request.max_output_tokens).toBe(50)
    expect(ok({ messages: [USER], max_completion_tokens: 60 }).request.max_output_tokens).toBe(60)
    expect(ok({ messages: [USER], max_tokens: 70, max_completion_tokens: 70 }).request.max_output_tokens).toBe(70)
    expect(refused({ messages: [USER], max_tokens: 70, max_completion_tokens: 80 })).toBe(
      "Invalid request: max_tokens: contradicts max_completion_tokens; send one of them (max_tokens is deprecated)",
    )
    expect(refused({ messages: [USER], max_tokens: 0 })).toBe("Invalid request: max_tokens: an integer of at least 1")
  })

  test("reasoning_effort becomes reasoning.effort, beside reasoning's other fields; a contradiction is refused", () => {
    expect(ok({ messages: [USER], reasoning_effort: "high" }).request.reasoning).toEqual({ effort: "high" })
    expect(ok({ messages: [USER], reasoning: { max_tokens: 100 }, reasoning_effort: "low" }).request.reasoning).toEqual({ max_tokens: 100, effort: "low" })
    expect(ok({ messages: [USER], reasoning: { effort: "low", summary: "auto" } }).request.reasoning).toEqual({ effort: "low", summary: "auto" })
    expect(refused({ messages: [USER], reasoning: { effort: "low" }, reasoning_effort: "high" })).toBe(
      "Invalid request: reasoning_effort: contradicts reasoning.effort; send one of them",
    )
    expect(refused({ messages: [USER], reasoning_effort: "max" })).toBe(
      "Invalid request: reasoning_effort: one of none, minimal, low, medium, high, xhigh, or null",
    )
  })

  test("the fields both requests share are copied as they are", () => {
    const shared = {
      model: "demo/echo",
      models: ["demo/free"],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      frequency_penalty: 0.1,
      presence_penalty: -0.1,
      max_tool_calls: 3,
      parallel_tool_calls: false,
      session_id: "s-1",
      user: "u-1",
      metadata: { team: "a" },
      debug: { echo_upstream_body: true },
      cache_control: { type: "ephemeral" },
      prompt_cache_key: "k",
      safety_identifier: "safe",
      service_tier: "flex",
      image_config: { aspect_ratio: "1:1" },
      trace: { trace_id: "t" },
      preset: "my-preset",
      route: "fallback",
      stop_server_tools_when: [{ type: "x" }],
      prompt_cache_options: { a: 1 },
      modalities: ["text"],
    }
    const { request } = ok({ messages: [USER], ...shared })
    expect(request).toMatchObject(shared)
  })

  test("provider preferences and plugins are decoded by the Responses schemas (defaults filled, ids checked)", () => {
    const { request } = ok({ messages: [USER], provider: { order: ["fake"], max_price: { prompt: "1.5" } }, plugins: [{ id: "web", enabled: false }] })
    expect(request.provider).toMatchObject({ order: ["fake"], allow_fallbacks: true, max_price: { prompt: 1.5 } })
    expect(request.plugins).toEqual([{ id: "web", enabled: false }])
    expect(refused({ messages: [USER], plugins: [{ id: "nope" }] })).toStartWith("Invalid request: plugins[0].id: one of auto-router")
  })

  test("stream defaults to false; stream_options.include_usage false is kept for the encoder, otherwise true", () => {
    expect(ok({ messages: [USER] })).toMatchObject({ request: { stream: false, store: false }, options: { includeUsage: true } })
    expect(ok({ messages: [USER], stream: true, stream_options: { include_usage: false } })).toMatchObject({
      request: { stream: true },
      options: { includeUsage: false },
    })
    expect(ok({ messages: [USER], stream: true, stream_options: { include_usage: true } }).options.includeUsage).toBe(true)
    expect(ok({ messages: [USER], stream: null, stream_options: null }).options.includeUsage).toBe(true)
  })

  test("the contract's limits hold as on /v1/responses", () => {
    expect(refused({ messages: [USER], temperature: 3 })).toBe("Invalid request: temperature: a number from 0 to 2")
    expect(refused({ messages: [USER], top_p: 2 })).toBe("Invalid request: top_p: a number from 0 to 1")
    expect(refused({ messages: [USER], user: "u".repeat(257) })).toBe("Invalid request: user: at most 256 characters")
    expect(refused({ messages: [USER], session_id: "s".repeat(257) })).toBe("Invalid request: session_id: at most 256 characters")
    const pairs = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"]))
    expect(refused({ messages: [USER], metadata: pairs })).toBe("Invalid request: metadata: at most 16 pairs")
    expect(refused({ messages: [USER], modalities: ["audio"] })).toBe("Invalid request: modalities[0]: one of text, image")
    expect(refused({ messages: [USER], service_tier: "gold" })).toStartWith("Invalid request: service_tier: one of auto")
  })

  test("the result is a valid Responses request: its own decoder gives it back unchanged", () => {
    const { request } = ok({
      model: "demo/echo",
      messages: [
        { role: "system", content: "S" },
        { role: "user", content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url: "https://x/y.png" } }] },
        { role: "assistant", content: null, reasoning: "r", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "c", content: "out" },
      ],
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: "auto",
      response_format: { type: "json_object" },
      max_tokens: 9,
      reasoning_effort: "low",
      provider: { order: ["fake"] },
      plugins: [{ id: "fusion" }],
    })
    const again = decodeResponsesRequest(request)
    expect(Either.isRight(again) && again.right).toEqual(request)
  })
})

describe("fields the gateway does not carry are refused unless they ask for nothing", () => {
  const cases: ReadonlyArray<readonly [string, unknown, unknown, string]> = [
    ["n", 2, 1, "only 1 is supported (the gateway answers one choice)"],
    ["logprobs", true, false, "only false is supported (the gateway does not return log probabilities)"],
    ["top_logprobs", 3, 0, "only 0 is supported (the gateway does not return log probabilities)"],
    ["stop", ["\n"], [], "is not supported by this gateway"],
    ["stop", "END", null, "is not supported by this gateway"],
    ["seed", 42, null, "is not supported by this gateway"],
    ["logit_bias", { "50256": -100 }, {}, "is not supported by this gateway"],
    ["min_p", 0.1, null, "is not supported by this gateway"],
    ["top_a", 0.1, null, "is not supported by this gateway"],
    ["repetition_penalty", 1.1, null, "is not supported by this gateway"],
    ["prediction", { type: "content", content: "x" }, null, "is not supported by this gateway"],
    ["audio", { voice: "alloy", format: "wav" }, null, "is not supported: the gateway answers text only"],
    ["web_search_options", {}, null, 'is not supported; use the plugin {"id": "web"}'],
    ["functions", [{ name: "f" }], null, "is deprecated and not supported; send `tools`"],
    ["function_call", "auto", null, "is deprecated and not supported; send `tool_choice`"],
  ]
  for (const [field, bad, fine, rule] of cases) {
    test(`${field}: ${JSON.stringify(bad)} is a 400 naming it; ${JSON.stringify(fine)} passes`, () => {
      expect(refused({ messages: [USER], [field]: bad })).toStartWith(`Invalid request: ${field}: ${rule}`)
      ok({ messages: [USER], [field]: fine })
    })
  }

  test("store: true is refused (the service is stateless); false passes", () => {
    expect(refused({ messages: [USER], store: true })).toBe("Invalid request: store: only false is allowed (the service is stateless)")
    expect(ok({ messages: [USER], store: false }).request.store).toBe(false)
  })
})

describe("chatFormat", () => {
  const usageChunkSent = (request: ResponsesRequest, formatState: unknown) => {
    const enc = chatFormat.encoder(request, { stream: true, model: "m", formatState })
    enc.start()
    return enc.finish().includes('"choices":[],"usage"')
  }

  test("decode gives the Responses request; include_usage false is the format's state, which reaches the encoder", () => {
    const body = { messages: [USER], stream: true, stream_options: { include_usage: false } }
    const decoded = chatFormat.decode(body)
    if (Either.isLeft(decoded)) throw new Error(decoded.left.message)
    const state = chatFormat.stateOf?.(body)
    expect(state).toEqual({ includeUsage: false })
    expect(usageChunkSent(decoded.right, state)).toBe(false)
    // The state is the request's, not the request object's: a replaced request keeps it.
    expect(usageChunkSent({ ...decoded.right, temperature: 1 }, state)).toBe(false)
    const plain = { messages: [USER], stream: true }
    const plainDecoded = chatFormat.decode(plain)
    if (Either.isLeft(plainDecoded)) throw new Error(plainDecoded.left.message)
    expect(chatFormat.stateOf?.(plain)).toBeUndefined()
    expect(usageChunkSent(plainDecoded.right, undefined)).toBe(true)
    expect(chatFormat.stateOf?.({ messages: [USER], stream: true, stream_options: { include_usage: true } })).toBeUndefined()
  })

  test("errors are the contract's envelope", () => {
    const decoded = chatFormat.decode({ messages: [USER], n: 2 })
    if (Either.isRight(decoded)) throw new Error("decoded")
    expect(JSON.parse(chatFormat.errorBody(decoded.left))).toEqual({
      error: { code: 400, message: "Invalid request: n: only 1 is supported (the gateway answers one choice)" },
      user_id: null,
    })
  })
})

describe("a preset version from a chat body", () => {
  test("system and developer messages become system_prompt; the conversation is not stored; stream is per request", () => {
    const body = versionBodyFromChat({
      model: "demo/echo",
      temperature: 0.3,
      stream: true,
      messages: [
        { role: "system", content: "One." },
        { role: "developer", content: [{ type: "text", text: "Two" }, { type: "text", text: "." }] },
        USER,
      ],
    })
    if (Either.isLeft(body)) throw new Error(body.left.message)
    expect(body.right.systemPrompt).toBe("One.\n\nTwo.")
    expect(body.right.config).toEqual({ model: "demo/echo", temperature: 0.3 })
  })

  test("no messages at all is a preset without a system prompt; a bad field is a 400", () => {
    const body = versionBodyFromChat({ model: "demo/echo", messages: [] })
    expect(Either.isRight(body) && body.right.systemPrompt).toBeNull()
    const bad = versionBodyFromChat({ model: "demo/echo", messages: [], n: 4 })
    expect(Either.isLeft(bad) && bad.left.message).toBe("Invalid request: n: only 1 is supported (the gateway answers one choice)")
  })
})

describe("the plain decoder of the commonest body", () => {
  const { schema, simple } = decodersForTest
  const taken = [
    { model: "demo/echo", messages: [USER] },
    { messages: [{ role: "system", content: "be brief" }, USER, { role: "assistant", content: "hello" }, { role: "developer", content: "" }] },
    { model: "m", messages: [USER], stream: true, temperature: 0.5, top_p: 1, max_tokens: 16, max_completion_tokens: 16 },
    { model: "m", messages: [], stream: false, temperature: 0, top_p: 0 },
  ]
  test("gives what the Schema gives, for bodies it takes", () => {
    for (const body of taken) {
      const plain = simple(body)
      expect(plain).toBeDefined()
      const viaSchema = schema(body)
      if (Either.isLeft(viaSchema)) throw new Error(viaSchema.left.message)
      expect(plain).toEqual(viaSchema.right)
      expect(JSON.stringify(plain)).toBe(JSON.stringify(viaSchema.right))
    }
  })
  test("leaves every other body to the Schema (so refusals keep their messages)", () => {
    const left = [
      { model: 1, messages: [USER] },
      { model: "m", messages: [USER], temperature: 3 },
      { model: "m", messages: [USER], top_p: -0.1 },
      { model: "m", messages: [USER], max_tokens: 0 },
      { model: "m", messages: [USER], max_tokens: 1.5 },
      { model: "m", messages: [USER], stream: null },
      { model: "m", messages: [USER], n: 2 },
      { model: "m", messages: [{ role: "tool", content: "x" }] },
      { model: "m", messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] },
      { model: "m", messages: [{ role: "user", content: "x", name: "bob" }] },
      { model: "m", messages: [{ role: "user" }] },
      { model: "m", messages: "hi" },
      [USER],
      null,
    ]
    for (const body of left) expect(simple(body)).toBeUndefined()
    expect(refused({ model: "m", messages: [USER], temperature: 3 })).toContain("temperature")
    expect(refused({ model: "m", messages: [{ role: "user", content: "x", name: "bob" }] })).toContain("name")
  })
})
