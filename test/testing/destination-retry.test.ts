import { expect, test } from "bun:test"
import { Effect, TestClock } from "effect"
import { eventually, TestGateway } from "gateway/testing"

test("a destination gets its trace after a retry, by the clock", () =>
  Effect.gen(function* () {
    // The destination's collector: down (503) for the first send, then up.
    const bodies: Array<string> = []
    const collector = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (req) => {
        bodies.push(await req.text())
        return new Response("{}", { status: bodies.length === 1 ? 503 : 200 })
      },
    })
    yield* Effect.addFinalizer(() => Effect.promise(() => collector.stop(true)))

    const gateway = yield* TestGateway.client
    const call = (path: string, method: string, json?: unknown) =>
      Effect.promise(async () => (await gateway.request(path, { method, json })).json() as Promise<{ data: Record<string, unknown> }>)
    const { data: key } = yield* call("/v1/key", "GET")
    yield* call(`/v1/workspaces/${key.workspace_id}`, "PATCH", { is_observability_broadcast_enabled: true })
    yield* call("/v1/observability/destinations", "POST", {
      name: "collector",
      type: "otel-collector",
      config: { endpoint: `http://127.0.0.1:${collector.port}` },
    })

    const answer = yield* Effect.promise(() => gateway.request("/v1/responses", { method: "POST", json: { model: "demo/free", input: "Hi" } }))
    const generationId = answer.headers.get("x-generation-id") as string
    yield* Effect.promise(() => gateway.drain())

    // The first send is refused; the retry waits for the clock (retry_base_ms, 1 s by default).
    yield* Effect.promise(() => eventually(() => bodies.length === 1, 10_000, "the first send"))
    yield* Effect.promise(() => Bun.sleep(500))
    expect(bodies.length).toBe(1)

    yield* TestClock.adjust("1 second")
    yield* Effect.promise(() => eventually(() => bodies.length === 2, 10_000, "the retry"))
    expect(bodies[1]).toContain(generationId)
  }).pipe(
    Effect.scoped,
    Effect.provide(TestGateway.layer({ settings: { allowPrivateAddresses: true } })),
    Effect.runPromise,
  ))
