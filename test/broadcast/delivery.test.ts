/**
 * Broadcast delivery (issue 25 §1, §2): a generation reaches each destination that wants it as
 * one OTLP/HTTP JSON trace, with the vendor's URL and auth, over a loopback receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { DEFAULT_BROADCAST } from "../../src/config/Config.js"
import { type TestGateway, startTestGateway } from "../support/gateway.js"
import { ask, attr, createDestination, type Receiver, resourceOf, rootsBy, setBroadcast, spansIn, startReceiver, waitFor } from "./support.js"

let gw: TestGateway & { stop: () => Promise<void> }
let receiver: Receiver

beforeAll(async () => {
  receiver = startReceiver()
  gw = await startTestGateway({ allowPrivateAddresses: true, broadcast: { ...DEFAULT_BROADCAST, pollMs: 50, retryBaseMs: 100 } })
})
afterAll(async () => {
  await gw.stop()
  receiver.stop()
})

describe("otel-collector", () => {
  test("a generation arrives at {endpoint}/v1/traces as OTLP JSON with the collector's headers", async () => {
    await setBroadcast(gw, true)
    const id = await createDestination(gw, {
      name: "collector",
      type: "otel-collector",
      config: { endpoint: `${receiver.url}/otel`, headers: { "x-collector-token": "tok-123" } },
    })
    const generation = await ask(gw, { input: "hello broadcast", session_id: "s-1", user: "end-user-7" })
    await waitFor(() => rootsBy(receiver.received).has(generation), 10_000, "the trace")
    const request = receiver.received.find((r) => rootsBy([r]).has(generation))!
    expect(request.method).toBe("POST")
    expect(request.path).toBe("/otel/v1/traces")
    expect(request.headers.get("x-collector-token")).toBe("tok-123")
    expect(request.headers.get("content-type")).toBe("application/json")
    const resource = resourceOf(request.body)!
    expect(resource.attributes.find((a) => a.key === "service.name")?.value).toEqual({ stringValue: "gateway" })
    const root = rootsBy([request]).get(generation)!
    expect(attr(root, "gen_ai.operation.name")).toBe("chat")
    expect(attr(root, "gen_ai.request.model")).toBe("demo/free")
    expect(attr(root, "gen_ai.provider.name")).toBe("fake")
    expect(attr(root, "session.id")).toBe("s-1")
    expect(attr(root, "user.id")).toBe("end-user-7")
    expect(attr(root, "gen_ai.usage.input_tokens")).toBeGreaterThan(0)
    expect(String(attr(root, "gen_ai.input.messages"))).toContain("hello broadcast")
    const children = spansIn(request.body).filter((s) => s.parentSpanId === root.spanId)
    expect(children.length).toBe(1)
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/)
    const status = (await (await gw.fetch(`/v1/observability/destinations/${id}`)).json()) as { data: { delivery: Record<string, unknown> } }
    await waitFor(async () => {
      const s = (await (await gw.fetch(`/v1/observability/destinations/${id}`)).json()) as { data: { delivery: { last_success_at: unknown } } }
      return s.data.delivery.last_success_at !== null
    })
    expect(status.data.delivery.dead).toBe(0)
  })
})
