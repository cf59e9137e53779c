/**
 * Sticky sessions end to end: two equally priced endpoints, each behind its own mock upstream
 * so one can be taken down (connection refused) and brought back on the same port.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway } from "./helpers.js"

const mocks: Record<string, MockUpstream> = {}
let gw: Gateway

beforeAll(async () => {
  mocks["left"] = await startMockUpstream({ tokens: 3 })
  mocks["right"] = await startMockUpstream({ tokens: 3 })
  gw = await startGateway(
    catalogOf(
      [mockProvider(mocks["left"], "left"), mockProvider(mocks["right"], "right")],
      [model("t/pair", endpoint("left", 1, 1), endpoint("right", 1, 1))],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  for (const mock of Object.values(mocks)) await mock.stop()
})

const servedBy = async (json: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const res = await gw.fetch("/v1/responses", {
    method: "POST",
    json: { model: "t/pair", input: "hello", ...json },
    headers: { "x-service-metadata": "enabled", ...headers },
  })
  expect(res.status).toBe(200)
  const body = (await res.json()) as {
    service_metadata: { strategy: string; attempts: Array<{ provider: string; status: number }>; endpoints: { available: Array<{ provider: string; selected: boolean }> } }
  }
  const meta = body.service_metadata
  return { provider: meta.endpoints.available.find((e) => e.selected)!.provider, meta }
}

describe("sticky sessions", () => {
  test("without a session the two equally priced endpoints share the load", async () => {
    const seen = new Set<string>()
    for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await servedBy({})).provider)
    expect(seen).toEqual(new Set(["left", "right"]))
  })

  test("20 requests of one session land on one endpoint; when it fails the session moves and stays", async () => {
    const first = await servedBy({ session_id: "chat-1" })
    for (let i = 0; i < 19; i++) {
      const next = await servedBy({ session_id: "chat-1" })
      expect(next.provider).toBe(first.provider)
      expect(next.meta.strategy).toBe("sticky")
    }
    const other = first.provider === "left" ? "right" : "left"
    const down = mocks[first.provider]!
    const port = down.port
    await down.stop()
    const moved = await servedBy({ session_id: "chat-1" })
    expect(moved.provider).toBe(other)
    expect(moved.meta.attempts.map((a) => [a.provider, a.status])).toEqual([
      [first.provider, 502],
      [other, 200],
    ])
    // Back up on the same port and equally priced: the session still stays where it moved.
    mocks[first.provider] = await startMockUpstream({ tokens: 3, port })
    for (let i = 0; i < 10; i++) expect((await servedBy({ session_id: "chat-1" })).provider).toBe(other)
    // And the restored endpoint serves again outside the session.
    const seen = new Set<string>()
    for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await servedBy({})).provider)
    expect(seen.has(first.provider)).toBe(true)
  })

  test("x-session-id and prompt_cache_key are session keys too", async () => {
    const keys: ReadonlyArray<{ headers: Record<string, string>; json: Record<string, unknown> }> = [
      { headers: { "x-session-id": "hdr-1" }, json: {} },
      { headers: {}, json: { prompt_cache_key: "pc-1" } },
    ]
    for (const sticky of keys) {
      const first = await servedBy(sticky.json, sticky.headers)
      for (let i = 0; i < 9; i++) expect((await servedBy(sticky.json, sticky.headers)).provider).toBe(first.provider)
    }
  })

  test("provider.order turns stickiness off", async () => {
    const first = await servedBy({ session_id: "chat-2" })
    const other = first.provider === "left" ? "right" : "left"
    const ordered = await servedBy({ session_id: "chat-2", provider: { order: [other] } })
    expect(ordered.provider).toBe(other)
    expect(ordered.meta.strategy).toBe("order")
    // The ordered request did not move the session either.
    expect((await servedBy({ session_id: "chat-2" })).provider).toBe(first.provider)
  })
})
