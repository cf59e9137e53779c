import { expect, test } from "bun:test"
import { Effect, TestClock } from "effect"
import { FakeProvider, TestGateway } from "gateway/testing"

const catalog = {
  providers: [
    { id: "primary", kind: "fake" },
    { id: "backup", kind: "fake" },
  ],
  models: [
    {
      id: "acme/chat",
      context_length: 8000,
      endpoints: [
        // Free first: the router tries zero-priced endpoints before the others (docs/routing.md).
        { provider: "primary", upstream_model: "chat-1", pricing: { prompt: 0, completion: 0 } },
        { provider: "backup", upstream_model: "chat-1", pricing: { prompt: 2, completion: 2 } },
      ],
    },
  ],
}

test("an endpoint is cooled down after three failures and tried again after the cooldown", () =>
  Effect.gen(function* () {
    const fake = yield* FakeProvider
    const gateway = yield* TestGateway.client
    const ask = () =>
      Effect.promise(async () => {
        const res = await gateway.request("/v1/responses", { method: "POST", json: { model: "acme/chat", input: "Hi" } })
        await res.text()
        return res.status
      })
    const callsTo = (provider: string) => fake.received(provider).length

    // Three 503s in a row: each request still answered by the backup.
    fake.script("primary", FakeProvider.fail(503), FakeProvider.fail(503), FakeProvider.fail(503))
    for (let i = 0; i < 3; i++) expect(yield* ask()).toBe(200)
    expect(callsTo("primary")).toBe(3)

    // Cooling down: the primary is not tried.
    expect(yield* ask()).toBe(200)
    expect(callsTo("primary")).toBe(3)

    // The first cooldown is 30 s (src/routing/health.ts): after it the primary answers again.
    yield* TestClock.adjust("30 seconds")
    expect(yield* ask()).toBe(200)
    expect(callsTo("primary")).toBe(4)
    expect(fake.received().at(-1)?.provider).toBe("primary")
  }).pipe(Effect.provide(TestGateway.layer({ catalog })), Effect.runPromise))
