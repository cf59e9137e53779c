import { describe, expect, test } from "bun:test"
// zod (from @openrouter/sdk) reads JSON Schema independently of the fake's generator.
import { z } from "zod"
import { FAKE_REASONING, fakeProvider, fakeWords } from "../../src/providers/fake"
import { MAX_EXAMPLE_CHARS, MAX_EXAMPLE_NODES, schemaExample } from "../../src/providers/fake-schema"
import { providerFor } from "../../src/providers/index"
import { anthropicProvider } from "../../src/providers/anthropic/adapter"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesProvider } from "../../src/providers/openai-responses/adapter"
import type { ProviderConfig, ProviderError, ProviderErrorKind } from "../../src/providers/types"
import { batchesOf, eventsOf, providerErrorOf, textRequest, usage, weatherTool } from "./helpers"

const config: ProviderConfig = { id: "fake", kind: "fake" }
const open = (text: string, stream = true, signal = new AbortController().signal) =>
  fakeProvider.open(textRequest(text), config, { stream, signal })

describe("fake provider", () => {
  test("echoes the last user message in word-sized text deltas, then usage and finish", async () => {
    const batches = await batchesOf(await open("hello big world"))
    expect(batches).toEqual([
      [{ type: "text", delta: "Echo: " }],
      [{ type: "text", delta: "hello " }],
      [{ type: "text", delta: "big " }],
      [{ type: "text", delta: "world" }],
      // 15 characters of input → ceil(15 / 4) = 4 tokens; 4 words out.
      [usage(4, 4), { type: "finish", reason: "stop" }],
    ])
  })

  test("answers the last user message, counting every input character", async () => {
    const request = textRequest("ignored", {
      instructions: "12345678",
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "first" }] },
        { type: "message", role: "assistant", content: [{ type: "text", text: "reply" }] },
        { type: "message", role: "user", content: [{ type: "text", text: "second" }] },
      ],
    })
    const events = await eventsOf(await fakeProvider.open(request, config, { stream: false, signal: new AbortController().signal }))
    // 8 + 5 + 5 + 6 = 24 characters → 6 tokens.
    expect(events).toEqual([{ type: "text", delta: "Echo: " }, { type: "text", delta: "second" }, usage(6, 2), { type: "finish", reason: "stop" }])
  })

  test("a non-streamed answer is one batch with the same events", async () => {
    const streamed = await eventsOf(await open("same words here"))
    const batches = await batchesOf(await open("same words here", false))
    expect(batches.length).toBe(1)
    expect(batches[0]).toEqual(streamed)
  })

  test("[tool:NAME] answers with a call to NAME whose arguments carry the text", async () => {
    const text = "weather please [tool:get_weather]"
    const events = await eventsOf(await open(text))
    const args = JSON.stringify({ input: text })
    expect(events).toEqual([
      { type: "tool_call_start", index: 0, callId: "call_fake_0", name: "get_weather" },
      { type: "tool_call_delta", index: 0, delta: args },
      usage(Math.ceil(text.length / 4), fakeWords(args).length),
      { type: "finish", reason: "tool_calls" },
    ])
  })

  test("[tool:NAME] of a declared tool: arguments valid against its schema, required strings filled from the message without markers", async () => {
    const tools = [{ type: "function" as const, name: "get_weather", parameters: weatherTool.parameters }]
    const events = await eventsOf(await fakeProvider.open(textRequest("Weather in Paris? [tool:get_weather] [reasoning]", { tools }), config, { stream: true, signal: new AbortController().signal }))
    const delta = events.find((e) => e.type === "tool_call_delta") as { delta: string }
    // zod reads the schema independently of the fake's generator.
    expect(z.object({ city: z.string() }).strict().parse(JSON.parse(delta.delta))).toEqual({ city: "Weather in Paris?" })
  })

  test("[tool:NAME] arguments follow nested, enum and numeric rules of the declared schema", async () => {
    const parameters = {
      type: "object",
      properties: {
        query: { type: "string", minLength: 3, maxLength: 5 },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
        where: { type: "object", properties: { lat: { type: "number" } }, required: ["lat"], additionalProperties: false },
      },
      required: ["query", "unit", "days", "where"],
      additionalProperties: false,
    }
    const tools = [{ type: "function" as const, name: "forecast", parameters }]
    const events = await eventsOf(await fakeProvider.open(textRequest("Oslo please [tool:forecast]", { tools }), config, { stream: false, signal: new AbortController().signal }))
    const delta = events.find((e) => e.type === "tool_call_delta") as { delta: string }
    const schema = z
      .object({ query: z.string().min(3).max(5), unit: z.enum(["celsius", "fahrenheit"]), days: z.number().int().min(1).max(7), where: z.object({ lat: z.number() }).strict() })
      .strict()
    expect(schema.safeParse(JSON.parse(delta.delta)).success).toBe(true)
  })

  test("[tool:NAME] of a tool not declared, or declaring no property, keeps {input: text}", async () => {
    for (const tools of [[], [{ type: "function" as const, name: "f", parameters: { type: "object", properties: {} } }]]) {
      const events = await eventsOf(await fakeProvider.open(textRequest("go [tool:f]", { tools }), config, { stream: true, signal: new AbortController().signal }))
      expect(events).toContainEqual({ type: "tool_call_delta", index: 0, delta: JSON.stringify({ input: "go [tool:f]" }) })
    }
  })

  test("tool_choice is honoured: a named function or required calls without a marker, none answers text even with one", async () => {
    const tools = [{ type: "function" as const, name: "get_weather", parameters: weatherTool.parameters }, { type: "function" as const, name: "other" }]
    const callOf = async (text: string, toolChoice: NonNullable<Parameters<typeof textRequest>[1]>["toolChoice"]) => {
      const events = await eventsOf(await fakeProvider.open(textRequest(text, { tools, toolChoice }), config, { stream: false, signal: new AbortController().signal }))
      const start = events.find((e) => e.type === "tool_call_start") as { name: string } | undefined
      return start?.name
    }
    expect(await callOf("Oslo", { type: "function", name: "get_weather" })).toBe("get_weather")
    expect(await callOf("Oslo", "required")).toBe("get_weather")
    expect(await callOf("Oslo [tool:other]", "required")).toBe("other")
    expect(await callOf("Oslo [tool:get_weather]", "none")).toBeUndefined()
    expect(await callOf("Oslo", "auto")).toBeUndefined()
  })

  test("[reasoning] emits reasoning deltas before the text, counted as reasoning tokens", async () => {
    const events = await eventsOf(await open("why [reasoning]"))
    const thoughts = fakeWords(FAKE_REASONING)
    expect(events).toEqual([
      ...thoughts.map((delta) => ({ type: "reasoning" as const, delta })),
      { type: "text", delta: "Echo: " },
      { type: "text", delta: "why " },
      { type: "text", delta: "[reasoning]" },
      usage(4, thoughts.length + 3, { reasoningTokens: thoughts.length }),
      { type: "finish", reason: "stop" },
    ])
  })

  const failures: ReadonlyArray<[string, ProviderErrorKind, number | undefined]> = [
    ["429", "rate_limited", 429],
    ["500", "server", 500],
    ["503", "server", 503],
    ["529", "overloaded", 529],
    ["timeout", "timeout", undefined],
    ["auth", "auth", 401],
    ["400", "bad_request", 400],
  ]
  for (const [marker, kind, status] of failures) {
    test(`[fail:${marker}] rejects open with "${kind}"`, async () => {
      const failure = await providerErrorOf(open(`please [fail:${marker}]`))
      expect([failure.kind, failure.upstreamStatus]).toEqual([kind, status])
      if (kind === "rate_limited") expect(failure.retryAfterSeconds).toBe(1)
    })
  }

  test("[fail-mid] throws a server error after two text deltas", async () => {
    const call = await open("one two three [fail-mid]")
    const seen: Array<string> = []
    const failure = await providerErrorOf(
      (async () => {
        for await (const batch of call.events) for (const event of batch) if (event.type === "text") seen.push(event.delta)
      })(),
    )
    expect(failure.kind).toBe("server")
    expect(seen).toEqual(["Echo: ", "one "])
  })

  test("[fail-mid] on a non-streamed call rejects open", async () => {
    expect((await providerErrorOf(open("x [fail-mid]", false))).kind).toBe("server")
  })

  test("[slow:MS] waits between deltas", async () => {
    const started = performance.now()
    const events = await eventsOf(await open("a b [slow:30]"))
    // Five batches: four words and the closing one, so four pauses.
    expect(events.length).toBe(6)
    expect(performance.now() - started).toBeGreaterThanOrEqual(115)
  })

  test("[slow:MS] stops as soon as the signal aborts", async () => {
    const controller = new AbortController()
    const call = await open("a b c d [slow:1000]", true, controller.signal)
    const iterator = call.events[Symbol.asyncIterator]()
    await iterator.next()
    setTimeout(() => controller.abort(), 20)
    const started = performance.now()
    const failure = await providerErrorOf(iterator.next())
    expect(failure.kind).toBe("connection")
    expect(performance.now() - started).toBeLessThan(300)
  })

  test("is deterministic", async () => {
    const first = await eventsOf(await open("same [reasoning] input"))
    const second = await eventsOf(await open("same [reasoning] input"))
    expect(second).toEqual(first)
  })
})

