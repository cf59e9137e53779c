/**
 * Migration 24 (the usage rollups): the generations already in the ledger are summed into
 * `usage_daily` (a failure under its status, its latency in the histogram) and into the two
 * coarser rollups, so an upgraded gateway's activity is complete from the start.
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { toRow } from "../../src/store/ledger.js"
import { migrate } from "../../src/store/Store.js"
import { engine } from "../support/db.js"
import { generationEntry } from "../support/generations.js"
import { schemaBefore, useDatabase } from "../support/migrations.js"

const run = useDatabase()

describe(`the usage_daily migration (${engine})`, () => {
  test("existing generations are summed per day, key, model, provider and status, with the latency histogram", async () => {
    const after = await run(
      Effect.gen(function* () {
        const sql = yield* schemaBefore(24)
        const day = "2026-03-04T10:00:00.000Z"
        const rows = [
          generationEntry({ createdAt: day, totalCost: 0.25, latencyMs: 100, inputTokens: 10, outputTokens: 1 }),
          generationEntry({ createdAt: day, totalCost: 0.5, latencyMs: 3000, inputTokens: 20, outputTokens: 2 }),
          generationEntry({ createdAt: day, totalCost: 1, isByok: true, latencyMs: null, inputTokens: 5, outputTokens: 0 }),
          generationEntry({ createdAt: day, totalCost: 0, status: "failed", error: { message: "x", status: 429, providerName: "fake" } }),
        ].map(toRow)
        for (const r of rows) yield* sql`INSERT INTO generations ${sql.insert(r)}`
        const ran = yield* migrate
        return {
          ran,
          fine: yield* sql<Record<string, number | string>>`SELECT day, status_code, requests, input_tokens, cost_nano, byok_cost_nano,
            latency_count, lat_h0, lat_h4 FROM usage_daily ORDER BY status_code`,
          models: yield* sql<Record<string, number | string>>`SELECT status_code, requests, cost_nano FROM usage_daily_models ORDER BY status_code`,
          keys: yield* sql<Record<string, number | string>>`SELECT status_code, requests, byok_cost_nano FROM usage_daily_keys ORDER BY status_code`,
        }
      }),
    )
    const plain = (rows: ReadonlyArray<Record<string, number | string>>) =>
      rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "string" && k !== "day" ? Number(v) : v])))
    expect(after.ran).toContain("24_usage_daily")
    expect(plain(after.fine)).toEqual([
      { day: "2026-03-04", status_code: 200, requests: 3, input_tokens: 35, cost_nano: 750_000_000, byok_cost_nano: 1_000_000_000, latency_count: 2, lat_h0: 1, lat_h4: 1 },
      { day: "2026-03-04", status_code: 429, requests: 1, input_tokens: 10, cost_nano: 0, byok_cost_nano: 0, latency_count: 1, lat_h0: 1, lat_h4: 0 },
    ])
    expect(plain(after.models)).toEqual([
      { status_code: 200, requests: 3, cost_nano: 750_000_000 },
      { status_code: 429, requests: 1, cost_nano: 0 },
    ])
    expect(plain(after.keys)).toEqual([
      { status_code: 200, requests: 3, byok_cost_nano: 1_000_000_000 },
      { status_code: 429, requests: 1, byok_cost_nano: 0 },
    ])
  }, 30_000)
})
