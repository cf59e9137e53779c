import { expect, test } from "bun:test"
import { Effect } from "effect"
import { FakeProvider, openaiClient, TestGateway } from "gateway/testing"

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

test("three chunks then a 503 on the first endpoint: the client gets the fallback's JSON answer", () =>
  Effect.gen(function* () {
    const fake = yield* FakeProvider
    fake.script("primary", FakeProvider.chunks(["The ", "first ", "answer"], { faultAfter: 3, fault: { status: 503 } }))
    fake.script("backup", FakeProvider.answer("From the fallback"))

    const openai = openaiClient(yield* TestGateway.client)
    const completion = yield* Effect.promise(() =>
      openai.chat.completions.create({ model: "acme/chat", messages: [{ role: "user", content: "Hello" }] }),
    )

    expect(completion.choices[0]?.message.content).toBe("From the fallback")
    expect(fake.received().map((call) => call.provider)).toEqual(["primary", "backup"])
    expect(fake.received("backup")[0]?.body.messages).toEqual([{ role: "user", content: "Hello" }])
  }).pipe(Effect.provide(TestGateway.layer({ catalog })), Effect.runPromise))