describe("fake provider: tool round trips", () => {
  const callThenOutput = (output: string) =>
    textRequest("ignored", {
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "weather in Paris? [tool:get_weather]" }] },
        { type: "function_call", callId: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call_output", callId: "call_1", output },
      ],
    })

  test("a turn that ends with a tool's output is answered with text using that output, not another call", async () => {
    const events = await eventsOf(await fakeProvider.open(callThenOutput('{"temperature_c":21}'), config, { stream: true, signal: new AbortController().signal }))
    const text = events.flatMap((e) => (e.type === "text" ? [e.delta] : [])).join("")
    expect(text).toBe('The tool get_weather answered: {"temperature_c":21}')
    expect(events.some((e) => e.type === "tool_call_start")).toBe(false)
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop" })
  })

  test("several outputs at the end of the input are each quoted; a user message after them asks again", async () => {
    // Parallel calls: both calls, then both outputs.
    const two = textRequest("ignored", {
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "weather and time? [tool:get_weather]" }] },
        { type: "function_call", callId: "call_1", name: "get_weather", arguments: "{}" },
        { type: "function_call", callId: "call_2", name: "get_time", arguments: "{}" },
        { type: "function_call_output", callId: "call_1", output: "sunny" },
        { type: "function_call_output", callId: "call_2", output: "noon" },
      ],
    })
    const text = (await eventsOf(await fakeProvider.open(two, config, { stream: false, signal: new AbortController().signal })))
      .flatMap((e) => (e.type === "text" ? [e.delta] : []))
      .join("")
    expect(text).toBe("The tool get_weather answered: sunny\nThe tool get_time answered: noon")
    const again = textRequest("ignored", {
      input: [...callThenOutput("sunny").input, { type: "message", role: "user", content: [{ type: "text", text: "and Rome? [tool:get_weather]" }] }],
    })
    const events = await eventsOf(await fakeProvider.open(again, config, { stream: false, signal: new AbortController().signal }))
    expect(events[0]).toMatchObject({ type: "tool_call_start", name: "get_weather" })
  })
})

