import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { decodeResponsesRequest, type ResponsesRequest } from "../../../src/domain/responses.js"
import { toNormalizedRequest } from "../../../src/pipeline/normalize.js"
import {
  decodeCountTokensRequest,
  decodeMessagesPreset,
  decodeMessagesRequest,
} from "../../../src/formats/messages/request.js"
import { withPluginsDecoded } from "../../support/plugins.js"

const BASE = { model: "acme/model-1", max_tokens: 256, messages: [{ role: "user", content: "Hi" }] }

/** The body as the gateway decodes it: the Messages decoder, then each plugin entry by its plugin's Schema. */
const decodeMessages = (body: unknown) => withPluginsDecoded(decodeMessagesRequest(body))

const ok = (body: unknown): ResponsesRequest => {
  const out = decodeMessages(body)
  if (Either.isLeft(out)) throw new Error(`refused: ${out.left.message}`)
  return out.right
}

const refused = (body: unknown): string => {
  const out = decodeMessages(body)
  if (Either.isRight(out)) throw new Error(`accepted: ${JSON.stringify(out.right)}`)
  expect(out.left.status).toBe(400)
  return out.left.message
}

/** The translation is a valid Responses request: it decodes again to itself, and normalizes. */
const expectValidResponses = (request: ResponsesRequest) => {
  const again = decodeResponsesRequest(JSON.parse(JSON.stringify(request)))
  expect(Either.isRight(again)).toBe(true)
  expect(Either.isRight(toNormalizedRequest(request, "upstream-model"))).toBe(true)
}

describe("POST /v1/messages decode: the basics", () => {
  test("model, max_tokens and a string message become model, max_output_tokens and a user message", () => {
    const request = ok(BASE)
    expect(request).toEqual({
      stream: false,
      store: false,
      model: "acme/model-1",
      input: [{ type: "message", role: "user", content: "Hi" }],
      max_output_tokens: 256,
    })
    expectValidResponses(request)
  })

  test("max_tokens is required, as by Anthropic", () => {
    expect(refused({ model: "m", messages: BASE.messages })).toBe(
      "Invalid request: max_tokens: is missing (an integer of at least 1, as Anthropic requires)",
    )
  })

  test("max_tokens of 0 is refused with the rule", () => {
    expect(refused({ ...BASE, max_tokens: 0 })).toBe("Invalid request: max_tokens: an integer of at least 1")
  })

  test("messages is required and not empty", () => {
    expect(refused({ model: "m", max_tokens: 5 })).toBe("Invalid request: messages: is missing")
    expect(refused({ ...BASE, messages: [] })).toBe("Invalid request: messages: at least one message")
  })

  test("a body that is not an object is refused plainly", () => {
    expect(refused([1, 2])).toBe("Invalid request: the body must be a JSON object")
  })

  test("a role other than user, assistant or system is refused naming the message", () => {
    expect(refused({ ...BASE, messages: [{ role: "tool", content: "x" }] })).toBe(
      "Invalid request: messages[0].role: one of user, assistant, system",
    )
  })

  test("stream, temperature, top_p and top_k carry over", () => {
    const request = ok({ ...BASE, stream: true, temperature: 0.5, top_p: 0.9, top_k: 40 })
    expect(request.stream).toBe(true)
    expect(request.temperature).toBe(0.5)
    expect(request.top_p).toBe(0.9)
    expect(request.top_k).toBe(40)
  })

  test("temperature above 1 is refused (Anthropic's range)", () => {
    expect(refused({ ...BASE, temperature: 1.5 })).toBe("Invalid request: temperature: a number from 0 to 1")
  })

  test("metadata.user_id becomes user, at most 256 characters", () => {
    expect(ok({ ...BASE, metadata: { user_id: "u-1" } }).user).toBe("u-1")
    expect(refused({ ...BASE, metadata: { user_id: "x".repeat(257) } })).toBe(
      "Invalid request: metadata.user_id: at most 256 characters",
    )
  })

  test("top-level cache_control carries over", () => {
    expect(ok({ ...BASE, cache_control: { type: "ephemeral", ttl: "1h" } }).cache_control).toEqual({ type: "ephemeral", ttl: "1h" })
  })
})

