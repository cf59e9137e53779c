import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { decodeResponsesRequest as decodeShape, type ResponsesRequest } from "../../src/domain/responses.js"
import { withPluginsDecoded } from "../support/plugins.js"

/** The body as the gateway decodes it: the Responses Schema, then each plugin entry by its plugin's. */
const decodeResponsesRequest = (body: unknown) => withPluginsDecoded(decodeShape(body))

const accept = (body: Record<string, unknown>): ResponsesRequest => {
  const r = decodeResponsesRequest(body)
  if (Either.isLeft(r)) throw new Error(`expected the body to be accepted, got: ${r.left.message}`)
  return r.right
}

/** The 400 message for a refused body; the message must name the field (and the rule). */
const refuse = (body: unknown): string => {
  const r = decodeResponsesRequest(body)
  if (Either.isRight(r)) throw new Error(`expected ${JSON.stringify(body).slice(0, 120)} to be refused`)
  expect(r.left._tag).toBe("BadRequest")
  expect(r.left.status).toBe(400)
  return r.left.message
}

const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`key${i}`, "v"]))
const plugin = (fields: Record<string, unknown>) => ({ plugins: [fields] })

describe("POST /responses body: shape", () => {
  test("an empty object is accepted (no field is required); stream and store default to false", () => {
    expect(accept({})).toEqual({ stream: false, store: false })
  })

  test("a body that is not a JSON object is refused with one plain message", () => {
    for (const body of [null, [], "text", 5]) expect(refuse(body)).toContain("the body must be a JSON object")
  })

  test("unknown extra keys are ignored", () => {
    expect(accept({ model: "m", not_a_field: 1 })).toEqual({ model: "m", stream: false, store: false })
  })

  test("every field of the contract's request table decodes", () => {
    const body = {
      model: "openai/gpt-x",
      models: ["a/b", "c/d"],
      input: [{ role: "user", content: "hi" }],
      instructions: null,
      stream: true,
      store: false,
      background: null,
      temperature: 0.7,
      top_p: 1,
      top_k: 40,
      top_logprobs: null,
      frequency_penalty: 0,
      presence_penalty: null,
      max_output_tokens: null,
      max_tool_calls: 3,
      parallel_tool_calls: false,
      previous_response_id: null,
      prompt_cache_key: "pk",
      safety_identifier: null,
      service_tier: null,
      include: ["reasoning.encrypted_content"],
      modalities: ["text", "image"],
      image_config: { aspect_ratio: "16:9", n: 2, sizes: [1, 2] },
      metadata: { a: "b" },
      session_id: "s-1",
      user: "u-1",
      debug: { echo_upstream_body: true },
      cache_control: { type: "ephemeral", ttl: "1h" },
      plugins: [{ id: "web" }],
      tools: [{ type: "function", name: "f", parameters: { type: "object" } }],
      tool_choice: "required",
      text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true }, verbosity: "low" },
      reasoning: { effort: "high", summary: "auto", enabled: true, max_tokens: 1000 },
      provider: { order: ["openai"], allow_fallbacks: false, sort: "price", max_price: { prompt: "1.5" } },
      prompt: { id: "p" },
      prompt_cache_options: { x: 1 },
      route: "fallback",
      stop_server_tools_when: { x: 1 },
      trace: { trace_id: "t" },
      truncation: "auto",
      preset: "my-preset",
    }
    const req = accept(body)
    expect(req.model).toBe("openai/gpt-x")
    expect(req.stream).toBe(true)
    expect(req.provider?.max_price?.prompt).toBe(1.5)
    expect(req.route).toBe("fallback")
    expect(req.preset).toBe("my-preset")
  })
})

describe("Rule 1: store other than false is refused; previous_response_id is refused (stateless)", () => {
  test("store false is accepted", () => {
    expect(accept({ store: false }).store).toBe(false)
  })
  test("store true is refused", () => {
    expect(refuse({ store: true })).toContain("store: only false is allowed (the service is stateless)")
  })
  test("previous_response_id null is accepted, a string is refused", () => {
    accept({ previous_response_id: null })
    expect(refuse({ previous_response_id: "resp_1" })).toContain(
      "previous_response_id: not supported; the service is stateless, send the full input",
    )
  })
})

