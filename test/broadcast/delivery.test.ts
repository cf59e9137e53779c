/**
 * Broadcast delivery: a generation reaches each destination that wants it as
 * one OTLP/HTTP JSON trace, with the kind's URL and auth, over loopback receivers; privacy mode
 * and the three broadcast_* switches shape what is sent; the request's `trace` shapes the ids.
 */
import { afterAll, beforeAll, describe, expect } from "bun:test"
import { TEST_BROADCAST } from "../../src/config/Config.js"
import { startInProcessGateway, type InProcessGateway, TEST_METRICS_TOKEN } from "../support/gateway.js"
import {
  ask,
  attr,
  type OtlpSpan,
  type Received,
  resourceOf,
  rootsBy,
  setBroadcast,
  spansIn,
  startReceiver,
  TIMEOUT_MS,
  test,
  useDestinations,
  waitFor,
} from "./support.js"

let gw: InProcessGateway & { stop: () => Promise<void> }
const receiver = startReceiver()

beforeAll(async () => {
  gw = await startInProcessGateway({ allowPrivateAddresses: true, broadcast: { ...TEST_BROADCAST, pollMs: 50, retryBaseMs: 100 } })
  await setBroadcast(gw, true)
}, TIMEOUT_MS)
afterAll(async () => {
  await gw.stop()
  receiver.stop()
})
// Each test's destinations go: the workspace's next generations are not theirs.
const destination = useDestinations(() => gw, receiver)

const collector = (extra: Record<string, unknown> = {}) =>
  destination({ name: "collector", type: "otel-collector", config: { endpoint: `${receiver.url}/otel` }, ...extra })

/** The request that carried generation `id`, and its root span. */
const arrival = async (id: string): Promise<{ request: Received; root: OtlpSpan }> => {
  await waitFor(() => rootsBy(receiver.received).has(id), 10_000, `generation ${id} at the receiver`)
  const request = receiver.received.find((r) => rootsBy([r]).has(id)) as Received
  return { request, root: rootsBy([request]).get(id) as OtlpSpan }
}

describe("otel-collector", () => {
  test("a generation arrives at {endpoint}/v1/traces as OTLP JSON with the collector's headers", async () => {
    await destination({
      name: "collector",
      type: "otel-collector",
      config: { endpoint: `${receiver.url}/otel`, headers: { "x-collector-token": "tok-123" } },
    })
    const generation = await ask(gw, { input: "hello broadcast", session_id: "s-1", user: "end-user-7" })
    const { request, root } = await arrival(generation)
    expect(request.method).toBe("POST")
    expect(request.path).toBe("/otel/v1/traces")
    expect(request.headers.get("x-collector-token")).toBe("tok-123")
    expect(request.headers.get("content-type")).toBe("application/json")
    const resource = resourceOf(request.body)
    expect(resource?.attributes.find((a) => a.key === "service.name")?.value).toEqual({ stringValue: "gateway" })
    expect(attr(root, "gen_ai.operation.name")).toBe("chat")
    expect(attr(root, "gen_ai.request.model")).toBe("demo/free")
    expect(attr(root, "gen_ai.response.model")).toBe("echo")
    expect(attr(root, "gen_ai.provider.name")).toBe("fake")
    expect(attr(root, "gen_ai.response.id")).toBe(generation)
    expect(attr(root, "gen_ai.response.finish_reasons")).toEqual(["stop"])
    expect(attr(root, "session.id")).toBe("s-1")
    expect(attr(root, "user.id")).toBe("end-user-7")
    // The record's counts: the fake's token per 4 characters of "hello broadcast", and a word of "Echo: hello broadcast".
    expect(attr(root, "gen_ai.usage.input_tokens")).toBe(4)
    expect(attr(root, "gen_ai.usage.output_tokens")).toBe(3)
    const input = JSON.parse(String(attr(root, "gen_ai.input.messages"))) as Array<{ role: string; parts: Array<{ content: string }> }>
    expect(input.at(-1)).toEqual({ role: "user", parts: [{ type: "text", content: "hello broadcast" }] } as never)
    expect(String(attr(root, "gen_ai.output.messages"))).toContain("Echo: hello broadcast")
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(root.spanId).toMatch(/^[0-9a-f]{16}$/)
    // One child span per upstream attempt.
    const children = spansIn(request.body).filter((s) => s.parentSpanId === root.spanId)
    expect(children.length).toBe(1)
    expect(attr(children[0] as OtlpSpan, "gen_ai.provider.name")).toBe("fake")
    expect(attr(children[0] as OtlpSpan, "http.response.status_code")).toBe(200)
  })

  test("a failover shows one child span per attempt, the failed one with its status", async () => {
    await collector()
    const generation = await ask(gw, { model: "demo/fallback", input: "fail over" })
    const { request, root } = await arrival(generation)
    const children = spansIn(request.body).filter((s) => s.parentSpanId === root.spanId)
    expect(children.map((c) => attr(c, "gen_ai.provider.name"))).toEqual(["flaky", "fake-backup"])
    expect(children.map((c) => attr(c, "http.response.status_code"))).toEqual([503, 200])
  })
})