describe("POST /v1/messages decode: system", () => {
  test("a string system prompt becomes instructions", () => {
    expect(ok({ ...BASE, system: "Be brief." }).instructions).toBe("Be brief.")
  })

  test("system text blocks without cache breakpoints are joined into instructions", () => {
    const request = ok({ ...BASE, system: [{ type: "text", text: "One." }, { type: "text", text: "Two." }] })
    expect(request.instructions).toBe("One.\n\nTwo.")
  })

  test("system blocks with a cache breakpoint become a leading system message that keeps it", () => {
    const request = ok({
      ...BASE,
      system: [{ type: "text", text: "Long prompt", cache_control: { type: "ephemeral" } }],
    })
    expect(request.instructions).toBeUndefined()
    expect(request.input).toEqual([
      { type: "message", role: "system", content: [{ type: "input_text", text: "Long prompt", cache_control: { type: "ephemeral" } }] },
      { type: "message", role: "user", content: "Hi" },
    ])
    expectValidResponses(request)
  })

  test("a system message in messages becomes a system item", () => {
    const request = ok({ ...BASE, messages: [{ role: "system", content: "Rules" }, { role: "user", content: "Hi" }] })
    expect((request.input as ReadonlyArray<{ readonly role?: string }>)[0].role).toBe("system")
  })
})

describe("POST /v1/messages decode: content blocks", () => {
  test("text, base64 image and url image blocks of a user message become one message item", () => {
    const request = ok({
      ...BASE,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is this?", cache_control: { type: "ephemeral" } },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw==" } },
            { type: "image", source: { type: "url", url: "https://example.com/a.png" } },
          ],
        },
      ],
    })
    expect(request.input).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "What is this?", cache_control: { type: "ephemeral" } },
          { type: "input_image", image_url: "data:image/png;base64,iVBORw==" },
          { type: "input_image", image_url: "https://example.com/a.png" },
        ],
      },
    ])
    expectValidResponses(request)
  })

  test("documents: a base64 PDF, a url and a file id become input_file parts; plain text becomes text", () => {
    const request = ok({
      ...BASE,
      messages: [
        {
          role: "user",
          content: [
            { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" }, title: "a.pdf" },
            { type: "document", source: { type: "url", url: "https://example.com/b.pdf" } },
            { type: "document", source: { type: "file", file_id: "file_1" } },
            { type: "document", source: { type: "text", media_type: "text/plain", data: "plain words" } },
          ],
        },
      ],
    })
    expect(request.input).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_file", file_data: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" },
          { type: "input_file", file_url: "https://example.com/b.pdf" },
          { type: "input_file", file_id: "file_1" },
          { type: "input_text", text: "plain words" },
        ],
      },
    ])
    expectValidResponses(request)
  })

  test("an assistant turn with text, thinking and tool_use becomes reasoning, message and function_call items in order", () => {
    const request = ok({
      ...BASE,
      messages: [
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Use the tool.", signature: "sig" },
            { type: "text", text: "Let me check." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "18C" }, { type: "text", text: "sunny" }] },
            { type: "text", text: "Thanks" },
          ],
        },
      ],
    })
    expect(request.input).toEqual([
      { type: "message", role: "user", content: "Weather in Paris?" },
      { type: "reasoning", summary: [{ type: "summary_text", text: "Use the tool." }], encrypted_content: "sig", format: "anthropic-claude-v1" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me check." }] },
      { type: "function_call", call_id: "toolu_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call_output", call_id: "toolu_1", output: "18C\nsunny" },
      { type: "message", role: "user", content: [{ type: "input_text", text: "Thanks" }] },
    ])
    expectValidResponses(request)
  })

  test("a tool result marked is_error says so in its text (the normalized request has no error flag)", () => {
    const request = ok({
      ...BASE,
      messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "no such city", is_error: true }] }],
    })
    expect(request.input).toEqual([{ type: "function_call_output", call_id: "t", output: "Error: no such city" }])
  })

  test("redacted thinking travels as a reasoning item whose encrypted content is its marked data", () => {
    const request = ok({
      ...BASE,
      messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: [{ type: "redacted_thinking", data: "opaque" }] }],
    })
    expect((request.input as Array<unknown>)[1]).toEqual({
      type: "reasoning",
      summary: [],
      encrypted_content: "redacted_thinking:opaque",
      format: "anthropic-claude-v1",
    })
  })

  test("thinking without a signature (another provider's) travels without encrypted content", () => {
    const request = ok({
      ...BASE,
      messages: [{ role: "user", content: "Hi" }, { role: "assistant", content: [{ type: "thinking", thinking: "hm", signature: "" }] }],
    })
    expect((request.input as Array<unknown>)[1]).toEqual({ type: "reasoning", summary: [{ type: "summary_text", text: "hm" }] })
  })

  test("a block type of a server tool is refused naming the block", () => {
    expect(
      refused({ ...BASE, messages: [{ role: "assistant", content: [{ type: "server_tool_use", id: "s", name: "web_search", input: {} }] }] }),
    ).toBe('Invalid request: messages[0].content[0]: block type "server_tool_use" is not supported on this gateway')
  })

  test("tool_use in a user message and tool_result in an assistant message are refused", () => {
    expect(refused({ ...BASE, messages: [{ role: "user", content: [{ type: "tool_use", id: "a", name: "f", input: {} }] }] })).toBe(
      "Invalid request: messages[0].content[0]: tool_use blocks belong to assistant messages",
    )
    expect(refused({ ...BASE, messages: [{ role: "assistant", content: [{ type: "tool_result", tool_use_id: "a" }] }] })).toBe(
      "Invalid request: messages[0].content[0]: tool_result blocks belong to user messages",
    )
  })

  test("an image in a tool result is refused (only text travels as a tool result)", () => {
    const body = {
      ...BASE,
      messages: [
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }] },
          ],
        },
      ],
    }
    expect(refused(body)).toBe(
      'Invalid request: messages[0].content[0].content[0]: only text blocks can be sent as a tool result on this gateway (got "image")',
    )
  })

  test("an image by file id is refused naming its source", () => {
    const body = { ...BASE, messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f" } }] }] }
    expect(refused(body)).toBe(
      "Invalid request: messages[0].content[0].source: an image by file_id cannot be sent on this gateway; send a base64 or url source",
    )
  })

  test("a text block without text is refused naming the field", () => {
    expect(refused({ ...BASE, messages: [{ role: "user", content: [{ type: "text" }] }] })).toBe(
      "Invalid request: messages[0].content[0].text: is missing",
    )
  })

  test("tool_use input must be an object", () => {
    const body = { ...BASE, messages: [{ role: "assistant", content: [{ type: "tool_use", id: "a", name: "f", input: "x" }] }] }
    expect(refused(body)).toBe("Invalid request: messages[0].content[0].input: an object")
  })

  test("citations on a text block are refused (not carried)", () => {
    const body = { ...BASE, messages: [{ role: "assistant", content: [{ type: "text", text: "x", citations: [{ type: "char_location" }] }] }] }
    expect(refused(body)).toBe("Invalid request: messages[0].content[0].citations: citations are not available on this gateway")
  })
})

