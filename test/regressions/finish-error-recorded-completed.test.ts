/**
 * Regression (found in review): an upstream that ends with finish reason "error" (openai-chat `finish_reason: "error"`)
 * makes ResponseAssembler.finish() fall through to fail(): the client sees status "failed", but
 * route.ts records the generation as "completed" (`assembler.status === "incomplete" ? … :
 * "completed"`, lines ~302 and ~348) and reports a SUCCESS to the router (health, sticky session).
 * Non-streamed, the caller even gets HTTP 200 with a failed response body.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { ConfigFile } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let upstream: ReturnType<typeof Bun.serve>
let gw: InProcessGateway & { stop: () => Promise<void> }

const completion = {
  id: "c1",
  object: "chat.completion",
  created: 1,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "partial" }, finish_reason: "error" }],
  usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
}
const chunks = [
  { id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "partial" }, finish_reason: null }] },
  { id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "error" }] },
  { id: "c1", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage: { prompt_tokens: 5, completion_tokens: 1 } },
]

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const body = (await req.json()) as { stream?: boolean }
      if (!body.stream) return Response.json(completion)
      const sse = `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`
      return new Response(sse, { headers: { "content-type": "text/event-stream" } })
    },
  })
  gw = await startInProcessGateway({
    catalog: {
      providers: [{ id: "flaky", kind: "openai-chat", base_url: `http://127.0.0.1:${upstream.port}/v1` }],
      models: [{ id: "flaky/m", context_length: 1000, endpoints: [{ provider: "flaky", upstream_model: "m", pricing: { prompt: 1, completion: 1 } }] }],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const recorded = async (id: string | null) => {
  await gw.server.drain()
  const res = await gw.fetch(`/v1/generation?id=${id}`)
  return ((await res.json()) as { data?: Record<string, unknown> }).data
}

describe("upstream finish reason 'error'", () => {
  test("non-streamed: a 502 in the envelope, and the record says failed", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "flaky/m", input: "hi" } })
    expect(res.status).toBe(502)
    const body = (await res.json()) as { error: { code: number } }
    expect(body.error.code).toBe(502)
    const g = await recorded(res.headers.get("x-generation-id"))
    expect(g?.["status"]).toBe("failed")
  })

  test("streamed: response.failed is sent; the record must agree", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "flaky/m", input: "hi", stream: true } })
    const text = await res.text()
    expect(text).toContain("response.failed")
    const g = await recorded(res.headers.get("x-generation-id"))
    expect(g?.["status"]).toBe("failed")
  })
})