describe("webhook", () => {
  test("the OTLP JSON body goes to url by its method with its headers", async () => {
    await destination({
      name: "hook",
      type: "webhook",
      config: { url: `${receiver.url}/hook/in`, method: "PUT", headers: { authorization: "Bearer hook-secret" } },
    })
    const generation = await ask(gw, { input: "to the webhook" })
    const { request } = await arrival(generation)
    expect(request.method).toBe("PUT")
    expect(request.path).toBe("/hook/in")
    expect(request.headers.get("authorization")).toBe("Bearer hook-secret")
    expect(Array.isArray((JSON.parse(request.body) as { resourceSpans: unknown }).resourceSpans)).toBe(true)
  })
})

describe("langfuse", () => {
  test("its OTLP endpoint under baseUrl, with Basic auth of publicKey:secretKey", async () => {
    await destination({
      name: "lf",
      type: "langfuse",
      config: { publicKey: "pk-lf-public-1234", secretKey: "sk-lf-secret-5678", baseUrl: `${receiver.url}/lf/` },
    })
    const generation = await ask(gw, { input: "to langfuse" })
    const { request, root } = await arrival(generation)
    expect(request.path).toBe("/lf/api/public/otel/v1/traces")
    expect(request.headers.get("authorization")).toBe(`Basic ${Buffer.from("pk-lf-public-1234:sk-lf-secret-5678").toString("base64")}`)
    expect(attr(root, "gen_ai.response.id")).toBe(generation)
  })
})

describe("privacy mode", () => {
  test("no prompt or completion; tokens, cost, timing and model still go", async () => {
    await collector({ privacy_mode: true })
    const generation = await ask(gw, { input: "very private words" })
    const { request, root } = await arrival(generation)
    expect(request.body).not.toContain("very private words")
    expect(attr(root, "gen_ai.input.messages")).toBeUndefined()
    expect(attr(root, "gen_ai.output.messages")).toBeUndefined()
    // "very private words": 18 characters, 5 of the fake's tokens; demo/free costs nothing.
    expect(attr(root, "gen_ai.usage.input_tokens")).toBe(5)
    expect(attr(root, "gateway.cost.total_usd")).toBe(0)
    expect(attr(root, "gateway.generation.duration_ms")).toBeNumber()
    expect(attr(root, "gen_ai.request.model")).toBe("demo/free")
  })

  test("content is sent even when the workspace does not store it", async () => {
    await collector()
    const generation = await ask(gw, { input: "not stored but broadcast" })
    expect((await gw.fetch(`/v1/generation/content?id=${generation}`)).status).toBe(404)
    const { root } = await arrival(generation)
    expect(String(attr(root, "gen_ai.input.messages"))).toContain("not stored but broadcast")
  })
})

describe("broadcast switches", () => {
  test("on (the default): cost, identity and request context groups are present", async () => {
    await collector()
    const generation = await ask(gw, { model: "demo/echo", input: "all groups", temperature: 0.5, max_output_tokens: 50 })
    const { root } = await arrival(generation)
    expect(typeof attr(root, "gateway.cost.total_usd")).toBe("number")
    expect(typeof attr(root, "gateway.cost.input_usd")).toBe("number")
    expect(typeof attr(root, "gateway.price.prompt_per_mtok_usd")).toBe("number")
    expect(typeof attr(root, "gateway.api_key.name")).toBe("string")
    expect(String(attr(root, "gateway.api_key.hash_prefix"))).toMatch(/^[0-9a-f]{8}$/)
    expect(typeof attr(root, "gateway.workspace.id")).toBe("string")
    expect(attr(root, "gen_ai.request.temperature")).toBe(0.5)
    expect(attr(root, "gen_ai.request.max_tokens")).toBe(50)
    expect(attr(root, "gateway.routing.attempts")).toBe(1)
    expect(typeof attr(root, "gateway.routing.strategy")).toBe("string")
  })

  for (const [flag, probe] of [
    ["broadcast_generation_cost", "gateway.cost.total_usd"],
    ["broadcast_generation_identity", "gateway.api_key.hash_prefix"],
    ["broadcast_generation_request_context", "gen_ai.request.temperature"],
  ] as const) {
    test(`${flag} off: its group is absent, the others stay`, async () => {
      await collector({ [flag]: false })
      const generation = await ask(gw, { input: `without ${flag}`, temperature: 0.5 })
      const { root } = await arrival(generation)
      expect(attr(root, probe)).toBeUndefined()
      for (const other of ["gateway.cost.total_usd", "gateway.api_key.hash_prefix", "gen_ai.request.temperature"]) {
        if (other !== probe) expect(attr(root, other)).toBeDefined()
      }
    })
  }
})