describe("Limit: metadata", () => {
  test("16 pairs are accepted, 17 are refused", () => {
    accept({ metadata: pairs(16) })
    expect(refuse({ metadata: pairs(17) })).toContain("metadata: at most 16 pairs")
    // A value of the wrong kind reads as the rule, not Effect's rendering of the whole shape.
    for (const [field, value, message] of [
      ["provider", true, "provider: an object of provider preferences (order, only, ignore, sort, max_price, …)"],
      ["text", null, "text: an object: {format?, verbosity?}"],
      ["tools", null, "tools: an array of tools"],
      ["reasoning", 5, "reasoning: an object: {effort?, summary?, enabled?, max_tokens?}"],
      ["debug", null, "debug: an object: {echo_upstream_body?: boolean}"],
      ["provider", { max_price: [1] }, "provider.max_price: an object of amounts: {prompt?, completion?, request?, image?}"],
      ["tool_choice", [], 'tool_choice: "auto", "none", "required", or a tool choice object'],
    ] as const) {
      expect(refuse({ model: "acme/model-1", input: "hi", [field]: value })).toContain(message)
    }
    // A "__proto__" key (JSON.parse makes it an own key) would vanish in the decode and not count.
    expect(refuse(JSON.parse('{"model": "acme/model-1", "input": "hi", "metadata": {"__proto__": "x", "a": "b"}}'))).toContain(
      "metadata: key __proto__ is not allowed",
    )
  })
  test("a key of 64 characters is accepted, 65 is refused", () => {
    accept({ metadata: { ["k".repeat(64)]: "v" } })
    expect(refuse({ metadata: { ["k".repeat(65)]: "v" } })).toContain("metadata: key at most 64 characters")
  })
  test("a key with [ or ] is refused", () => {
    expect(refuse({ metadata: { "a[0]": "v" } })).toContain("metadata: key must not contain brackets")
    expect(refuse({ metadata: { "a]": "v" } })).toContain("metadata: key must not contain brackets")
  })
  test("a value of 512 characters is accepted, 513 is refused", () => {
    accept({ metadata: { k: "v".repeat(512) } })
    expect(refuse({ metadata: { k: "v".repeat(513) } })).toContain("metadata.k: value at most 512 characters")
  })
  test("values must be strings; null metadata is accepted", () => {
    expect(refuse({ metadata: { k: 1 } })).toContain("metadata.k: Expected string")
    expect(accept({ metadata: null }).metadata).toBeNull()
  })
})

describe("Limit: session_id and user", () => {
  test("session_id of 256 characters is accepted, 257 is refused", () => {
    accept({ session_id: "s".repeat(256) })
    expect(refuse({ session_id: "s".repeat(257) })).toContain("session_id: at most 256 characters")
  })
  test("user of 256 characters is accepted, 257 is refused", () => {
    accept({ user: "u".repeat(256) })
    expect(refuse({ user: "u".repeat(257) })).toContain("user: at most 256 characters")
  })
  test("characters are code points: 256 emoji (512 UTF-16 units) are accepted, 257 refused; a lone surrogate counts as one", () => {
    accept({ session_id: "😀".repeat(256) })
    expect(refuse({ session_id: "😀".repeat(257) })).toContain("session_id: at most 256 characters")
    accept({ user: `${"😀".repeat(255)}\ud800` })
    expect(refuse({ user: `${"😀".repeat(256)}\ud800` })).toContain("user: at most 256 characters")
    accept({ metadata: { ["é😀".repeat(32)]: "😀".repeat(512) } })
    expect(refuse({ metadata: { k: "😀".repeat(513) } })).toContain("metadata.k: value at most 512 characters")
    expect(refuse({ metadata: { ["😀".repeat(65)]: "v" } })).toContain("metadata: key at most 64 characters")
  })
})

