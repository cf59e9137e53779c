/**
 * Regression: a stream whose answer had finished (its finish reason and usage read) and then
 * failed before the format's terminal event (a reset before Chat's `[DONE]`, Vertex's error event
 * or a stray `data: [DONE]` after Gemini's last chunk) was a failed answer charged an estimate of
 * a tenth of the usage the upstream had reported, and the client was told to ask, and pay, again.
 * Now it ends complete with the reported usage, as a body that closed there does; a stream cut
 * before its finish reason still fails.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { ConfigFile } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

const chatChunk = (delta: string, finish: string | null = null, usage = "") =>
  `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":${delta},"finish_reason":${finish === null ? "null" : `"${finish}"`}}]${usage}}\n\n`
const CHAT_FINISHED = `${chatChunk('{"content":"fine"}')}${chatChunk("{}", "stop")}data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":50}}\n\n`
const GEMINI_FINISHED = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"fine"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":100,"candidatesTokenCount":50}}\n\n`

/** What each upstream model streams, then how the stream ends: closed, reset, or more bytes first. */
const STREAMS: Record<string, { readonly body: string; readonly reset: boolean }> = {
  "chat-finished-reset": { body: CHAT_FINISHED, reset: true },
  "chat-cut-reset": { body: chatChunk('{"content":"fin"}'), reset: true },
  "gemini-finished-error": { body: `${GEMINI_FINISHED}data: {"error":{"code":500,"message":"boom","status":"INTERNAL"}}\n\n`, reset: false },
  "gemini-finished-stray": { body: `${GEMINI_FINISHED}data: [DONE]\n\n`, reset: false },
}

let upstream: ReturnType<typeof Bun.serve>
let gw: InProcessGateway & { stop: () => Promise<void> }

beforeAll(async () => {
  process.env["GW_TEST_FINISHED_GEMINI_KEY"] = "g-key"
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url)
      const text = await req.text()
      const model = url.pathname.startsWith("/gemini/") ? (url.pathname.split("/models/")[1]?.split(":")[0] ?? "") : (JSON.parse(text) as { model: string }).model
      const scenario = STREAMS[model]
      if (scenario === undefined) return new Response("no such model", { status: 404 })
      const bytes = new TextEncoder().encode(scenario.body)
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          controller.enqueue(bytes)
          await Bun.sleep(20)
          // An error in the body resets the connection before the chunked body's end.
          if (scenario.reset) controller.error(new Error("reset"))
          else controller.close()
        },
      })
      return new Response(body, { headers: { "content-type": "text/event-stream" } })
    },
  })
  const base = `http://127.0.0.1:${upstream.port}`
  gw = await startInProcessGateway({
    catalog: {
      providers: [
        { id: "chat", kind: "openai-chat", base_url: `${base}/chat` },
        { id: "gem", kind: "gemini", base_url: `${base}/gemini`, api_key_env: "GW_TEST_FINISHED_GEMINI_KEY" },
      ],
      models: Object.keys(STREAMS).map((scenario) => ({
        id: `t/${scenario}`,
        context_length: 100_000,
        // $1,000 / $2,000 a million: the reported usage (100 in, 50 out) costs $0.20.
        endpoints: [{ provider: scenario.startsWith("gemini") ? "gem" : "chat", upstream_model: scenario, pricing: { prompt: 1000, completion: 2000 } }],
      })),
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const streamed = async (scenario: string) => {
  const res = await gw.fetch("/v1/chat/completions", { method: "POST", json: { model: `t/${scenario}`, messages: [{ role: "user", content: "hi" }], stream: true } })
  expect(res.status).toBe(200)
  const text = await res.text()
  await gw.server.drain()
  const id = res.headers.get("x-generation-id")!
  const record = ((await (await gw.fetch(`/v1/generation?id=${id}`)).json()) as { data: { status: string; total_cost: number; tokens_prompt: number; tokens_completion: number; usage_estimated: boolean } }).data
  return { text, record }
}

describe("a stream that fails after its answer finished", () => {
  for (const scenario of ["chat-finished-reset", "gemini-finished-error", "gemini-finished-stray"]) {
    test(`${scenario}: complete, charged the usage the upstream reported`, async () => {
      const { text, record } = await streamed(scenario)
      expect(text).toContain('"content":"fine"')
      expect(text).toContain('"finish_reason":"stop"')
      expect(text).not.toContain('"error"')
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true)
      expect(record).toMatchObject({ status: "completed", tokens_prompt: 100, tokens_completion: 50, usage_estimated: false })
      expect(record.total_cost).toBeCloseTo(0.2, 10)
    })
  }

  test("a stream cut before its finish reason still fails, charged the estimate of what it produced", async () => {
    const { text, record } = await streamed("chat-cut-reset")
    expect(text).toContain('"content":"fin"')
    expect(text).toContain('"error"')
    expect(record).toMatchObject({ status: "failed", usage_estimated: true })
  })
})
