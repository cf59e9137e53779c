import { expect, test } from "bun:test"
import { Effect } from "effect"
import { FakeProvider, TestGateway } from "gateway/testing"

test("response-healing turns the model's broken JSON into valid JSON and says so", () =>
  Effect.gen(function* () {
    const fake = yield* FakeProvider
    // The demo catalog's `fake` provider answers demo/free: its next answer is JSON in a code fence, cut short.
    fake.script("fake", FakeProvider.answer('Here it is:\n```json\n{"city": "Paris", "days": 3,\n```'))

    const gateway = yield* TestGateway.client
    const res = yield* Effect.promise(() =>
      gateway.request("/v1/chat/completions", {
        method: "POST",
        headers: { "x-service-metadata": "enabled" },
        json: {
          model: "demo/free",
          messages: [{ role: "user", content: "Plan a trip" }],
          response_format: { type: "json_object" },
          plugins: [{ id: "response-healing" }],
        },
      }),
    )
    const body = (yield* Effect.promise(() => res.json())) as {
      choices: Array<{ message: { content: string } }>
      service_metadata: { pipeline: Array<{ name: string; data: { changed: boolean; valid: boolean } }> }
    }

    expect(res.status).toBe(200)
    expect(JSON.parse(body.choices[0]?.message.content ?? "")).toEqual({ city: "Paris", days: 3 })
    const healing = body.service_metadata.pipeline.find((entry) => entry.name === "response-healing")
    expect(healing?.data).toMatchObject({ changed: true, valid: true })
    // The upstream was asked for JSON: the plugin does not change the request.
    expect(fake.received("fake")[0]?.body.response_format).toEqual({ type: "json_object" })
  }).pipe(Effect.provide(TestGateway.layer()), Effect.runPromise))