describe("POST /v1/messages decode: tools, tool choice, thinking", () => {
  const weather = { name: "get_weather", description: "Weather of a city", input_schema: { type: "object", properties: { city: { type: "string" } } } }

  test("custom tools become function tools with input_schema as parameters", () => {
    const request = ok({ ...BASE, tools: [weather, { ...weather, name: "other", type: "custom" }] })
    expect(request.tools).toEqual([
      { type: "function", name: "get_weather", description: "Weather of a city", parameters: weather.input_schema },
      { type: "function", name: "other", description: "Weather of a city", parameters: weather.input_schema },
    ])
    expectValidResponses(request)
  })

  test("a server tool is refused naming its index and type", () => {
    expect(refused({ ...BASE, tools: [{ type: "web_search_20250305", name: "web_search" }] })).toBe(
      'Invalid request: tools[0].type: server tool "web_search_20250305" is not available on this gateway; send a custom tool with input_schema',
    )
  })

  test("a custom tool without input_schema is refused naming the field", () => {
    expect(refused({ ...BASE, tools: [{ name: "f" }] })).toBe("Invalid request: tools[0].input_schema: is missing")
  })

  test("tool_choice auto, any, tool and none map to auto, required, a function and none", () => {
    expect(ok({ ...BASE, tools: [weather], tool_choice: { type: "auto" } }).tool_choice).toBe("auto")
    expect(ok({ ...BASE, tools: [weather], tool_choice: { type: "any" } }).tool_choice).toBe("required")
    expect(ok({ ...BASE, tools: [weather], tool_choice: { type: "tool", name: "get_weather" } }).tool_choice).toEqual({
      type: "function",
      name: "get_weather",
    })
    expect(ok({ ...BASE, tools: [weather], tool_choice: { type: "none" } }).tool_choice).toBe("none")
  })

  test("disable_parallel_tool_use turns parallel tool calls off", () => {
    const request = ok({ ...BASE, tools: [weather], tool_choice: { type: "auto", disable_parallel_tool_use: true } })
    expect(request.parallel_tool_calls).toBe(false)
  })

  test("an unknown tool_choice type is refused with the choices", () => {
    expect(refused({ ...BASE, tool_choice: { type: "required" } })).toStartWith("Invalid request: tool_choice")
  })

  test("thinking enabled with a budget becomes reasoning enabled with that budget", () => {
    const request = ok({ ...BASE, max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 2048 } })
    expect(request.reasoning).toEqual({ enabled: true, max_tokens: 2048 })
    expectValidResponses(request)
  })

  test("thinking budget below 1024 or not below max_tokens is refused", () => {
    expect(refused({ ...BASE, max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 100 } })).toBe(
      "Invalid request: thinking.budget_tokens: an integer of at least 1024",
    )
    expect(refused({ ...BASE, max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 2048 } })).toBe(
      "Invalid request: thinking.budget_tokens: must be less than max_tokens",
    )
  })

  test("thinking disabled and adaptive, and output_config.effort", () => {
    expect(ok({ ...BASE, thinking: { type: "disabled" } }).reasoning).toEqual({ enabled: false })
    expect(ok({ ...BASE, thinking: { type: "adaptive" }, output_config: { effort: "max" } }).reasoning).toEqual({
      enabled: true,
      effort: "xhigh",
    })
  })

  test("output_config.format json_schema becomes a strict json_schema text format", () => {
    const schema = { type: "object", properties: { a: { type: "string" } } }
    expect(ok({ ...BASE, output_config: { format: { type: "json_schema", schema } } }).text).toEqual({
      format: { type: "json_schema", name: "output", schema, strict: true },
    })
  })
})