describe("fake provider: JSON output", () => {
  const answer = async (responseFormat: NonNullable<Parameters<typeof textRequest>[1]>["responseFormat"], text = "hello json") => {
    const request = textRequest(text, { responseFormat })
    const events = await eventsOf(await fakeProvider.open(request, config, { stream: true, signal: new AbortController().signal }))
    return events.flatMap((e) => (e.type === "text" ? [e.delta] : [])).join("")
  }

  const schemas: ReadonlyArray<[string, Record<string, unknown>]> = [
    [
      "a strict object of every kind of property",
      {
        type: "object",
        properties: {
          city: { type: "string", minLength: 2, maxLength: 6 },
          temperature: { type: "number", minimum: -50, maximum: -10 },
          count: { type: "integer", exclusiveMinimum: 3, multipleOf: 5 },
          ratio: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
          version: { const: 2 },
          raining: { type: "boolean" },
          note: { type: ["string", "null"] },
          at: { type: "string", format: "date-time" },
          tags: { type: "array", items: { type: "string" }, minItems: 2, uniqueItems: true },
        },
        required: ["city", "temperature", "count", "ratio", "unit", "version", "raining", "note", "at", "tags"],
        additionalProperties: false,
      },
    ],
    [
      "nested objects, $ref into $defs, anyOf and allOf",
      {
        type: "object",
        properties: {
          person: { $ref: "#/$defs/person" },
          contact: { anyOf: [{ type: "null" }, { type: "string", format: "email" }] },
          merged: { allOf: [{ type: "object", properties: { a: { type: "string" } }, required: ["a"] }, { properties: { b: { type: "integer" } } }] },
        },
        required: ["person", "contact", "merged"],
        $defs: {
          person: {
            type: "object",
            properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/person" } } },
            required: ["name", "children"],
            additionalProperties: false,
          },
        },
      },
    ],
    ["a top-level array of enums", { type: "array", items: { enum: ["x", "y"] }, minItems: 1, maxItems: 3 }],
  ]
  for (const [name, schema] of schemas) {
    test(`json_schema: the answer is JSON valid against the schema (${name})`, async () => {
      const text = await answer({ type: "json_schema", name: "out", schema, strict: true })
      const parsed = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(JSON.parse(text))
      expect(parsed.error).toBeUndefined()
      expect(parsed.success).toBe(true)
    })
  }

  test("json_schema: strings carry the reply, cut to their maximum length", () => {
    expect(schemaExample({ type: "object", properties: { s: { type: "string" }, t: { type: "string", maxLength: 4 } } }, "Echo: hi")).toEqual({
      s: "Echo: hi",
      t: "Echo",
    })
  })

  test("json_schema past the fake's bounds is the upstream's 400 (the caller's schema), not an answer that grows without end", async () => {
    const refusal = async (schema: Record<string, unknown>) => {
      const request = textRequest("hi", { responseFormat: { type: "json_schema", name: "out", schema, strict: true } })
      const opened = fakeProvider.open(request, config, { stream: false, signal: new AbortController().signal })
      return opened.then(
        () => undefined,
        (e: unknown) => e as ProviderError,
      )
    }
    for (const [schema, asks] of [
      [{ type: "object", properties: { a: { type: "string", minLength: 1e9 } }, required: ["a"] }, "a string of at least 1000000000 characters"],
      [{ type: "array", items: { type: "string" }, minItems: 1e9 }, "an array of at least 1000000000 items"],
      // Each level small, the whole large: 200 × 200 values.
      [{ type: "array", minItems: 200, items: { type: "array", minItems: 200, items: { type: "integer" } } }, "an array of at least 200 items"],
    ] as const) {
      const e = await refusal(schema)
      expect(e?.kind).toBe("bad_request")
      expect(e?.upstreamStatus).toBe(400)
      expect(e?.message).toContain(`the schema asks for ${asks}`)
    }
    // Inside the bounds, the value still satisfies the schema.
    expect((schemaExample({ type: "string", minLength: MAX_EXAMPLE_CHARS }, "x") as string).length).toBe(MAX_EXAMPLE_CHARS)
    expect(schemaExample({ type: "array", minItems: MAX_EXAMPLE_NODES, items: { const: 1 } }, "x")).toHaveLength(MAX_EXAMPLE_NODES)
  })

  test("json_schema: an allOf that refers to itself ends (no stack overflow), and an unknown format named after a prototype member is the reply", () => {
    const recursive = { $defs: { a: { allOf: [{ $ref: "#/$defs/a" }, { type: "object", properties: { x: { type: "string" } } }] } }, $ref: "#/$defs/a" }
    expect(schemaExample(recursive, "hi")).toEqual({ x: "hi" })
    expect(schemaExample({ type: "string", format: "constructor" }, "hi")).toBe("hi")
  })

  test("json_object: a JSON object carrying the reply", async () => {
    expect(JSON.parse(await answer({ type: "json_object" }))).toEqual({ answer: "Echo: hello json" })
  })

  test("text format: the plain echo", async () => {
    expect(await answer({ type: "text" })).toBe("Echo: hello json")
  })
})

