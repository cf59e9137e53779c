/**
 * The gemini adapter against the fake Gemini API (scripts/mock-clouds.ts): the request it sends
 * (path, key header, body), the events of JSON and streamed answers, the thought signature's
 * round trip through the tool call's id, and Google's errors mapped to the gateway's kinds.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { MOCK_SIGNATURE, type MockClouds, startMockClouds } from "../../scripts/mock-clouds"
import { geminiProvider } from "../../src/providers/gemini/adapter"
import { geminiJsonEvents } from "../../src/providers/gemini/answer"
import { geminiRequestBody } from "../../src/providers/gemini/request"
import { callIdOf, signatureOf } from "../../src/providers/gemini/signature"
import type { NormalizedRequest, ProviderConfig, ProviderEvent } from "../../src/providers/types"
import { eventsOf, providerErrorOf, textRequest, usage, weatherTool } from "./helpers"

const KEY = "gm-test-key-do-not-leak"
let clouds: MockClouds
beforeAll(async () => {
  clouds = await startMockClouds({ geminiKey: KEY })
})
afterAll(async () => {
  await clouds.stop()
})
beforeEach(() => clouds.reset())

const configOf = (headers: Record<string, string> = {}): ProviderConfig => ({ id: "gem", kind: "gemini", base_url: `${clouds.url}/v1beta`, headers })

const open = (request: NormalizedRequest, stream: boolean, headers: Record<string, string> = {}, apiKey = KEY) =>
  geminiProvider.open(request, configOf(headers), { stream, signal: new AbortController().signal, apiKey })

const hello = (overrides: Partial<NormalizedRequest> = {}) => textRequest("hello", { model: "gemini-test", ...overrides })
const tok = (n: number): Array<ProviderEvent> => Array.from({ length: n }, () => ({ type: "text", delta: "tok " }))

describe("gemini request", () => {
  test("a call goes to models/{model}:generateContent with the key in x-goog-api-key, never in the URL", async () => {
    await eventsOf(await open(hello(), false))
    const sent = clouds.requests[0]
    expect(sent?.path).toBe("/v1beta/models/gemini-test:generateContent")
    expect(sent?.headers["x-goog-api-key"]).toBe(KEY)
    expect(sent?.path).not.toContain(KEY)
  })

  test("a stream goes to :streamGenerateContent?alt=sse", async () => {
    await eventsOf(await open(hello(), true))
    expect(clouds.requests[0]?.path).toBe("/v1beta/models/gemini-test:streamGenerateContent?alt=sse")
  })

  test("the body: system text apart, turns as user/model, tools as JSON Schema, structured output and thinking", () => {
    const body = geminiRequestBody({
      model: "gemini-test",
      instructions: "Be brief.",
      input: [
        { type: "message", role: "developer", content: [{ type: "text", text: "Use metric units." }] },
        {
          type: "message",
          role: "user",
          content: [
            { type: "text", text: "What is in these?" },
            { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" },
            { type: "image", url: "https://example.com/cat.webp" },
          ],
        },
        { type: "message", role: "assistant", content: [{ type: "text", text: "A cat." }] },
        { type: "message", role: "user", content: [{ type: "text", text: "And the weather?" }] },
      ],
      tools: [weatherTool],
      toolChoice: { type: "function", name: "get_weather" },
      temperature: 0.5,
      maxOutputTokens: 100,
      responseFormat: { type: "json_schema", name: "answer", schema: { type: "object", properties: { a: { type: "string" } } } },
      reasoning: { effort: "low" },
    })
    expect(body).toEqual({
      contents: [
        {
          role: "user",
          parts: [
            { text: "What is in these?" },
            { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
            { fileData: { mimeType: "image/webp", fileUri: "https://example.com/cat.webp" } },
          ],
        },
        { role: "model", parts: [{ text: "A cat." }] },
        { role: "user", parts: [{ text: "And the weather?" }] },
      ],
      systemInstruction: { parts: [{ text: "Be brief." }, { text: "Use metric units." }] },
      tools: [{ functionDeclarations: [{ name: "get_weather", description: "Weather of a city", parametersJsonSchema: weatherTool.parameters }] }],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } },
      generationConfig: {
        temperature: 0.5,
        responseMimeType: "application/json",
        responseJsonSchema: { type: "object", properties: { a: { type: "string" } } },
        thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 },
        // The answer's 100 on top of the thinking budget: Gemini counts thoughts in maxOutputTokens.
        maxOutputTokens: 1124,
      },
    })
  })

  test("reasoning effort none turns thinking off; json_object asks for JSON without a schema", () => {
    const body = geminiRequestBody(hello({ reasoning: { effort: "none" }, responseFormat: { type: "json_object" } }))
    expect(body.generationConfig).toEqual({ responseMimeType: "application/json", thinkingConfig: { thinkingBudget: 0 } })
  })
})

describe("gemini answers", () => {
  test("a JSON text answer: the whole text, usage, finish stop", async () => {
    expect(await eventsOf(await open(hello(), false))).toEqual([{ type: "text", delta: "tok tok tok tok tok " }, usage(10, 5), { type: "finish", reason: "stop", native: "STOP" }])
  })

  test("a streamed text answer: one delta per chunk, then usage and finish at the end of the body", async () => {
    expect(await eventsOf(await open(hello(), true))).toEqual([...tok(5), usage(10, 5), { type: "finish", reason: "stop", native: "STOP" }])
  })

  test("thought parts are reasoning, and thoughts count as output and as reasoning tokens", async () => {
    for (const stream of [false, true]) {
      const events = await eventsOf(await open(hello({ reasoning: { effort: "low" } }), stream, { "x-mock-scenario": "reasoning", "x-mock-tokens": "2" }))
      const reasoning = stream ? [{ type: "reasoning", delta: "think " }, { type: "reasoning", delta: "think " }] : [{ type: "reasoning", delta: "think think " }]
      const text = stream ? tok(2) : [{ type: "text", delta: "tok tok " }]
      expect(events).toEqual([...reasoning, ...text, usage(10, 4, { reasoningTokens: 2 }), { type: "finish", reason: "stop", native: "STOP" }] as Array<ProviderEvent>)
    }
  })

  for (const stream of [false, true]) {
    test(`a ${stream ? "streamed" : "JSON"} function call: start with an id carrying the thought signature, whole arguments, finish tool_calls`, async () => {
      const events = await eventsOf(await open(hello({ tools: [weatherTool] }), stream, { "x-mock-scenario": "tool_call", "x-mock-tokens": "2" }))
      const start = events[0] as Extract<ProviderEvent, { type: "tool_call_start" }>
      expect(start).toMatchObject({ type: "tool_call_start", index: 0, name: "get_weather" })
      expect(start.callId).toMatch(/^call_[0-9a-f]{24}__thought__[A-Za-z0-9_-]+$/)
      expect(signatureOf(start.callId)).toBe(MOCK_SIGNATURE)
      expect(events.slice(1)).toEqual([
        { type: "tool_call_delta", index: 0, delta: '{"input":"tok tok "}' },
        usage(10, 1),
        { type: "finish", reason: "tool_calls", native: "STOP" },
      ])
    })
  }

  test("the tool round trip: the call goes back with its thought signature and the output as a functionResponse of its name", async () => {
    const first = await eventsOf(await open(hello({ tools: [weatherTool] }), false, { "x-mock-scenario": "tool_call" }))
    const start = first[0] as Extract<ProviderEvent, { type: "tool_call_start" }>
    const followUp = hello({
      tools: [weatherTool],
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "Weather in Oslo?" }] },
        { type: "function_call", callId: start.callId, name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", callId: start.callId, output: "4 degrees" },
      ],
    })
    const events = await eventsOf(await open(followUp, true))
    expect(events[0]).toEqual({ type: "text", delta: 'Tool output: {"result":"4 degrees"}' })
    const body = clouds.requests[1]?.body as { contents: Array<{ role: string; parts: Array<Record<string, unknown>> }> }
    expect(body.contents.slice(1)).toEqual([
      { role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Oslo" } }, thoughtSignature: MOCK_SIGNATURE }] },
      { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { result: "4 degrees" } } }] },
    ])
  })

  test("a call id without a signature goes back without one (the fake refuses it as Gemini 3 does: a 400)", async () => {
    const followUp = hello({
      input: [
        { type: "function_call", callId: "call_from_elsewhere", name: "get_weather", arguments: "{}" },
        { type: "function_call_output", callId: "call_from_elsewhere", output: '{"temp":4}' },
      ],
    })
    const failure = await providerErrorOf(open(followUp, false))
    expect(failure.kind).toBe("bad_request")
    const body = clouds.requests[0]?.body as { contents: Array<{ parts: Array<Record<string, unknown>> }> }
    expect(body.contents[0]?.parts[0]).toEqual({ functionCall: { name: "get_weather", args: {} } })
    // A JSON object output goes as the response itself.
    expect(body.contents[1]?.parts[0]).toEqual({ functionResponse: { name: "get_weather", response: { temp: 4 } } })
  })
})

describe("gemini finish reasons and usage", () => {
  const finishOf = (response: unknown) => geminiJsonEvents(response).at(-1)
  const answer = (finishReason: string) => ({ candidates: [{ content: { parts: [{ text: "x" }] }, finishReason }] })

  test("MAX_TOKENS is length; the safety family is content_filter; a malformed call is error; a blocked prompt is content_filter", () => {
    expect(finishOf(answer("MAX_TOKENS"))).toEqual({ type: "finish", reason: "length", native: "MAX_TOKENS" })
    for (const reason of ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"]) {
      expect(finishOf(answer(reason))).toEqual({ type: "finish", reason: "content_filter", native: reason })
    }
    expect(finishOf(answer("MALFORMED_FUNCTION_CALL"))).toEqual({ type: "finish", reason: "error", native: "MALFORMED_FUNCTION_CALL" })
    expect(finishOf({ promptFeedback: { blockReason: "SAFETY" } })).toEqual({ type: "finish", reason: "content_filter" })
  })

  test("cached and tool-use prompt tokens: input counts both, cached is the cache's part", () => {
    const events = geminiJsonEvents({
      ...answer("STOP"),
      usageMetadata: { promptTokenCount: 100, cachedContentTokenCount: 60, toolUsePromptTokenCount: 5, candidatesTokenCount: 7, thoughtsTokenCount: 3 },
    })
    expect(events.at(-2)).toEqual(usage(105, 10, { cachedTokens: 60, reasoningTokens: 3 }))
  })
})

describe("gemini thought signatures in call ids", () => {
  test("base64 with + / and padding survives as base64url in the id", () => {
    for (const signature of ["+/+/AQI=", "ab+/cd==", "abcd", MOCK_SIGNATURE]) {
      const id = callIdOf("fc_1", signature)
      expect(id).toMatch(/^[A-Za-z0-9_-]+$/)
      expect(signatureOf(id)).toBe(signature)
    }
    expect(callIdOf("fc_1", undefined)).toBe("fc_1")
    expect(signatureOf("call_abc")).toBeUndefined()
  })
})

describe("gemini errors", () => {
  const cases: Array<[string, string, number | undefined]> = [
    ["400", "bad_request", undefined],
    ["401", "auth", undefined],
    ["403", "auth", undefined],
    ["429", "rate_limited", 7],
    ["503", "overloaded", undefined],
    ["500", "server", undefined],
    ["context_length", "context_length", undefined],
  ]
  for (const [error, kind, retryAfter] of cases) {
    test(`upstream ${error} is "${kind}"${retryAfter === undefined ? "" : ", the wait from RetryInfo"}`, async () => {
      for (const stream of [false, true]) {
        const failure = await providerErrorOf(open(hello(), stream, { "x-mock-error": error }))
        expect(failure.kind).toBe(kind as typeof failure.kind)
        if (retryAfter !== undefined) expect(failure.retryAfterSeconds).toBe(retryAfter)
      }
    })
  }

  test("a key Gemini does not know (400 API_KEY_INVALID) is an auth failure, and the key is in no message", async () => {
    const failure = await providerErrorOf(open(hello(), false, {}, "gm-wrong-key"))
    expect(failure.kind).toBe("auth")
    expect(failure.message).not.toContain("gm-wrong-key")
  })

  test("no key set: an auth failure naming the setting, before any call", async () => {
    const failure = await providerErrorOf(geminiProvider.open(hello(), configOf(), { stream: false, signal: new AbortController().signal }))
    expect(failure.kind).toBe("auth")
    expect(failure.message).toContain("api_key_env")
    expect(clouds.requests).toHaveLength(0)
  })

  test("an error chunk mid-stream fails the iteration with its status's kind", async () => {
    const call = await open(hello(), true, { "x-mock-error": "mid-stream-error" })
    const failure = await providerErrorOf(eventsOf(call))
    expect(failure.kind).toBe("overloaded")
  })
})
