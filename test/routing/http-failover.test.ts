/**
 * Failover before the first byte against the mock upstream: each retryable failure kind moves
 * to the next endpoint (recorded in `service_metadata.attempts`, billed at the endpoint that
 * answered); request-shaped failures return at once; an endpoint that keeps failing cools down.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { parseSse } from "../support/sse.js"
import {
  calledSince,
  catalogOf,
  closedPort,
  costAt,
  endpoint,
  type Gateway,
  mockProvider,
  model,
  ok,
  refused,
  startGateway,
  TAG,
} from "./helpers.js"

let mock: MockUpstream
let gw: Gateway

/** Failing provider → the status its attempt records. */
const RETRYABLE: ReadonlyArray<{ readonly kind: string; readonly status: number }> = [
  { kind: "429", status: 429 },
  { kind: "500", status: 500 },
  { kind: "503", status: 503 },
  { kind: "529", status: 529 },
  { kind: "hang", status: 524 },
  { kind: "refused", status: 502 },
  { kind: "context_length", status: 400 },
]

/** Failing provider → the caller's status, with no fallback. */
const FINAL: ReadonlyArray<{ readonly kind: string; readonly status: number }> = [
  { kind: "400", status: 400 },
  { kind: "401", status: 502 },
  { kind: "403", status: 502 },
  { kind: "404", status: 400 },
]

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  const refusedPort = await closedPort()
  const failing = (kind: string) => {
    const id = `f-${kind}`
    if (kind === "hang") return mockProvider(mock, id, { "x-mock-error": "hang" }, { timeout_ms: 200 })
    if (kind === "refused") return mockProvider(mock, id, {}, { base_url: `http://127.0.0.1:${refusedPort}/v1` })
    // The mock has no route under /nope: a 404 from the upstream.
    if (kind === "404") return mockProvider(mock, id, {}, { base_url: `${mock.url}/nope` })
    return mockProvider(mock, id, { "x-mock-error": kind })
  }
  const kinds = [...RETRYABLE, ...FINAL].map((k) => k.kind)
  gw = await startGateway(
    catalogOf(
      [
        mockProvider(mock, "ok"),
        ...kinds.map(failing),
        mockProvider(mock, "cool-bad", { "x-mock-error": "500" }),
        mockProvider(mock, "cool-ok"),
      ],
      [
        // The failing endpoint is the cheaper one, so `sort: price` tries it first.
        ...kinds.map((kind) => model(`fail/${kind}`, endpoint(`f-${kind}`, 1, 1), endpoint("ok", 2, 4))),
        model("t/cool", endpoint("cool-bad", 1, 1), endpoint("cool-ok", 3, 5)),
      ],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const byPrice = { provider: { sort: "price" } }

describe("failover before the first byte", () => {
  for (const { kind, status } of RETRYABLE) {
    test(`a ${kind} moves to the next endpoint, which answers and is billed`, async () => {
      const from = mock.requests.length
      const answer = await ok(gw, { model: `fail/${kind}`, ...byPrice })
      expect(answer.meta.attempts).toEqual([
        { model: `fail/${kind}`, provider: `f-${kind}`, status },
        { model: `fail/${kind}`, provider: "ok", status: 200 },
      ])
      expect(answer.meta.attempt).toBe(1)
      expect(answer.servedBy).toBe("ok")
      expect(answer.cost).toBeCloseTo(costAt(2, 4), 12)
      // A refused connection never reaches the mock; every other failing call does.
      expect(calledSince(mock, from)).toEqual(kind === "refused" ? ["ok"] : [`f-${kind}`, "ok"])
    })
  }

  test("a streamed request fails over the same way before its first byte", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "fail/503", input: "hello", stream: true, ...byPrice },
      headers: { "x-service-metadata": "enabled" },
    })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    const completed = events.find((e) => e.json?.type === "response.completed")?.json?.response as {
      usage: { cost: number }
      service_metadata: { attempts: Array<{ provider: string; status: number }> }
    }
    expect(completed.service_metadata.attempts.map((a) => [a.provider, a.status])).toEqual([
      ["f-503", 503],
      ["ok", 200],
    ])
    expect(completed.usage.cost).toBeCloseTo(costAt(2, 4), 12)
  })

  test("the generation record names the endpoint that answered and its cost", async () => {
    const answer = await ok(gw, { model: "fail/529", ...byPrice })
    await gw.server.drain()
    const res = await gw.fetch(`/v1/generation?id=${answer.generationId}`)
    const g = ((await res.json()) as { data: { provider_name: string; total_cost: number } }).data
    expect(g.provider_name).toBe("ok")
    expect(g.total_cost).toBeCloseTo(costAt(2, 4), 12)
  })

  for (const { kind, status } of FINAL) {
    test(`a ${kind} from the upstream returns at once (${status}), without trying the next endpoint`, async () => {
      const from = mock.requests.length
      const error = await refused(gw, { model: `fail/${kind}`, ...byPrice })
      expect(error.status).toBe(status)
      expect(error.message).toContain(`f-${kind}`)
      expect(calledSince(mock, from)).not.toContain("ok")
    })
  }
})

describe("cooldown", () => {
  test("after 3 consecutive failures an endpoint is skipped (moved last) instead of tried first", async () => {
    const from = mock.requests.length
    for (let i = 0; i < 3; i++) {
      const answer = await ok(gw, { model: "t/cool", ...byPrice })
      expect(answer.meta.attempts.map((a) => a.provider)).toEqual(["cool-bad", "cool-ok"])
    }
    for (let i = 0; i < 3; i++) {
      const answer = await ok(gw, { model: "t/cool", ...byPrice })
      expect(answer.meta.attempts).toEqual([{ model: "t/cool", provider: "cool-ok", status: 200 }])
      // Still a candidate, as the last resort.
      expect(answer.meta.endpoints.available.map((e) => e.provider)).toEqual(["cool-ok", "cool-bad"])
      expect(answer.cost).toBeCloseTo(costAt(3, 5), 12)
    }
    expect(calledSince(mock, from).filter((tag) => tag === "cool-bad")).toHaveLength(3)
    // The mock log also shows the tag header reached the upstream unchanged.
    expect(mock.requests[mock.requests.length - 1]?.headers[TAG]).toBe("cool-ok")
  })
})