describe("fake provider: markers in the upstream model", () => {
  test("an endpoint whose upstream_model carries [fail:503] fails every request", async () => {
    const failure = await providerErrorOf(fakeProvider.open(textRequest("hello", { model: "echo[fail:503]" }), config, { stream: true, signal: new AbortController().signal }))
    expect([failure.kind, failure.upstreamStatus]).toEqual(["server", 503])
  })

  test("[slow:MS] in the upstream_model paces every request; the echo is of the user's text only", async () => {
    const started = performance.now()
    const events = await eventsOf(await fakeProvider.open(textRequest("a b", { model: "echo[slow:30]" }), config, { stream: true, signal: new AbortController().signal }))
    expect(events.flatMap((e) => (e.type === "text" ? [e.delta] : [])).join("")).toBe("Echo: a b")
    // Four batches: three words and the closing one, so three pauses (a lower bound only).
    expect(performance.now() - started).toBeGreaterThanOrEqual(85)
  })
})

describe("provider registry", () => {
  test("each kind has its adapter", () => {
    expect(providerFor("fake")).toBe(fakeProvider)
    expect(providerFor("openai-chat")).toBe(openAiChatProvider)
    expect(providerFor("openai-responses")).toBe(openAiResponsesProvider)
    expect(providerFor("anthropic")).toBe(anthropicProvider)
  })
})
