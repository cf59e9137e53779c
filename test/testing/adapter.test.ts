import { afterAll, expect, test } from "bun:test"
import { Effect } from "effect"
import { TestGateway } from "gateway/testing"

// The upstream: a Chat Completions server on loopback that records what it is sent.
const sent: Array<{ path: string; body: Record<string, unknown> }> = []
const upstream = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (req) => {
    sent.push({ path: new URL(req.url).pathname, body: (await req.json()) as Record<string, unknown> })
    return Response.json({
      id: "chatcmpl-1",
      object: "chat.completion",
      created: 1,
      model: "up-1",
      choices: [{ index: 0, message: { role: "assistant", content: "Bonjour" }, finish_reason: "stop" }],
      usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
    })
  },
})
afterAll(() => upstream.stop(true))

const catalog = {
  providers: [{ id: "upstream", kind: "openai-chat", base_url: `http://127.0.0.1:${upstream.port}/v1` }],
  models: [
    {
      id: "acme/chat",
      context_length: 8000,
      endpoints: [{ provider: "upstream", upstream_model: "up-1", pricing: { prompt: 1, completion: 1 } }],
    },
  ],
}

test("the openai-chat adapter sends the Chat Completions wire and reads its answer", () =>
  Effect.gen(function* () {
    const gateway = yield* TestGateway.client
    const res = yield* Effect.promise(() =>
      gateway.request("/v1/responses", { method: "POST", json: { model: "acme/chat", input: "Say hello in French" } }),
    )
    const body = (yield* Effect.promise(() => res.json())) as { output: Array<{ content?: Array<{ text: string }> }>; usage: { input_tokens: number } }

    expect(res.status).toBe(200)
    expect(body.output[0]?.content?.[0]?.text).toBe("Bonjour")
    expect(body.usage.input_tokens).toBe(5)
    expect(sent).toHaveLength(1)
    expect(sent[0]?.path).toBe("/v1/chat/completions")
    expect(sent[0]?.body).toMatchObject({ model: "up-1", messages: [{ role: "user", content: "Say hello in French" }] })
  }).pipe(Effect.provide(TestGateway.layer({ catalog })), Effect.runPromise))
