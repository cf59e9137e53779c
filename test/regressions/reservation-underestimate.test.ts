/**
 * Regression (found in review): the reservation's worst case (prepare.ts) uses `request.max_output_tokens ??
 * endpoint.maxOutputTokens ?? 4096`, but what the upstream is ALLOWED to produce is larger:
 *  - anthropic: with a thinking budget, anthropicRequestBody sends max_tokens = budget + max_output_tokens
 *    (reasoning.max_tokens up to anything; effort "xhigh" = 32768), the reservation counts only max_output_tokens;
 *  - openai-chat / openai-responses: without max_output_tokens nothing bounds the upstream, the reservation assumes 4096.
 * So concurrent requests are admitted on tiny reservations and together pass the key's limit by
 * far more than "one request's reservation" (docs/operations.md, "Budget leases").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startInProcessGateway({
    catalog: {
      providers: [
        // The mock reports what a long thinking answer uses: 20 000 output tokens.
        { id: "claude", kind: "anthropic", base_url: mock.url, headers: { "x-mock-usage-output": "20000", "x-mock-usage-input": "10" } },
        // An OpenAI-compatible upstream that writes as long an answer as it is allowed (4096 tokens).
        { id: "chatty", kind: "openai-chat", base_url: mock.url, headers: { "x-mock-usage-output": "4096", "x-mock-usage-input": "10" } },
      ],
      models: [
        {
          id: "think/model",
          context_length: 200_000,
          endpoints: [{ provider: "claude", upstream_model: "claude-x", pricing: { prompt: 1, completion: 10 }, supports: ["reasoning"] }],
        },
        {
          id: "chat/model",
          context_length: 200_000,
          endpoints: [{ provider: "chatty", upstream_model: "gpt-x", pricing: { prompt: 1, completion: 10 } }],
        },
      ],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const BODY = { model: "think/model", input: "think hard", max_output_tokens: 16, reasoning: { max_tokens: 20_000 } }
// What the gateway reserves: the answer's 16 tokens plus the 20 000-token thinking budget it allows upstream.
const RESERVATION = (Math.ceil(JSON.stringify(BODY).length / 4) * 1 + 20_016 * 10) / 1e6

/** Twenty concurrent requests of `body` on a new key of `limit`: the bodies the upstream was sent, and what the key spent. */
const burst = async (name: string, limit: number, body: Record<string, unknown>) => {
  const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name, limit } })).json()) as {
    key: string
    data: { hash: string }
  }
  const from = mock.requests.length
  const results = await Promise.all(Array.from({ length: 20 }, () => gw.fetch("/v1/responses", { method: "POST", key: made.key, json: body })))
  await Promise.all(results.map((r) => r.text()))
  const sent = mock.requests.slice(from).map((r) => r.body as Record<string, unknown>)
  await gw.server.drain()
  const spent = await gw.server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${made.data.hash}`
      return Number(rows[0]!.total) / 1e9
    }),
  )
  return { sent, spent }
}

describe("the reservation bounds what the upstream may produce", () => {
  test("anthropic thinking budget: it is reserved, so concurrent requests stay within one reservation of the limit", async () => {
    const limit = RESERVATION * 5
    const { sent, spent } = await burst("thinker", limit, BODY)
    // The upstream is allowed the 16-token answer plus the 20 000-token thinking budget, all reserved.
    expect(sent[0]?.["max_tokens"]).toBe(20_016)
    expect(spent).toBeLessThanOrEqual(limit + RESERVATION + 1e-12)
  })

  test("openai-chat without max_output_tokens: the 4096 tokens reserved are what the upstream is allowed", async () => {
    const body = { model: "chat/model", input: "write a lot" }
    const reservation = (Math.ceil(JSON.stringify(body).length / 4) * 1 + 4096 * 10) / 1e6
    const limit = reservation * 5
    const { sent, spent } = await burst("chatty", limit, body)
    expect(sent[0]?.["max_tokens"]).toBe(4096)
    expect(spent).toBeLessThanOrEqual(limit + reservation + 1e-12)
  })
})