describe("Enums: service_tier, include, modalities, cache_control", () => {
  test("service_tier: each allowed value and null are accepted; anything else is refused", () => {
    for (const tier of ["auto", "default", "flex", "priority", "scale", null]) accept({ service_tier: tier })
    expect(refuse({ service_tier: "turbo" })).toContain("service_tier: one of auto, default, flex, priority, scale, or null")
  })
  test("include: each allowed value is accepted; anything else is refused with its index", () => {
    accept({
      include: [
        "file_search_call.results",
        "message.input_image.image_url",
        "computer_call_output.output.image_url",
        "reasoning.encrypted_content",
        "code_interpreter_call.outputs",
      ],
    })
    accept({ include: null })
    expect(refuse({ include: ["reasoning.encrypted_content", "logs"] })).toContain("include[1]: one of file_search_call.results")
  })
  test("modalities: text and image are accepted; audio is refused", () => {
    accept({ modalities: ["text", "image"] })
    expect(refuse({ modalities: ["audio"] })).toContain("modalities[0]: one of text, image")
  })
  test("cache_control: type is required and only ephemeral; ttl is 5m or 1h", () => {
    accept({ cache_control: { type: "ephemeral" } })
    accept({ cache_control: { type: "ephemeral", ttl: "5m" } })
    accept({ cache_control: { type: "ephemeral", ttl: "1h" } })
    expect(refuse({ cache_control: {} })).toContain("cache_control.type: is missing")
    expect(refuse({ cache_control: { type: "persistent" } })).toContain("cache_control.type: one of ephemeral")
    expect(refuse({ cache_control: { type: "ephemeral", ttl: "2h" } })).toContain("cache_control.ttl: one of 5m, 1h")
  })
  test("cache_control on a content part is validated at its path", () => {
    expect(
      refuse({ input: [{ role: "user", content: [{ type: "input_text", text: "x", cache_control: { type: "x" } }] }] }),
    ).toContain("input[0].content[0].cache_control.type: one of ephemeral")
  })
})

describe("Plugins", () => {
  test("each of the 9 allowed ids is accepted; enabled defaults to true", () => {
    const ids: Array<string> = ["auto-router", "context-compression", "file-parser", "fusion", "moderation", "pareto-router", "response-healing", "web", "web-fetch"]
    const req = accept({ plugins: ids.map((id) => ({ id })) })
    expect(req.plugins?.map((p): string => p.id)).toEqual(ids)
    expect(req.plugins?.every((p) => p.enabled)).toBe(true)
    expect(accept(plugin({ id: "web", enabled: false })).plugins?.[0].enabled).toBe(false)
  })
  test("an unknown id is refused with the allowed ids; a missing id is refused", () => {
    expect(refuse(plugin({ id: "telepathy" }))).toContain("plugins[0].id: one of auto-router, context-compression")
    expect(refuse(plugin({ enabled: true }))).toContain("plugins[0].id: is missing")
  })
  test("fields of plugins the contract does not detail are kept", () => {
    expect(accept(plugin({ id: "web", max_results: 3 })).plugins?.[0]).toEqual({ id: "web", enabled: true, max_results: 3 })
  })
  test("auto-router cost_quality_tradeoff: 0 and 10 accepted, -1 and 11 refused, default 7", () => {
    accept(plugin({ id: "auto-router", cost_quality_tradeoff: 0 }))
    accept(plugin({ id: "auto-router", cost_quality_tradeoff: 10, allowed_models: ["openai/*"] }))
    expect(refuse(plugin({ id: "auto-router", cost_quality_tradeoff: -1 }))).toContain("plugins[0].cost_quality_tradeoff: an integer from 0 to 10")
    expect(refuse(plugin({ id: "auto-router", cost_quality_tradeoff: 11 }))).toContain("plugins[0].cost_quality_tradeoff: an integer from 0 to 10")
    expect(refuse(plugin({ id: "auto-router", cost_quality_tradeoff: 2.5 }))).toContain("plugins[0].cost_quality_tradeoff")
    expect(accept(plugin({ id: "auto-router" })).plugins?.[0]).toEqual({ id: "auto-router", enabled: true, cost_quality_tradeoff: 7 })
  })
  test("fusion analysis_models: 1 and 8 accepted, 0 and 9 refused", () => {
    const models = (n: number) => Array.from({ length: n }, (_, i) => `m/${i}`)
    accept(plugin({ id: "fusion", analysis_models: models(1) }))
    accept(plugin({ id: "fusion", analysis_models: models(8) }))
    expect(refuse(plugin({ id: "fusion", analysis_models: [] }))).toContain("plugins[0].analysis_models: 1 to 8 models")
    expect(refuse(plugin({ id: "fusion", analysis_models: models(9) }))).toContain("plugins[0].analysis_models: 1 to 8 models")
  })
  test("fusion max_tool_calls: 1 and 16 accepted, 0 and 17 refused, default 8", () => {
    accept(plugin({ id: "fusion", max_tool_calls: 1 }))
    accept(plugin({ id: "fusion", max_tool_calls: 16 }))
    expect(refuse(plugin({ id: "fusion", max_tool_calls: 0 }))).toContain("plugins[0].max_tool_calls: an integer from 1 to 16")
    expect(refuse(plugin({ id: "fusion", max_tool_calls: 17 }))).toContain("plugins[0].max_tool_calls: an integer from 1 to 16")
    expect(accept(plugin({ id: "fusion" })).plugins?.[0]).toMatchObject({ max_tool_calls: 8 })
  })
  test("fusion preset is one of general-high, general-budget, general-fast", () => {
    for (const preset of ["general-high", "general-budget", "general-fast"]) accept(plugin({ id: "fusion", preset, model: "m" }))
    expect(refuse(plugin({ id: "fusion", preset: "general-max" }))).toContain("plugins[0].preset: one of general-high, general-budget, general-fast")
  })
  test("fusion tools: the SDK's {type, parameters?} (which types the panel can use is the stage's rule); [] is accepted", () => {
    accept(plugin({ id: "fusion", tools: [] }))
    accept(plugin({ id: "fusion", tools: [{ type: "service:web_search", parameters: { max_results: 3 } }] }))
    accept(plugin({ id: "fusion", tools: [{ type: "openrouter:web_fetch" }] }))
    expect(refuse(plugin({ id: "fusion", tools: [{ parameters: {} }] }))).toContain("plugins[0].tools[0].type")
    expect(refuse(plugin({ id: "fusion", tools: [{ type: "openrouter:web_search", parameters: [1] }] }))).toContain("plugins[0].tools[0].parameters")
    expect(refuse(plugin({ id: "fusion", tools: "web" }))).toContain("plugins[0].tools")
  })
  test("file-parser pdf.engine and context-compression engine are strings", () => {
    accept({ plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }, { id: "context-compression", engine: "middle-out" }] })
    expect(refuse(plugin({ id: "file-parser", pdf: { engine: 1 } }))).toContain("plugins[0].pdf.engine")
  })
})

