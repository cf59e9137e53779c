/**
 * Regression: a request that failed before the first byte (502/524/429/529) carried
 * `X-Generation-Id` but left no record, and the same hung upstream cost $0 with no record when the
 * provider timeout fired (524) but was charged with a record when the gateway deadline did (408).
 * Now every request that got an id leaves a record (status, error, the attempts before it), and
 * when nothing came from upstream it costs $0, whichever timer fired.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import type { GenerationError } from "../../src/domain/generations.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }
/** Answers a 200 head and the start of a JSON body, then nothing: its answer has begun. */
let begun: ReturnType<typeof Bun.serve>

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  begun = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: () =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"id":"c1","object":"chat.completion","choices":['))
          },
        }),
        { headers: { "content-type": "application/json" } },
      ),
  })
  const hung = (id: string, timeout_ms: number) => ({ id, kind: "openai-chat", base_url: mock.url, timeout_ms, headers: { "x-mock-error": "hang" } })
  gw = await startInProcessGateway({
    requestTimeoutMs: 600,
    catalog: {
      ...demoCatalog,
      providers: [
        ...demoCatalog.providers,
        hung("hung-long", 60_000),
        hung("hung-short", 150),
        { id: "begun", kind: "openai-chat", base_url: `http://127.0.0.1:${begun.port}/v1`, timeout_ms: 60_000 },
      ],
      models: [
        ...demoCatalog.models,
        { id: "hang/deadline", context_length: 1000, endpoints: [{ provider: "hung-long", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
        { id: "hang/timeout", context_length: 1000, endpoints: [{ provider: "hung-short", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
        { id: "hang/begun", context_length: 1000, endpoints: [{ provider: "begun", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
      ],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
  begun?.stop(true)
})

const ledger = (hash: string, id: string) =>
  gw.server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ error: string | null }>`SELECT error FROM generations WHERE id = ${id}`
      const spend = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${hash}`
      // Held by requests: their own holds, and what the key holds beyond this process's unused budget slices.
      const held = yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER)
          + CASE WHEN (SELECT reserved_nano FROM api_keys WHERE hash = ${hash})
              > (SELECT COALESCE(SUM(amount_nano), 0) FROM reservations WHERE key_hash = ${hash} AND is_slice = 1) THEN 1 ELSE 0 END AS n
        FROM reservations WHERE key_hash = ${hash} AND is_slice = 0`
      const raw = rows[0]?.error
      return {
        error: raw == null ? null : (JSON.parse(raw) as GenerationError),
        spend: Number(spend[0]?.total ?? 0) / 1e9,
        held: Number(held[0]?.n ?? 0),
      }
    }),
  )

/** Asks on a fresh limited key; returns the status, the generation record and the key's ledger. */
const askOnce = async (json: Record<string, unknown>) => {
  const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: `k${Math.random()}`, limit: 1 } })).json()) as {
    key: string
    data: { hash: string }
  }
  const res = await gw.fetch("/v1/responses", { method: "POST", key: made.key, json })
  await res.text()
  await gw.server.drain()
  const id = res.headers.get("x-generation-id")
  expect(id).not.toBeNull()
  const lookup = await gw.fetch(`/v1/generation?id=${id}`)
  expect(lookup.status).toBe(200)
  const record = ((await lookup.json()) as { data: { status: string; total_cost: number; provider_name: string } }).data
  return { status: res.status, record, ...(await ledger(made.data.hash, id!)) }
}

describe("every request that got an id leaves a record", () => {
  // demo/echo has two fake endpoints: each fails the same way, so every candidate is tried.
  for (const [marker, status, upstream] of [
    ["500", 502, 500],
    ["429", 429, 429],
    ["timeout", 524, 524],
    ["529", 529, 529],
  ] as const) {
    for (const stream of [false, true]) {
      test(`every candidate failing before the first byte (${marker}, ${stream ? "streamed" : "JSON"}): failed, error ${status}, $0`, async () => {
        const got = await askOnce({ model: "demo/echo", input: `hi [fail:${marker}]`, stream })
        expect(got.status).toBe(status)
        expect(got.record.status).toBe("failed")
        expect(got.record.total_cost).toBe(0)
        // The last endpoint tried; the attempt before it is a previous error.
        // (The order spreads load between the two.)
        const other = got.record.provider_name === "fake" ? "fake-backup" : "fake"
        expect(["fake", "fake-backup"]).toContain(got.record.provider_name)
        expect(got.error?.status).toBe(status)
        expect(got.error?.previousErrors?.map((p) => [p.providerName, p.code])).toEqual([[other, upstream]])
        expect(got.spend).toBe(0)
        expect(got.held).toBe(0)
      })
    }
  }
})

describe("nothing came from upstream: $0, whichever timer fired", () => {
  test("the gateway's deadline (408) on a hung upstream: recorded failed with 408, $0", async () => {
    const got = await askOnce({ model: "hang/deadline", input: "hi" })
    expect(got.status).toBe(408)
    expect(got.record.status).toBe("failed")
    expect(got.record.total_cost).toBe(0)
    expect(got.error?.status).toBe(408)
    expect(got.spend).toBe(0)
    expect(got.held).toBe(0)
  })

  test("the provider's timeout (524) on the same hung upstream: recorded failed with 524, $0", async () => {
    const got = await askOnce({ model: "hang/timeout", input: "hi", stream: true })
    expect(got.status).toBe(524)
    expect(got.record.status).toBe("failed")
    expect(got.record.total_cost).toBe(0)
    expect(got.error?.status).toBe(524)
    expect(got.spend).toBe(0)
  })

  test("an answer that had begun (a 200 head, part of its body) when the deadline fired is charged its input", async () => {
    const got = await askOnce({ model: "hang/begun", input: "hi" })
    expect(got.status).toBe(408)
    expect(got.record.status).toBe("failed")
    expect(got.error?.status).toBe(408)
    expect(got.record.total_cost).toBeGreaterThan(0)
    expect(got.spend).toBeCloseTo(got.record.total_cost, 12)
  })
})
