/**
 * The `provider` preferences and model suffixes end to end: which endpoint the mock upstream
 * saw, what `service_metadata` says, what was charged, and the 404 when filters leave nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import {
  calledSince,
  catalogOf,
  costAt,
  endpoint,
  type Gateway,
  mockProvider,
  model,
  ok,
  refused,
  startGateway,
} from "./helpers.js"

let mock: MockUpstream
let gw: Gateway

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  const plain = ["p-cheap", "p-mid", "p-dear", "p-free", "p-collect", "p-zdr", "p-tools", "o-mid", "o-dear"]
  gw = await startGateway(
    catalogOf(
      [
        ...plain.map((id) => mockProvider(mock, id)),
        mockProvider(mock, "f-fail", { "x-mock-error": "500" }),
        mockProvider(mock, "thr-slow", { "x-mock-tokens": "5", "x-mock-interval-ms": "40" }),
        mockProvider(mock, "thr-fast", { "x-mock-tokens": "5", "x-mock-interval-ms": "5" }),
        mockProvider(mock, "lat-slow", { "x-mock-ttft-ms": "250" }),
        mockProvider(mock, "lat-fast"),
      ],
      [
        model("t/multi", endpoint("p-cheap", 1, 1), endpoint("p-mid", 2, 2), endpoint("p-dear", 30, 60)),
        model("t/other", endpoint("o-mid", 0.25, 0.25), endpoint("o-dear", 3, 3)),
        model("t/free", endpoint("p-cheap", 1, 1), endpoint("p-free", 0, 0)),
        model(
          "t/policy",
          endpoint("p-collect", 1, 1, { data_collection: "allow" }),
          endpoint("p-zdr", 2, 2, { zdr: true }),
          endpoint("p-tools", 3, 3, { supports: ["tools", "json_schema"] }),
        ),
        model("t/order", endpoint("f-fail", 1, 1), endpoint("p-mid", 2, 2), endpoint("p-dear", 3, 3)),
        model("t/speed", endpoint("thr-slow", 1, 1), endpoint("thr-fast", 2, 2)),
        model("t/latency", endpoint("lat-slow", 1, 1), endpoint("lat-fast", 2, 2)),
      ],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

/** One streamed request (the stats need a stream's first token and pace). */
const streamOnce = async (json: Record<string, unknown>) => {
  const res = await gw.fetch("/v1/responses", { method: "POST", json: { input: "hello", stream: true, ...json } })
  expect(res.status).toBe(200)
  await res.text()
}

describe("provider.only, ignore, order, allow_fallbacks", () => {
  test("only keeps the listed providers", async () => {
    const from = mock.requests.length
    const answer = await ok(gw, { model: "t/multi", provider: { only: ["p-dear"] } })
    expect(answer.servedBy).toBe("p-dear")
    expect(answer.meta.endpoints.total).toBe(1)
    expect(answer.cost).toBeCloseTo(costAt(30, 60), 12)
    expect(calledSince(mock, from)).toEqual(["p-dear"])
  })

  test("ignore removes providers", async () => {
    const answer = await ok(gw, { model: "t/multi", provider: { ignore: ["p-cheap", "p-mid"] } })
    expect(answer.servedBy).toBe("p-dear")
    expect(answer.meta.endpoints.available.map((e) => e.provider)).toEqual(["p-dear"])
  })

  test("order is tried first, in order, then the others as fallbacks", async () => {
    const answer = await ok(gw, { model: "t/multi", provider: { order: ["p-dear", "p-mid"] } })
    expect(answer.servedBy).toBe("p-dear")
    expect(answer.meta.endpoints.available.map((e) => e.provider)).toEqual(["p-dear", "p-mid", "p-cheap"])
    expect(answer.meta.strategy).toBe("order")
  })

  test("allow_fallbacks: false keeps only the ordered providers (and fails over among them)", async () => {
    const answer = await ok(gw, { model: "t/order", provider: { order: ["f-fail", "p-dear"], allow_fallbacks: false } })
    expect(answer.meta.attempts.map((a) => [a.provider, a.status])).toEqual([
      ["f-fail", 500],
      ["p-dear", 200],
    ])
    expect(answer.meta.endpoints.total).toBe(2)
    const only = await refused(gw, { model: "t/order", provider: { order: ["f-fail"], allow_fallbacks: false } })
    expect(only.status).toBe(502)
  })

  test("allow_fallbacks: false without an order tries only the first choice", async () => {
    const answer = await ok(gw, { model: "t/multi", provider: { allow_fallbacks: false, sort: "price" } })
    expect(answer.meta.endpoints.available).toEqual([{ model: "t/multi", provider: "p-cheap", selected: true }])
  })
})

