/**
 * The gateway's own traces: with OTEL_EXPORTER_OTLP_ENDPOINT set, a span per
 * request with a child per upstream attempt reaches the collector; headers only from the
 * allowlist, no prompt text; an incoming traceparent is ignored unless trusted. Unset: nothing.
 */
import { afterAll, describe, expect } from "bun:test"
import { tracingRequested } from "../../src/broadcast/own-traces.js"
import { startInProcessGateway } from "../support/gateway.js"
import { attr, spansIn, startReceiver, test, waitFor } from "./support.js"

const receiver = startReceiver()
afterAll(() => receiver.stop())

/** A gateway started with the OTel variables set (the exporter reads them when it is built), then unset for the rest of the run. */
const tracedGateway = async (trustTraceparent: boolean) => {
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `${receiver.url}/collector`
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50"
  try {
    return await startInProcessGateway({ trustTraceparent })
  } finally {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    delete process.env.OTEL_BSP_SCHEDULE_DELAY
  }
}

const INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

const traced = async (trust: boolean) => {
  receiver.received.length = 0
  const gw = await tracedGateway(trust)
  const res = await gw.fetch("/v1/responses", {
    method: "POST",
    json: { model: "demo/free", input: "top secret prompt words" },
    headers: { traceparent: INCOMING, "x-vendor-auth": "vendor-secret", "user-agent": "trace-test/1.0" },
  })
  expect(res.status).toBe(200)
  await res.text()
  await gw.stop()
  await waitFor(() => receiver.received.some((r) => r.path === "/collector/v1/traces"), 10_000, "the gateway's spans")
  return receiver.received.filter((r) => r.path === "/collector/v1/traces")
}

describe("the gateway's own traces", () => {
  test("a span per request with its upstream attempt; allowed headers only; no prompt text; traceparent ignored", async () => {
    const requests = await traced(false)
    const bodies = requests.map((r) => r.body).join("\n")
    expect(bodies).not.toContain("top secret prompt words")
    expect(bodies).not.toContain("vendor-secret")
    expect(bodies).not.toContain("Bearer")
    const spans = requests.flatMap((r) => spansIn(r.body))
    const root = spans.find((s) => s.name === "POST /v1/responses")
    expect(root).toBeDefined()
    if (root === undefined) return
    expect(attr(root, "http.response.status_code")).toBe(200)
    expect(attr(root, "gen_ai.provider.name")).toBe("fake")
    expect(attr(root, "http.request.header.user-agent")).toBe("trace-test/1.0")
    expect(root.traceId).not.toBe("4bf92f3577b34da6a3ce929d0e0e4736")
    const child = spans.find((s) => s.parentSpanId === root.spanId)
    expect(child?.name).toBe("upstream fake")
  })

  test("a trusted traceparent is continued", async () => {
    const requests = await traced(true)
    const root = requests.flatMap((r) => spansIn(r.body)).find((s) => s.name === "POST /v1/responses")
    expect(root?.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736")
    expect(root?.parentSpanId).toBe("00f067aa0ba902b7")
  })

  test("unset: tracing is off", () => {
    expect(tracingRequested({})).toBe(false)
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toBe(true)
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" })).toBe(false)
  })
})
