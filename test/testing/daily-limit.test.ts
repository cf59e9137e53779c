import { expect, test } from "bun:test"
import { Effect, TestClock } from "effect"
import { TestGateway } from "gateway/testing"

// Every request on acme/penny costs exactly $0.01, whatever its tokens.
const catalog = {
  providers: [{ id: "primary", kind: "fake" }],
  models: [
    {
      id: "acme/penny",
      context_length: 8000,
      endpoints: [{ provider: "primary", upstream_model: "chat-1", pricing: { prompt: 0, completion: 0, request: 0.01 } }],
    },
  ],
}

test("a key with a daily limit is refused once it is spent, and usable again the next day", () =>
  Effect.gen(function* () {
    const gateway = yield* TestGateway.client
    const { key } = yield* Effect.promise(() => gateway.createKey({ limit: 0.01, limit_reset: "daily" }))
    const ask = () =>
      Effect.promise(() => gateway.request("/v1/responses", { key, method: "POST", json: { model: "acme/penny", input: "Hi" } }))

    expect((yield* ask()).status).toBe(200)
    // Charged once settled: the day's cent is spent.
    yield* Effect.promise(() => gateway.drain())
    const refused = yield* ask()
    expect(refused.status).toBe(402)
    expect(((yield* Effect.promise(() => refused.json())) as { error: { message: string } }).error.message).toContain("$0.00 of this key's $0.01 daily limit is left")

    yield* TestClock.adjust("1 day")
    expect((yield* ask()).status).toBe(200)
  }).pipe(Effect.provide(TestGateway.layer({ catalog })), Effect.runPromise))