describe("provider.sort", () => {
  test("price sorts within each model by default; partition none sorts all endpoints together", async () => {
    const byModel = await ok(gw, { model: "t/multi", models: ["t/other"], provider: { sort: { by: "price", partition: "model" } } })
    expect(byModel.model).toBe("t/multi")
    expect(byModel.meta.endpoints.available.map((e) => e.provider)).toEqual(["p-cheap", "p-mid", "p-dear", "o-mid", "o-dear"])
    const together = await ok(gw, { model: "t/multi", models: ["t/other"], provider: { sort: { by: "price", partition: "none" } } })
    expect(together.model).toBe("t/other")
    expect(together.servedBy).toBe("o-mid")
    expect(together.cost).toBeCloseTo(costAt(0.25, 0.25), 12)
    expect(together.meta.endpoints.available.map((e) => e.provider)).toEqual(["o-mid", "p-cheap", "p-mid", "o-dear", "p-dear"])
  })

  test("latency: the endpoint with the lower rolling time to first token first; unknown stats by price", async () => {
    const before = await ok(gw, { model: "t/latency", provider: { sort: "latency" } })
    // Neither has stats yet: price order, deterministically.
    expect(before.meta.endpoints.available.map((e) => e.provider)).toEqual(["lat-slow", "lat-fast"])
    await streamOnce({ model: "t/latency", provider: { only: ["lat-fast"] } })
    const known = await ok(gw, { model: "t/latency", provider: { sort: "latency" } })
    expect(known.servedBy).toBe("lat-fast")
    expect(known.meta.strategy).toBe("sort:latency")
  })

  test("throughput and :nitro prefer the faster stream; :floor the cheaper endpoint", async () => {
    await streamOnce({ model: "t/speed", provider: { only: ["thr-slow"] } })
    await streamOnce({ model: "t/speed", provider: { only: ["thr-fast"] } })
    const sorted = await ok(gw, { model: "t/speed", provider: { sort: "throughput" } })
    expect(sorted.servedBy).toBe("thr-fast")
    const nitro = await ok(gw, { model: "t/speed:nitro" })
    expect(nitro.servedBy).toBe("thr-fast")
    expect(nitro.model).toBe("t/speed")
    expect(nitro.meta.requested).toBe("t/speed:nitro")
    expect(nitro.meta.strategy).toBe("sort:throughput")
    const floor = await ok(gw, { model: "t/speed:floor" })
    expect(floor.servedBy).toBe("thr-slow")
    expect(floor.meta.strategy).toBe("sort:price")
  })
})

describe(":free", () => {
  test("only endpoints priced zero; nothing is charged", async () => {
    const answer = await ok(gw, { model: "t/free:free" })
    expect(answer.servedBy).toBe("p-free")
    expect(answer.meta.endpoints.total).toBe(1)
    expect(answer.cost).toBe(0)
  })

  test("a model without a free endpoint is 404 saying so", async () => {
    const error = await refused(gw, { model: "t/multi:free" })
    expect(error.status).toBe(404)
    expect(error.message).toContain(":free")
  })
})

describe("provider.max_price", () => {
  test("endpoints over the maximum are excluded (numbers or numeric strings)", async () => {
    const answer = await ok(gw, { model: "t/multi", provider: { max_price: { prompt: 5, completion: "5" }, sort: "throughput" } })
    expect(answer.meta.endpoints.available.map((e) => e.provider).sort()).toEqual(["p-cheap", "p-mid"])
  })

  test("none left is 404 with a message that says which limit removed which endpoint", async () => {
    const error = await refused(gw, { model: "t/multi", provider: { max_price: { prompt: "0.5" } } })
    expect(error.status).toBe(404)
    expect(error.message).toContain("provider.max_price (prompt ≤ $0.5/M)")
    expect(error.message).toContain("p-cheap (prompt $1/M over the maximum)")
    expect(error.message).toContain("p-dear (prompt $30/M over the maximum)")
  })
})

describe("provider.require_parameters, data_collection, zdr", () => {
  test("require_parameters keeps endpoints that support the request's tools and json_schema", async () => {
    const tools = [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} } }]
    const withTools = await ok(gw, { model: "t/policy", tools, provider: { require_parameters: true } })
    expect(withTools.meta.endpoints.available.map((e) => e.provider)).toEqual(["p-tools"])
    const schema = { format: { type: "json_schema", name: "x", schema: { type: "object" } } }
    const withSchema = await ok(gw, { model: "t/policy", text: schema, provider: { require_parameters: true } })
    expect(withSchema.servedBy).toBe("p-tools")
    // Without the flag every endpoint stays.
    const loose = await ok(gw, { model: "t/policy", tools })
    expect(loose.meta.endpoints.total).toBe(3)
  })

  test("require_parameters with reasoning no endpoint supports is 404 naming the capability", async () => {
    const error = await refused(gw, { model: "t/policy", reasoning: { effort: "high" }, provider: { require_parameters: true } })
    expect(error.status).toBe(404)
    expect(error.message).toContain("lacks reasoning")
  })

  test("data_collection: deny excludes endpoints that may collect; zdr: true keeps zero-retention ones", async () => {
    const deny = await ok(gw, { model: "t/policy", provider: { data_collection: "deny" } })
    expect(deny.meta.endpoints.available.map((e) => e.provider).sort()).toEqual(["p-tools", "p-zdr"])
    const zdr = await ok(gw, { model: "t/policy", provider: { zdr: true } })
    expect(zdr.meta.endpoints.available.map((e) => e.provider)).toEqual(["p-zdr"])
    expect(zdr.cost).toBeCloseTo(costAt(2, 2), 12)
    const none = await refused(gw, { model: "t/policy", provider: { zdr: true, ignore: ["p-zdr"] } })
    expect(none.status).toBe(404)
    expect(none.message).toContain("provider.zdr: true removed")
  })
})

describe("the default order", () => {
  test("spreads requests by 1/price² and keeps the others as fallbacks", async () => {
    const counts = new Map<string, number>()
    for (let i = 0; i < 60; i++) {
      const answer = await ok(gw, { model: "t/multi" })
      counts.set(answer.servedBy!, (counts.get(answer.servedBy!) ?? 0) + 1)
      expect(answer.meta.endpoints.total).toBe(3)
      expect(answer.meta.strategy).toBe("direct")
    }
    // Weights 1/4, 1/16, 1/8100: p-cheap about 80 %, p-mid about 20 %.
    expect(counts.get("p-cheap") ?? 0).toBeGreaterThan(30)
    expect(counts.get("p-mid") ?? 0).toBeGreaterThan(0)
  })
})