describe("Input items", () => {
  test("a string input and every item kind decode; a message without type is a message", () => {
    expect(accept({ input: "hello" }).input).toBe("hello")
    const req = accept({
      input: [
        { role: "developer", content: "rules" },
        { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }, { type: "input_image", image_url: "https://x/i.png", detail: "low" }, { type: "input_file", file_data: "data:application/pdf;base64,AA", filename: "a.pdf" }] },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "earlier", annotations: [] }, { type: "refusal", refusal: "no" }], id: "msg_1", status: "completed" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "42" },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "t" }], encrypted_content: null },
        { type: "item_reference", id: "msg_0" },
        { type: "web_search_call", id: "ws_1", status: "completed" },
      ],
    })
    const items = req.input as ReadonlyArray<Record<string, unknown>>
    expect(items.map((i) => i.type)).toEqual([
      "message",
      "message",
      "message",
      "function_call",
      "function_call_output",
      "reasoning",
      "item_reference",
      "web_search_call",
    ])
    expect(items[7]).toEqual({ type: "web_search_call", id: "ws_1", status: "completed" })
  })
  test("malformed items are refused at their path", () => {
    expect(refuse({ input: 5 })).toContain("input: a string or an array of input items")
    expect(refuse({ input: [5] })).toContain("input[0]: an input item object")
    expect(refuse({ input: [{ role: "bot", content: "x" }] })).toContain("input[0].role: one of user, assistant, system, developer")
    expect(refuse({ input: [{ role: "user" }] })).toContain("input[0].content: is missing")
    expect(refuse({ input: [{ role: "user", content: [{ type: "input_image" }] }] })).toContain("input[0].content[0]: input_image needs image_url or file_id")
    expect(refuse({ input: [{ role: "user", content: [{ type: "input_file" }] }] })).toContain("input[0].content[0]: input_file needs")
    expect(refuse({ input: [{ type: "function_call", name: "f", arguments: "{}" }] })).toContain("input[0].call_id: is missing")
    expect(refuse({ input: [{ type: "reasoning", summary: [{ type: "summary_text" }] }] })).toContain("input[0].summary[0].text: is missing")
    expect(refuse({ input: [{ type: "item_reference" }] })).toContain("input[0].id: is missing")
  })
})