describe("POST /v1/messages decode: what the gateway does not carry is refused by name", () => {
  test("non-empty stop_sequences are refused; an empty list is accepted", () => {
    expect(refused({ ...BASE, stop_sequences: ["END"] })).toBe(
      "Invalid request: stop_sequences: stop sequences are not available on this gateway (the routed providers are not sent them)",
    )
    expect(ok({ ...BASE, stop_sequences: [] }).model).toBe("acme/model-1")
  })

  test("Anthropic fields without a route here are refused naming the field", () => {
    expect(refused({ ...BASE, container: "c" })).toBe(
      "Invalid request: container: containers (code execution) are not available on this gateway",
    )
    expect(refused({ ...BASE, mcp_servers: [] })).toBe("Invalid request: mcp_servers: MCP servers are not available on this gateway")
  })

  test("an unknown top-level field is refused naming it", () => {
    expect(refused({ ...BASE, frobnicate: 1 })).toBe("Invalid request: frobnicate: unknown field; this gateway does not carry it")
  })

  test("a field named after an Object.prototype member is an unknown field too, not a lookup of the prototype", () => {
    for (const name of ["constructor", "toString", "hasOwnProperty", "__proto__"]) {
      expect(refused(JSON.parse(`{"${name}": 1, "model": "acme/model-1", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}`))).toBe(
        `Invalid request: ${name}: unknown field; this gateway does not carry it`,
      )
    }
  })

  test("service_tier other than auto is refused", () => {
    expect(ok({ ...BASE, service_tier: "auto" }).model).toBe("acme/model-1")
    expect(refused({ ...BASE, service_tier: "standard_only" })).toBe(
      'Invalid request: service_tier: only "auto" is supported on this gateway',
    )
  })
})

describe("POST /v1/messages decode: this API's extras", () => {
  test("models, provider, plugins, session_id and trace carry over with the Responses rules", () => {
    const request = ok({
      ...BASE,
      models: ["acme/model-2"],
      provider: { order: ["acme"], allow_fallbacks: false },
      plugins: [{ id: "web", enabled: false }],
      session_id: "s-1",
      trace: { trace_id: "t" },
    })
    expect(request.models).toEqual(["acme/model-2"])
    expect(request.provider?.order).toEqual(["acme"])
    expect(request.provider?.allow_fallbacks).toBe(false)
    expect(request.plugins).toEqual([{ id: "web", enabled: false }])
    expect(request.session_id).toBe("s-1")
    expect(request.trace).toEqual({ trace_id: "t" })
  })

  test("an unknown plugin id is refused with the allowed ids", () => {
    expect(refused({ ...BASE, plugins: [{ id: "nope" }] })).toStartWith("Invalid request: plugins[0].id: one of auto-router")
  })

  test("session_id longer than 256 characters is refused", () => {
    expect(refused({ ...BASE, session_id: "s".repeat(257) })).toBe("Invalid request: session_id: at most 256 characters")
  })
})

describe("presets and count_tokens bodies", () => {
  test("a preset body needs neither messages nor max_tokens; system blocks become instructions", () => {
    const out = decodeMessagesPreset({
      model: "acme/model-1",
      system: [{ type: "text", text: "Be kind.", cache_control: { type: "ephemeral" } }],
      temperature: 0.2,
    })
    expect(Either.isRight(out)).toBe(true)
    if (Either.isRight(out)) {
      expect(out.right.instructions).toBe("Be kind.")
      expect(out.right.input).toBeUndefined()
      expect(out.right.temperature).toBe(0.2)
    }
  })

  test("a count_tokens body needs messages but not max_tokens", () => {
    expect(Either.isRight(decodeCountTokensRequest({ model: "m", messages: [{ role: "user", content: "x" }] }))).toBe(true)
    const missing = decodeCountTokensRequest({ model: "m" })
    expect(Either.isLeft(missing) && missing.left.message).toBe("Invalid request: messages: is missing")
    const noModel = decodeCountTokensRequest({ messages: [{ role: "user", content: "x" }] })
    expect(Either.isLeft(noModel) && noModel.left.message).toBe("Invalid request: model: is missing")
  })
})
