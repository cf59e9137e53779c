/**
 * Each HTTP adapter against the mock upstream on loopback: the exact ProviderEvent sequence
 * and usage for JSON and streamed answers, × text, tool call and reasoning.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream"
import { anthropicProvider } from "../../src/providers/anthropic/adapter"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesProvider } from "../../src/providers/openai-responses/adapter"
import type { Provider, ProviderConfig, ProviderEvent } from "../../src/providers/types"
import { batchesOf, configFor, eventsOf, textRequest, usage, weatherTool } from "./helpers"

interface AdapterCase {
  readonly kind: ProviderConfig["kind"]
  readonly provider: Provider
  readonly path: string
  readonly callId: string
  /** Whether the wire format reports reasoning tokens apart (Anthropic does not). */
  readonly reportsReasoningTokens: boolean
  /** The upstream seals its reasoning (Anthropic's signature): the event that ends the reasoning. */
  readonly seal?: ProviderEvent
  /** The upstream's own words for stop and tool_calls, where it has its own (the finish event's `native`). */
  readonly native?: { readonly stop: string; readonly tool_calls: string }
}

const CASES: ReadonlyArray<AdapterCase> = [
  { kind: "openai-chat", provider: openAiChatProvider, path: "/v1/chat/completions", callId: "call_mock_0", reportsReasoningTokens: true },
  { kind: "openai-responses", provider: openAiResponsesProvider, path: "/v1/responses", callId: "call_mock_0", reportsReasoningTokens: true },
  { kind: "anthropic", provider: anthropicProvider, path: "/v1/messages", callId: "toolu_mock_0", reportsReasoningTokens: false, seal: { type: "reasoning_signature", signature: "mock-signature" }, native: { stop: "end_turn", tool_calls: "tool_use" } },
]

let mock: MockUpstream
beforeAll(async () => {
  mock = await startMockUpstream({ port: 0, tokens: 3 })
})
afterAll(async () => {
  await mock.stop()
})
beforeEach(() => mock.reset())

const finish = (c: AdapterCase, reason: "stop" | "tool_calls"): ProviderEvent =>
  c.native === undefined ? { type: "finish", reason } : { type: "finish", reason, native: c.native[reason] }

const open = (c: AdapterCase, stream: boolean, headers: Record<string, string> = {}, text = "hello") =>
  c.provider.open(textRequest(text, { tools: [weatherTool] }), configFor(c.kind, mock.url, headers), { stream, signal: new AbortController().signal, apiKey: "sk-test" })

const text3: Array<Extract<ProviderEvent, { type: "text" }>> = [
  { type: "text", delta: "tok " },
  { type: "text", delta: "tok " },
  { type: "text", delta: "tok " },
]