describe("the request's trace object", () => {
  test("valid hex ids are used as given; names shape the spans; other keys become trace.metadata.*", async () => {
    await collector()
    const traceId = "0af7651916cd43dd8448eb211c80319c"
    const parent = "b7ad6b7169203331"
    const generation = await ask(gw, {
      input: "traced",
      trace: { trace_id: traceId, parent_span_id: parent, trace_name: "checkout", span_name: "answer", generation_name: "gen-1", env: "prod", n: 3 },
    })
    const { root } = await arrival(generation)
    expect(root.traceId).toBe(traceId)
    expect(root.parentSpanId).toBe(parent)
    expect(root.name).toBe("answer")
    expect(attr(root, "trace.name")).toBe("checkout")
    expect(attr(root, "generation.name")).toBe("gen-1")
    expect(attr(root, "trace.metadata.env")).toBe("prod")
    expect(attr(root, "trace.metadata.n")).toBe("3")
  })

  test("ids that are not valid hex are hashed, the originals kept as attributes", async () => {
    await collector()
    const generation = await ask(gw, { input: "odd ids", trace: { trace_id: "order-42", parent_span_id: "step-1" } })
    const { root } = await arrival(generation)
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(root.parentSpanId).toMatch(/^[0-9a-f]{16}$/)
    expect(attr(root, "trace.original.trace_id")).toBe("order-42")
    expect(attr(root, "trace.original.parent_span_id")).toBe("step-1")
    // The same given id gives the same trace: two requests of one trace land together.
    const second = await ask(gw, { input: "odd ids again", trace: { trace_id: "order-42" } })
    const again = await arrival(second)
    expect(again.root.traceId).toBe(root.traceId)
  })
})

describe("POST /observability/destinations/{id}/test", () => {
  test("a reachable receiver: ok with its status", async () => {
    const id = await collector()
    const res = await gw.fetch(`/v1/observability/destinations/${id}/test`, { method: "POST" })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ data: { ok: true, status: 200, message: "delivered (HTTP 200)" } })
    expect(receiver.received.length).toBe(1)
  })

  test("a failing receiver: not ok, the status class, never the receiver's body", async () => {
    const id = await collector()
    receiver.respond(500)
    const body = (await (await gw.fetch(`/v1/observability/destinations/${id}/test`, { method: "POST" })).json()) as {
      data: { ok: boolean; status: number; message: string }
    }
    expect(body.data.ok).toBe(false)
    expect(body.data.status).toBe(500)
    expect(body.data.message).toContain("server error")
    expect(body.data.message).not.toContain("receiver secret body")
  })

  test("a kind without delivery answers 400 saying so", async () => {
    const id = await destination({ name: "rampy", type: "ramp", config: { apiKey: "ramp-key-0123456789" } })
    const res = await gw.fetch(`/v1/observability/destinations/${id}/test`, { method: "POST" })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("not supported")
  })
})

describe("status and metrics", () => {
  test("each destination read carries delivery {last_success_at, last_error, last_error_at, pending, dead}; /metrics counts", async () => {
    const id = await collector()
    const generation = await ask(gw, { input: "status" })
    await arrival(generation)
    await waitFor(async () => {
      const body = (await (await gw.fetch(`/v1/observability/destinations/${id}`)).json()) as { data: { delivery: { last_success_at: unknown } } }
      return body.data.delivery.last_success_at !== null
    })
    const body = (await (await gw.fetch(`/v1/observability/destinations/${id}`)).json()) as { data: { delivery: Record<string, unknown> } }
    expect(Object.keys(body.data.delivery).sort()).toEqual(["dead", "last_error", "last_error_at", "last_success_at", "pending"])
    expect(body.data.delivery.pending).toBe(0)
    const metrics = await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="otel-collector",outcome="delivered"\} [1-9]/)
    expect(metrics).toContain("gateway_broadcast_queue_depth ")
    expect(metrics).toContain("gateway_broadcast_lag_seconds ")
  })
})
