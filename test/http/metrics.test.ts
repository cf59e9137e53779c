import { describe, expect, test } from "bun:test"
import { twoDecimals } from "../../src/pipeline/trace.js"
import { expectError, metricsAuth, startTestGateway, useGateway } from "../support/gateway.js"

/** Room for a test that starts a gateway of its own (seconds on Postgres on a busy machine). */
const GATEWAY_START_MS = 30_000

const gw = useGateway()

/** Pins demo/echo to one endpoint, so the provider label is known. */
const PINNED = { provider: { order: ["fake"] } }

const scrape = async () => {
  const res = await fetch(`${gw().url}/metrics`, { headers: metricsAuth })
  expect(res.status).toBe(200)
  expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4")
  return res.text()
}

/** The value of one sample line, e.g. `gateway_open_streams` or `name{labels}`. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

const RESPONSES_200 = 'gateway_http_requests_total{route="/v1/responses",method="POST",status="200"}'

describe("GET /metrics", () => {
  test("counts a JSON request and a stream, with upstream and overhead histograms", async () => {
    const before = (await scrape()).split("\n")
    expect(before).toContain("# TYPE gateway_http_requests_total counter")
    const json = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "count me", ...PINNED } })
    expect(json.status).toBe(200)
    await json.text()
    const stream = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "stream me please", stream: true, ...PINNED },
    })
    expect(stream.status).toBe(200)
    expect(await stream.text()).toEndWith("data: [DONE]\n\n")

    const text = await scrape()
    expect(sample(text, RESPONSES_200)).toBe(2)
    expect(sample(text, "gateway_streams_total")).toBe(1)
    expect(sample(text, "gateway_open_streams")).toBe(0)
    expect(sample(text, 'gateway_http_request_duration_seconds_count{route="/v1/responses",method="POST"}')).toBe(2)
    expect(sample(text, 'gateway_upstream_duration_seconds_count{provider="fake"}')).toBe(2)
    expect(sample(text, 'gateway_upstream_ttft_seconds_count{provider="fake"}')).toBe(2)
    expect(sample(text, "gateway_overhead_seconds_count")).toBe(2)
    expect(sample(text, 'gateway_overhead_seconds_bucket{le="+Inf"}')).toBe(2)
    // A gauge: the two requests' records wait for the group commit, or have been written already.
    expect([0, 1, 2]).toContain(sample(text, "gateway_ledger_queue_depth") ?? -1)
    // The two requests' key lookups: the first loads the key from the store, the second is answered from the cache.
    const delta = (series: string) => (sample(text, series) ?? 0) - (sample(before.join("\n"), series) ?? 0)
    expect(delta('gateway_key_cache_lookups_total{result="hit"}')).toBe(1)
    expect(delta('gateway_key_cache_lookups_total{result="miss"}')).toBe(1)
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(0)
    // Every sample line is `name{labels} value` or `name value` with a number.
    for (const line of text.trim().split("\n")) {
      if (line.startsWith("#")) continue
      expect(line).toMatch(/^[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+$/)
    }
  })

  test("an open stream is counted while it is relayed, and not after", async () => {
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "one two three four [slow:60]", stream: true, ...PINNED },
    })
    const reader = res.body!.getReader()
    await reader.read()
    expect(sample(await scrape(), "gateway_open_streams")).toBe(1)
    while (!(await reader.read()).done) {}
    expect(sample(await scrape(), "gateway_open_streams")).toBe(0)
  })

  test("control-plane requests are counted by route pattern and status", async () => {
    const series = 'gateway_http_requests_total{route="/v1/keys/:hash",method="GET",status="404"}'
    const before = sample(await scrape(), series) ?? 0
    expect((await gw().fetch("/v1/keys/nope")).status).toBe(404)
    expect(sample(await scrape(), series)).toBe(before + 1)
  })

  test("is refused with 401 without its bearer token, or with a wrong one", async () => {
    expect((await fetch(`${gw().url}/metrics`)).status).toBe(401)
    const wrong = await fetch(`${gw().url}/metrics`, { headers: { authorization: "Bearer not-the-metrics-token" } })
    expect(await expectError(wrong, 401)).toContain("metrics.token")
    // A key of the gateway is not the metrics token.
    expect((await gw().fetch("/metrics")).status).toBe(401)
  })

  test("a gateway without metrics.token does not serve /metrics to anyone, and says which setting serves it", async () => {
    const bare = await startTestGateway({ metricsToken: undefined })
    try {
      const res = await fetch(`${bare.url}/metrics`)
      const message = await expectError(res, 401)
      expect(message).toContain("metrics.token")
      expect(message).toContain("GATEWAY_METRICS_TOKEN")
    } finally {
      await bare.stop()
    }
  }, GATEWAY_START_MS)

  test("GATEWAY_METRICS=off: no /metrics endpoint", async () => {
    const off = await startTestGateway({ metrics: false })
    try {
      const res = await fetch(`${off.url}/metrics`)
      expect(res.status).toBe(404)
      expect(off.server.metrics).toBeUndefined()
    } finally {
      await off.stop()
    }
  })
})

describe("Server-Timing and request ids", () => {
  test("a model answer carries gateway and upstream durations and a request id", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "timing", ...PINNED } })
    await res.text()
    const timing = res.headers.get("server-timing") ?? ""
    expect(timing).toMatch(/^gw;dur=\d+\.\d\d, upstream;dur=\d+\.\d\d$/)
    expect(res.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{12}[0-9a-z]+$/)
  })

  test("a streamed answer carries them on its head, and a model answer keeps the caller's request id", async () => {
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "timing", stream: true, ...PINNED },
      headers: { "x-request-id": "trace-stream.1" },
    })
    await res.text()
    expect(res.headers.get("x-request-id")).toBe("trace-stream.1")
    expect(res.headers.get("server-timing")).toMatch(/^gw;dur=\d+\.\d\d, upstream;dur=\d+\.\d\d$/)
    expect(res.headers.get("x-generation-id")).toMatch(/^gen-/)
    const json = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "timing", ...PINNED },
      headers: { "x-request-id": "trace-json.1" },
    })
    await json.text()
    expect(json.headers.get("x-request-id")).toBe("trace-json.1")
    // One of each, whoever set them.
    expect(json.headers.get("server-timing")?.split("gw;dur=")).toHaveLength(2)
  })

  test("the caller's x-request-id is kept when it is a sane token, replaced otherwise", async () => {
    const kept = await gw().fetch("/v1/health", { headers: { "x-request-id": "trace-abc.123" } })
    expect(kept.headers.get("x-request-id")).toBe("trace-abc.123")
    expect(kept.headers.get("server-timing")).toMatch(/^gw;dur=\d+\.\d\d$/)
    const replaced = await gw().fetch("/v1/health", { headers: { "x-request-id": "bad id with spaces" } })
    expect(replaced.headers.get("x-request-id")).toMatch(/^req_/)
  })

  test("errors carry them too", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo" }, key: null })
    expect(res.status).toBe(401)
    expect(res.headers.get("x-request-id")).toMatch(/^req_/)
    expect(res.headers.get("server-timing")).toMatch(/^gw;dur=/)
  })
})

describe("twoDecimals", () => {
  test("writes what toFixed(2) writes, but for values exactly halfway in binary", () => {
    for (const ms of [0, 0.004, 0.006, 0.1, 0.125, 1, 1.999, 9.995001, 10, 99.99, 12.3456, 250.004, 999999.999]) {
      expect([ms, twoDecimals(ms)]).toEqual([ms, ms.toFixed(2)])
    }
    for (let i = 0; i < 10_000; i++) {
      const ms = Math.random() * 1000
      expect(Math.abs(Number(twoDecimals(ms)) - ms)).toBeLessThanOrEqual(0.005 + 1e-9)
      expect(twoDecimals(ms)).toMatch(/^\d+\.\d\d$/)
    }
    // Outside the plain range it is toFixed's text.
    for (const ms of [-0.5, -3, 1e12, Number.NaN, Number.POSITIVE_INFINITY]) expect(twoDecimals(ms)).toBe(ms.toFixed(2))
  })
})
