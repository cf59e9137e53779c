/**
 * Regression: a 2xx body that is not an answer of its format (`null`, an array, an error object
 * under a 200, an object without the answer's parts) was a "completed" empty answer, charged its
 * input, with no failover; `null` answered a 502 whose message was a TypeError's text. A stream
 * event that is not one of its format read "upstream connection failed: null is not an object",
 * and text an upstream sent in the same read as its error event was dropped. Now the JSON bodies
 * are a 502 in the envelope, at $0, and the next endpoint answers; a stream says the upstream sent
 * an event that is not one, after the text it had already sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { ConfigFile } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

/** JSON bodies by upstream model, each answered with 200; "good" is a real answer of the format. */
const BODIES: Record<string, Record<string, string>> = {
  "openai-chat": {
    null: "null",
    array: "[1,2]",
    wrong: `{"id":5,"choices":"nope"}`,
    "null-message": `{"id":"c","choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`,
    good: `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
  },
  "openai-responses": {
    null: "null",
    error: `{"error":{"message":"internal boom","type":"server_error","code":500}}`,
    wrong: `{"id":"r","output":"nope"}`,
  },
  anthropic: {
    null: "null",
    error: `{"error":{"type":"api_error","message":"Internal server error"}}`,
    wrong: `{"id":"m","type":"message","content":"nope"}`,
  },
}

const chunk = (delta: string) => `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${delta}"},"finish_reason":null}]}\n\n`
/** Streams by upstream model (Chat Completions), each sent in one write. */
const STREAMS: Record<string, string> = {
  "null-event": "data: null\n\n",
  "error-first": `data: {"error":{"message":"Overloaded","type":"overloaded_error","code":"overloaded_error"}}\n\n`,
  good: `${chunk("fine")}data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n`,
  "text-then-bad": `${chunk("Hel")}${chunk("lo ")}data: {not json\n\n`,
}

let upstream: ReturnType<typeof Bun.serve>
let gw: InProcessGateway & { stop: () => Promise<void> }

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const kind = new URL(req.url).pathname.split("/")[1]!
      const body = (await req.json()) as { model: string; stream?: boolean }
      if (body.stream === true) return new Response(STREAMS[body.model] ?? "", { headers: { "content-type": "text/event-stream" } })
      return new Response(BODIES[kind]?.[body.model] ?? "null", { headers: { "content-type": "application/json" } })
    },
  })
  const base = (kind: string) => `http://127.0.0.1:${upstream.port}/${kind}`
  const kinds = Object.keys(BODIES)
  gw = await startInProcessGateway({
    catalog: {
      providers: [
        ...kinds.map((kind) => ({ id: kind, kind, base_url: base(kind) })),
        { id: "healthy", kind: "openai-chat", base_url: base("openai-chat") },
      ],
      models: [
        ...kinds.flatMap((kind) =>
          Object.keys(BODIES[kind]!).map((scenario) => ({
            id: `${kind}/${scenario}`,
            context_length: 100_000,
            endpoints: [{ provider: kind, upstream_model: scenario, pricing: { prompt: 1, completion: 1 } }],
          })),
        ),
        {
          id: "fallback/wrong-first",
          context_length: 100_000,
          endpoints: [
            { provider: "openai-chat", upstream_model: "wrong", pricing: { prompt: 1, completion: 1 } },
            { provider: "healthy", upstream_model: "good", pricing: { prompt: 1, completion: 1 } },
          ],
        },
        {
          id: "fallback/stream-error-first",
          context_length: 100_000,
          endpoints: [
            { provider: "openai-chat", upstream_model: "error-first", pricing: { prompt: 1, completion: 1 } },
            { provider: "healthy", upstream_model: "good", pricing: { prompt: 1, completion: 1 } },
          ],
        },
        ...Object.keys(STREAMS).map((scenario) => ({
          id: `stream/${scenario}`,
          context_length: 100_000,
          endpoints: [{ provider: "openai-chat", upstream_model: scenario, pricing: { prompt: 1, completion: 1 } }],
        })),
      ],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const generation = async (res: Response) => {
  await gw.server.drain()
  const id = res.headers.get("x-generation-id")!
  return ((await (await gw.fetch(`/v1/generation?id=${id}`)).json()) as { data: { status: string; total_cost: number } }).data
}

describe("a 200 body that is not an answer of its format", () => {
  for (const kind of Object.keys(BODIES)) {
    for (const scenario of Object.keys(BODIES[kind]!).filter((s) => s !== "good")) {
      test(`${kind}, ${scenario}: 502 in the envelope, no gateway code in the message, $0`, async () => {
        const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: `${kind}/${scenario}`, input: "hi" } })
        const body = (await res.json()) as { error?: { code: number; message: string } }
        expect(res.status).toBe(502)
        expect(body.error?.code).toBe(502)
        expect(body.error?.message).not.toContain("evaluating")
        const record = await generation(res)
        expect(record.status).toBe("failed")
        expect(record.total_cost).toBe(0)
      })
    }
  }

  test("the next endpoint answers when the first sends one", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "fallback/wrong-first", input: "hi" } })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { output: Array<{ content: Array<{ text: string }> }> }
    expect(body.output[0]?.content[0]?.text).toBe("fine")
  })
})

