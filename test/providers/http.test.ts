/** The shared upstream caller on answers the mock does not give: odd but real upstream behaviour. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { Server } from "bun"
import { anthropicProvider } from "../../src/providers/anthropic/adapter"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesProvider } from "../../src/providers/openai-responses/adapter"
import type { Provider, ProviderConfig } from "../../src/providers/types"
import { configFor, eventsOf, providerErrorOf, textRequest, usage } from "./helpers"

/** The body and content type the next request gets, keyed by the test. */
let answer: { body: string; type: string; status?: number; headers?: Record<string, string> } = { body: "", type: "text/event-stream" }
let server: Server<undefined>
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: () => new Response(answer.body, { status: answer.status ?? 200, headers: { "content-type": answer.type, ...answer.headers } }),
  })
})
afterAll(() => server.stop(true))

const call = (kind: ProviderConfig["kind"], provider: Provider, stream = true) =>
  provider.open(textRequest("hi"), configFor(kind, `http://127.0.0.1:${server.port}/v1/`), { stream, signal: new AbortController().signal })

describe("shared upstream caller", () => {
  test("a JSON answer to a streamed request is read as JSON", async () => {
    answer = { type: "application/json", body: JSON.stringify({ choices: [{ message: { content: "whole" }, finish_reason: "stop" }] }) }
    expect(await eventsOf(await call("openai-chat", openAiChatProvider))).toEqual([{ type: "text", delta: "whole" }, { type: "finish", reason: "stop" }])
  })

  test("a stream that ends cleanly before its terminal event throws \"connection\"", async () => {
    for (const [kind, provider, body] of [
      ["openai-chat", openAiChatProvider, 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'],
      ["openai-responses", openAiResponsesProvider, 'data: {"type":"response.output_text.delta","delta":"a"}\n\n'],
      ["anthropic", anthropicProvider, 'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n'],
    ] as const) {
      answer = { type: "text/event-stream", body }
      const failure = await providerErrorOf(eventsOf(await call(kind, provider)))
      expect([kind, failure.kind]).toEqual([kind, "connection"])
    }
  })

  test("a chat stream without [DONE] still completes once it gave a finish reason", async () => {
    answer = {
      type: "text/event-stream",
      body: 'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n',
    }
    expect(await eventsOf(await call("openai-chat", openAiChatProvider))).toEqual([
      { type: "text", delta: "a" },
      usage(3, 1),
      { type: "finish", reason: "length" },
    ])
  })

  test("chat reasoning may come as delta.reasoning, and tool calls in one chunk", async () => {
    answer = {
      type: "text/event-stream",
      body:
        'data: {"choices":[{"delta":{"reasoning":"hm"}}]}\n\n' +
        'data: {"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c9","function":{"name":"f","arguments":"{}"}}]}}]}\n\n' +
        'data: {"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c9","function":{"arguments":""}}]},"finish_reason":"tool_calls"}]}\n\n' +
        "data: [DONE]\n\n",
    }
    expect(await eventsOf(await call("openai-chat", openAiChatProvider))).toEqual([
      { type: "reasoning", delta: "hm" },
      { type: "tool_call_start", index: 1, callId: "c9", name: "f" },
      { type: "tool_call_delta", index: 1, delta: "{}" },
      { type: "finish", reason: "tool_calls" },
    ])
  })

  test("a chunk that is not JSON throws \"server\": at open when it is the first, from the events after one", async () => {
    answer = { type: "text/event-stream", body: "data: {oops\n\n" }
    expect((await providerErrorOf(call("openai-chat", openAiChatProvider))).kind).toBe("server")
    answer = { type: "text/event-stream", body: 'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {oops\n\n' }
    expect((await providerErrorOf(eventsOf(await call("openai-chat", openAiChatProvider)))).kind).toBe("server")
  })

  test("a Responses incomplete answer finishes with length, a failed one throws", async () => {
    answer = {
      type: "text/event-stream",
      body: 'event: response.incomplete\ndata: {"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}\n\n',
    }
    expect(await eventsOf(await call("openai-responses", openAiResponsesProvider))).toEqual([{ type: "finish", reason: "length" }])
    answer = {
      type: "application/json",
      body: JSON.stringify({ status: "failed", error: { code: "rate_limit_exceeded", message: "slow down" } }),
    }
    const failure = await providerErrorOf(call("openai-responses", openAiResponsesProvider, false))
    expect([failure.kind, failure.message]).toEqual(["rate_limited", "slow down"])
  })

  test("an Anthropic stop reason of max_tokens finishes with length", async () => {
    answer = {
      type: "text/event-stream",
      body:
        'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}\n\n' +
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}\n\n' +
        'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    }
    expect(await eventsOf(await call("anthropic", anthropicProvider))).toEqual([usage(5, 9), { type: "finish", reason: "length", native: "max_tokens" }])
  })

  test("an error page that is not JSON keeps its text as the message", async () => {
    answer = { type: "text/html", body: "Bad Gateway", status: 502 }
    const failure = await providerErrorOf(call("anthropic", anthropicProvider))
    expect([failure.kind, failure.message, failure.upstreamStatus]).toEqual(["server", "Bad Gateway", 502])
  })

  test("a 504 from a proxy in front of the upstream is a timeout", async () => {
    answer = { type: "text/plain", body: "", status: 504 }
    expect((await providerErrorOf(call("openai-responses", openAiResponsesProvider))).kind).toBe("timeout")
  })
})