for (const c of CASES) {
  describe(`${c.kind} adapter against the mock upstream`, () => {
    test("a streamed text answer gives each delta, then usage, then finish", async () => {
      const events = await eventsOf(await open(c, true))
      expect(events).toEqual([...text3, usage(10, 3), finish(c, "stop")])
    })

    test("a streamed answer arrives in one batch per upstream chunk", async () => {
      const batches = await batchesOf(await open(c, true, { "x-mock-interval-ms": "80" }))
      // The mock pauses before each delta, so each arrives in its own chunk, hence its own batch. The
      // pause is long enough that a busy machine (the suite runs two files at once) does not read two
      // chunks in one read: at 15 ms a CI run once got the first two deltas together.
      const textBatches = batches.map((batch) => batch.filter((event) => event.type === "text")).filter((batch) => batch.length > 0)
      expect(textBatches).toEqual([[text3[0]], [text3[1]], [text3[2]]])
    })

    test("a JSON text answer gives the whole text, then usage, then finish", async () => {
      const events = await eventsOf(await open(c, false))
      expect(events).toEqual([{ type: "text", delta: "tok tok tok " }, usage(10, 3), finish(c, "stop")])
    })

    test("a streamed tool call gives its start and argument deltas, finishing with tool_calls", async () => {
      const events = await eventsOf(await open(c, true, { "x-mock-scenario": "tool_call", "x-mock-tokens": "2" }))
      expect(events).toEqual([
        { type: "tool_call_start", index: 0, callId: c.callId, name: "get_weather" },
        { type: "tool_call_delta", index: 0, delta: '{"input":"tok ' },
        { type: "tool_call_delta", index: 0, delta: 'tok "}' },
        usage(10, 2),
        finish(c, "tool_calls"),
      ])
    })

    test("a JSON tool call gives its start and whole arguments", async () => {
      const events = await eventsOf(await open(c, false, { "x-mock-scenario": "tool_call", "x-mock-tokens": "2" }))
      expect(events).toEqual([
        { type: "tool_call_start", index: 0, callId: c.callId, name: "get_weather" },
        { type: "tool_call_delta", index: 0, delta: '{"input":"tok tok "}' },
        usage(10, 2),
        finish(c, "tool_calls"),
      ])
    })

    test("a streamed reasoning answer gives reasoning deltas before the text", async () => {
      const events = await eventsOf(await open(c, true, { "x-mock-scenario": "reasoning", "x-mock-tokens": "2" }))
      expect(events).toEqual([
        { type: "reasoning", delta: "think " },
        { type: "reasoning", delta: "think " },
        ...(c.seal === undefined ? [] : [c.seal]),
        { type: "text", delta: "tok " },
        { type: "text", delta: "tok " },
        usage(10, 4, { reasoningTokens: c.reportsReasoningTokens ? 2 : 0 }),
        finish(c, "stop"),
      ])
    })

    test("a JSON reasoning answer gives the reasoning, then the text", async () => {
      const events = await eventsOf(await open(c, false, { "x-mock-scenario": "reasoning", "x-mock-tokens": "2" }))
      expect(events).toEqual([
        { type: "reasoning", delta: "think think " },
        ...(c.seal === undefined ? [] : [c.seal]),
        { type: "text", delta: "tok tok " },
        usage(10, 4, { reasoningTokens: c.reportsReasoningTokens ? 2 : 0 }),
        finish(c, "stop"),
      ])
    })

    test("cached and cache-write tokens map into Usage", async () => {
      const headers = { "x-mock-usage-input": "100", "x-mock-usage-output": "7", "x-mock-usage-cached": "40", "x-mock-usage-cache-write": "20" }
      for (const stream of [true, false]) {
        const events = await eventsOf(await open(c, stream, headers))
        const expected =
          c.kind === "anthropic"
            ? // Anthropic's input_tokens exclude cache reads and writes; ours include them.
              usage(160, 7, { cachedTokens: 40, cacheWriteTokens: 20 })
            : usage(100, 7, { cachedTokens: 40 })
        expect(events.find((event) => event.type === "usage")).toEqual(expected)
      }
    })

    test("the request goes to the format's path with its auth headers, config headers and body", async () => {
      const call = await open(c, true, { "x-custom": "yes" })
      await eventsOf(call)
      expect(mock.requests.length).toBe(1)
      const seen = mock.requests[0]
      expect(seen.path).toBe(c.path)
      expect(seen.headers["x-custom"]).toBe("yes")
      expect(seen.headers["content-type"]).toBe("application/json")
      if (c.kind === "anthropic") {
        expect(seen.headers["x-api-key"]).toBe("sk-test")
        expect(seen.headers["anthropic-version"]).toBe("2023-06-01")
        expect(seen.headers["authorization"]).toBeUndefined()
      } else {
        expect(seen.headers["authorization"]).toBe("Bearer sk-test")
      }
      expect(seen.body).toEqual(call.upstreamBody)
      expect((seen.body as { stream: boolean }).stream).toBe(true)
      expect(mock.stats).toMatchObject({ open: 0, completed: 1, aborted: 0 })
    })
  })
}