describe("a stream event that is not one of its format", () => {
  const streamed = async (model: string) => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model, input: "hi", stream: true } })
    expect(res.status).toBe(200)
    return res.text()
  }

  test("data: null as the first event is a failure before the first byte: 502 saying so, $0, no gateway code", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "stream/null-event", input: "hi", stream: true } })
    const body = (await res.json()) as { error: { code: number; message: string } }
    expect(res.status).toBe(502)
    expect(body.error.message).toContain("upstream sent an event that is not one of its format")
    expect(body.error.message).not.toContain("evaluating")
    expect((await generation(res)).total_cost).toBe(0)
  })

  test("a stream that fails before its first event goes to the next endpoint (an overloaded error after the 200)", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "fallback/stream-error-first", input: "hi", stream: true } })
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).toContain('"delta":"fine"')
    expect(text).not.toContain("response.failed")
  })

  test("text that came in the same read as the bad event reaches the client before the failure", async () => {
    const text = await streamed("stream/text-then-bad")
    expect(text.indexOf('"delta":"Hel"')).toBeGreaterThan(-1)
    expect(text.indexOf('"delta":"lo "')).toBeGreaterThan(text.indexOf('"delta":"Hel"'))
    expect(text.indexOf("response.failed")).toBeGreaterThan(text.indexOf('"delta":"lo "'))
  })
})

describe("Gemini and Bedrock answers without their parts", () => {
  test("Gemini: no candidates is a failure unless the prompt was blocked", async () => {
    const { geminiJsonEvents } = await import("../../src/providers/gemini/answer.js")
    expect(() => geminiJsonEvents({ usageMetadata: { promptTokenCount: 3 } })).toThrow("not an answer: no candidates")
    const blocked = geminiJsonEvents({ promptFeedback: { blockReason: "SAFETY" }, usageMetadata: { promptTokenCount: 3 } })
    expect(blocked.at(-1)).toEqual({ type: "finish", reason: "content_filter" })
  })
  test("Bedrock: no output.message.content is a failure", async () => {
    const { converseJsonEvents } = await import("../../src/providers/bedrock/json.js")
    expect(() => converseJsonEvents({ output: {} }, false)).toThrow("not an answer: no output.message.content")
    expect(converseJsonEvents({ output: { message: { content: [{ text: "ok" }] } }, usage: { inputTokens: 1, outputTokens: 1 }, stopReason: "end_turn" }, false)[0]).toEqual({
      type: "text",
      delta: "ok",
    })
  })
})

describe("a JSON answer a reader cannot read", () => {
  test("is a body of another shape, never the runtime's TypeError text (Bedrock: a content block that is null)", async () => {
    const { converseJsonEvents } = await import("../../src/providers/bedrock/json.js")
    const { fromJsonChecked } = await import("../../src/providers/http.js")
    expect(() => fromJsonChecked("bedrock", { output: { message: { content: [null] } } }, (json) => converseJsonEvents(json, false))).toThrow(
      "bedrock upstream sent a body that is not an answer: a body of another shape",
    )
  })
})