describe("Tools, tool_choice, text, reasoning", () => {
  test("function tools are validated; other tool kinds are accepted as given", () => {
    accept({ tools: [{ type: "function", name: "f", description: "d", parameters: { type: "object" }, strict: true }, { type: "web_search_preview" }] })
    expect(refuse({ tools: [{ type: "function" }] })).toContain("tools[0].name: is missing")
    expect(refuse({ tools: [{ type: "function", name: "" }] })).toContain("tools[0].name: must not be empty")
    expect(refuse({ tools: [{ type: "function", name: "f", parameters: "x" }] })).toContain("tools[0].parameters")
    expect(refuse({ tools: [{ name: "f" }] })).toContain("tools[0].type")
  })
  test("tool_choice: auto, none, required, a function, other objects; anything else refused", () => {
    for (const choice of ["auto", "none", "required", { type: "function", name: "f" }, { type: "allowed_tools", mode: "auto", tools: [] }]) {
      accept({ tool_choice: choice })
    }
    expect(refuse({ tool_choice: "always" })).toContain('tool_choice: "auto", "none", "required", or a tool choice object')
    expect(refuse({ tool_choice: { type: "function" } })).toContain("tool_choice.name: is missing")
  })
  test("text.format: text, json_object, json_schema (name and schema required)", () => {
    accept({ text: { format: { type: "text" } } })
    accept({ text: { format: { type: "json_object" } } })
    expect(refuse({ text: { format: { type: "json_schema", schema: {} } } })).toContain("text.format.name: is missing")
    expect(refuse({ text: { format: { type: "xml" } } })).toContain("text.format.type")
    expect(refuse({ text: { verbosity: "loud" } })).toContain("text.verbosity: one of low, medium, high, or null")
  })
  test("reasoning: effort and summary enums, max_tokens an integer", () => {
    accept({ reasoning: { effort: "minimal", summary: "detailed", enabled: true, max_tokens: 0 } })
    expect(refuse({ reasoning: { effort: "max" } })).toContain("reasoning.effort: one of none, minimal, low, medium, high, xhigh")
    expect(refuse({ reasoning: { max_tokens: 1.5 } })).toContain("reasoning.max_tokens")
  })
})

describe("Sampling parameters", () => {
  test("integers are integers; numbers are numbers; nulls are accepted", () => {
    accept({ temperature: null, top_p: null, top_logprobs: null, frequency_penalty: null, presence_penalty: null, max_output_tokens: null, max_tool_calls: null })
    expect(refuse({ top_k: 1.5 })).toContain("top_k: Expected an integer")
    expect(refuse({ max_output_tokens: 10.5 })).toContain("max_output_tokens: Expected an integer")
    expect(refuse({ max_output_tokens: 0 })).toContain("max_output_tokens: an integer of at least 1")
    expect(refuse({ temperature: "hot" })).toContain("temperature: Expected number")
    expect(refuse({ temperature: 2.5 })).toContain("temperature: a number from 0 to 2")
    expect(refuse({ top_logprobs: 21 })).toContain("top_logprobs: an integer from 0 to 20")
  })
})

describe("Provider preferences (routing)", () => {
  test("all fields as clients send them; defaults allow_fallbacks true, require_parameters false", () => {
    const req = accept({
      provider: {
        order: ["a"],
        only: ["b"],
        ignore: ["c"],
        data_collection: "deny",
        zdr: true,
        quantizations: ["fp8"],
        sort: { by: "throughput", partition: "none" },
        preferred_min_throughput: 50,
        preferred_max_latency: { p90: 2 },
        max_price: { prompt: 1, completion: "2.5", request: "0", image: 0.1 },
      },
    })
    expect(req.provider).toMatchObject({ allow_fallbacks: true, require_parameters: false, max_price: { prompt: 1, completion: 2.5, request: 0, image: 0.1 } })
  })
  test("bad values are refused at their path", () => {
    expect(refuse({ provider: { sort: "fastest" } })).toContain("provider.sort: one of price, throughput, latency, exacto")
    expect(refuse({ provider: { sort: { by: "x" } } })).toContain("provider.sort.by: one of price, throughput, latency, exacto")
    expect(refuse({ provider: { data_collection: "maybe" } })).toContain("provider.data_collection: one of allow, deny")
    expect(refuse({ provider: { max_price: { prompt: "cheap" } } })).toContain("provider.max_price.prompt: a number or a numeric string")
    expect(refuse({ provider: { max_price: { prompt: -1 } } })).toContain("provider.max_price.prompt: a non-negative amount")
  })
})

describe("image_config", () => {
  test("values are strings, numbers or arrays", () => {
    accept({ image_config: { a: "x", b: 1, c: [1, "y"] } })
    expect(refuse({ image_config: { a: true } })).toContain("image_config.a: a string, a number, or an array")
  })
})
