/**
 * Regression (found in review): the reservation is decided by the FIRST candidate only (prepare.ts: `isByok:
 * plan.candidates[0]?.isByok`). When the first candidate is a BYOK endpoint (and the key does not
 * count BYOK, or credits are enforced), nothing is reserved; a failover to a non-BYOK endpoint is
 * then served and billed without any limit or credit check, and settle never runs (reservation
 * is None), so the key's window counter never even sees the spend.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { ConfigFile } from "../../src/config/file.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { endpointOf, modelOf } from "../support/catalog.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { closedPort } from "../routing/helpers.js"

type GW = InProcessGateway & { stop: () => Promise<void> }
let gw: GW
let credits: GW

const PRICE = { prompt: 1, completion: 2 }

const catalog = async (): Promise<ConfigFile> => {
  const dead = await closedPort()
  return {
    providers: [
      // The workspace's own key (BYOK), currently unreachable: a retryable "connection" failure.
      { id: "mine", kind: "openai-chat", base_url: `http://127.0.0.1:${dead}/v1`, byok: true },
      { id: "fake", kind: "fake" },
    ],
    models: [
      modelOf("mix/echo", endpointOf("mine", { pricing: PRICE }), endpointOf("fake", { pricing: PRICE })),
      modelOf("plain/echo", endpointOf("fake", { pricing: PRICE })),
    ],
  }
}

beforeAll(async () => {
  gw = await startInProcessGateway({ catalog: await catalog() })
  credits = await startInProcessGateway({ catalog: { ...(await catalog()), credits: { enforce: true } }, creditsEnforced: true })
})
afterAll(async () => {
  await gw?.stop()
  await credits?.stop()
})

const BODY = { input: "hi there", max_output_tokens: 3, provider: { order: ["mine", "fake"] } }

const ledger = (g: GW, hash: string) =>
  g.server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ total: number; byok: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total,
        COALESCE(SUM(CASE WHEN is_byok = 1 THEN amount_nano ELSE 0 END), 0) AS byok FROM spend_daily WHERE key_hash = ${hash}`
      return { total: Number(rows[0]!.total) / 1e9, byok: Number(rows[0]!.byok) / 1e9 }
    }),
  )

describe("BYOK first candidate, non-BYOK fallback", () => {
  test("a key with limit 0 is refused on the plain model but served (and billed) through the BYOK-first model", async () => {
    const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "zero", limit: 0 } })).json()) as {
      key: string
      data: { hash: string }
    }
    const plain = await gw.fetch("/v1/responses", { method: "POST", key: made.key, json: { ...BODY, model: "plain/echo" } })
    expect(plain.status).toBe(402) // the limit works for a direct non-BYOK request

    const statuses: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const res = await gw.fetch("/v1/responses", {
        method: "POST",
        key: made.key,
        headers: { "x-service-metadata": "enabled" },
        json: { ...BODY, model: "mix/echo" },
      })
      const body = (await res.json()) as { usage?: { is_byok?: boolean; cost?: number } }
      statuses.push(res.status)
      if (res.status === 200) expect(body.usage?.is_byok).toBe(false) // served by the non-BYOK endpoint
    }
    await gw.server.drain()
    const spent = await ledger(gw, made.data.hash)
    // Expected: every request refused with 402 (the non-BYOK fallback counts toward a $0 limit).
    expect({ statuses, nonByokSpend: spent.total - spent.byok }).toEqual({ statuses: [402, 402, 402, 402, 402], nonByokSpend: 0 })
  })

  test("credits enforced, zero balance: the BYOK-first model spends credits the user does not have", async () => {
    const me = (await (await credits.fetch("/v1/key")).json()) as { data: { creator_user_id: string } }
    const plain = await credits.fetch("/v1/responses", { method: "POST", json: { ...BODY, model: "plain/echo" } })
    expect(plain.status).toBe(402)
    const res = await credits.fetch("/v1/responses", { method: "POST", json: { ...BODY, model: "mix/echo" } })
    await res.text()
    await credits.server.drain()
    const balance = await credits.server.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.credits(me.data.creator_user_id)))
    // Expected: 402 and no usage against a zero balance.
    expect({ status: res.status, total_usage: balance.total_usage }).toEqual({ status: 402, total_usage: 0 })
  })
})