describe("empty answers that say they are complete", () => {
  const sse = (data: string) => ({ data })

  test("Gemini: no candidates, or one without content that says STOP, is not an answer; a token limit's empty one is", async () => {
    const { GeminiAnswer, geminiJsonEvents } = await import("../../src/providers/gemini/answer.js")
    const usage = { usageMetadata: { promptTokenCount: 3 } }
    expect(() => geminiJsonEvents({ candidates: [], ...usage })).toThrow("not an answer: no candidate with content")
    expect(() => geminiJsonEvents({ candidates: [{ finishReason: "STOP" }], ...usage })).toThrow("not an answer")
    expect(() => geminiJsonEvents({ candidates: [{ content: { parts: [{ text: "" }] }, finishReason: "STOP" }], ...usage })).toThrow("not an answer")
    expect(geminiJsonEvents({ candidates: [{ finishReason: "MAX_TOKENS" }], ...usage }).at(-1)).toEqual({ type: "finish", reason: "length", native: "MAX_TOKENS" })
    // A stream of the same: its end is the failure (nothing of it was sent).
    const stream = new GeminiAnswer()
    stream.push(sse(JSON.stringify({ candidates: [{ content: { role: "model", parts: [] }, finishReason: "STOP" }], ...usage })), [])
    expect(() => stream.end([])).toThrow("not an answer")
  })

  test("Bedrock: an empty content that ended the turn is not an answer; one cut by the token limit is", async () => {
    const { converseJsonEvents } = await import("../../src/providers/bedrock/json.js")
    expect(() => converseJsonEvents({ output: { message: { content: [] } }, stopReason: "end_turn" }, false)).toThrow("not an answer: an empty output.message.content")
    expect(converseJsonEvents({ output: { message: { content: [] } }, stopReason: "max_tokens" }, false).at(-1)).toEqual({ type: "finish", reason: "length", native: "max_tokens" })
  })

  test("Responses: a completed response of no output items is not an answer; an incomplete one is", async () => {
    const { responsesJsonEvents } = await import("../../src/providers/openai-responses/json.js")
    expect(() => responsesJsonEvents({ id: "r", status: "completed", output: [] })).toThrow("not an answer: an empty output")
    expect(responsesJsonEvents({ id: "r", status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [] }).at(-1)).toMatchObject({ type: "finish" })
  })

  test("Chat: a stream of no choice (only [DONE], or Azure's prompt_filter_results) is not an answer", async () => {
    const { ChatStreamTranslator } = await import("../../src/providers/openai-chat/stream.js")
    expect(() => new ChatStreamTranslator().push(sse("[DONE]"), [])).toThrow("not an answer: no choices")
    const filtered = new ChatStreamTranslator()
    filtered.push(sse(JSON.stringify({ id: "", choices: [], prompt_filter_results: [{ prompt_index: 0 }] })), [])
    expect(() => filtered.push(sse("[DONE]"), [])).toThrow("not an answer: no choices")
  })
})

describe("an error object whose code is an HTTP status (Azure's, under a 200)", () => {
  test("reads as that status: 429 is a rate limit (429 to the caller, the next endpoint first), in a body and in a stream", async () => {
    const { chatJsonEvents } = await import("../../src/providers/openai-chat/json.js")
    const { ChatStreamTranslator } = await import("../../src/providers/openai-chat/stream.js")
    const error = { error: { code: "429", message: "Rate limit is exceeded. Try again in 1 second." } }
    const kindOf = (f: () => unknown) => {
      try {
        f()
      } catch (e) {
        return (e as { kind: string }).kind
      }
      return "answered"
    }
    expect(kindOf(() => chatJsonEvents(error))).toBe("rate_limited")
    expect(kindOf(() => new ChatStreamTranslator().push({ data: JSON.stringify(error) }, []))).toBe("rate_limited")
    expect(kindOf(() => chatJsonEvents({ error: { code: "500", message: "boom" } }))).toBe("server")
    // `"error": null` beside an answer is no error.
    expect(kindOf(() => chatJsonEvents({ error: null, choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] }))).toBe("answered")
  })
})
