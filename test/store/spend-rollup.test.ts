/**
 * The spend ledger's daily rollup (src/store/spend-rollup.ts) and the migration that made it
 * from the per-request `spend` table, on the engine under test.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { migrate } from "../../src/store/Store.js"
import { addSpendWith, dayOf, rollUp, type SpendItem } from "../../src/store/spend-rollup.js"
import { engine } from "../support/db.js"
import { schemaBefore, useDatabase } from "../support/migrations.js"

const item = (overrides: Partial<SpendItem> = {}): SpendItem => ({
  keyHash: "key-a",
  userId: "user-a",
  workspaceId: "ws-a",
  amountUsd: 0.25,
  isByok: false,
  createdAt: "2026-11-23T10:00:00.000Z",
  ...overrides,
})

describe("rollUp", () => {
  test("sums per key, UTC day and BYOK flag, one row each", () => {
    const rows = rollUp([
      item(),
      item({ amountUsd: 0.5, createdAt: "2026-11-23T23:59:59.999Z" }),
      item({ amountUsd: 2, createdAt: "2026-11-24T00:00:00.000Z" }),
      item({ amountUsd: 4, isByok: true }),
      item({ keyHash: "key-b", userId: "user-b", workspaceId: "ws-b", amountUsd: 8 }),
    ])
    expect(rows).toEqual([
      { key_hash: "key-a", day: "2026-11-23", is_byok: 0, user_id: "user-a", workspace_id: "ws-a", amount_nano: 750_000_000 },
      { key_hash: "key-a", day: "2026-11-23", is_byok: 1, user_id: "user-a", workspace_id: "ws-a", amount_nano: 4_000_000_000 },
      { key_hash: "key-a", day: "2026-11-24", is_byok: 0, user_id: "user-a", workspace_id: "ws-a", amount_nano: 2_000_000_000 },
      { key_hash: "key-b", day: "2026-11-23", is_byok: 0, user_id: "user-b", workspace_id: "ws-b", amount_nano: 8_000_000_000 },
    ])
  })

  test("rows come out in one order whatever the input's (writers lock rows in the same order)", () => {
    const items = ["k3", "k1", "k2", "k1", "k3"].map((keyHash, i) => item({ keyHash, amountUsd: i + 1 }))
    const forward = rollUp(items)
    expect(forward.map((r) => r.key_hash)).toEqual(["k1", "k2", "k3"])
    expect(rollUp([...items].reverse()).map((r) => [r.key_hash, r.amount_nano])).toEqual(forward.map((r) => [r.key_hash, r.amount_nano]))
  })

  test("a cost that is not a finite number adds nothing", () => {
    expect(rollUp([item({ amountUsd: Number.NaN }), item({ amountUsd: Infinity }), item({ amountUsd: 1 })])[0]!.amount_nano).toBe(1_000_000_000)
  })

  test("dayOf is the UTC date of an ISO time", () => {
    expect(dayOf("2026-01-31T23:59:59.999Z")).toBe("2026-01-31")
  })
})

const run = useDatabase()

describe(`the spend_daily migration and upsert (${engine})`, () => {
  test("a ledger of per-request spend rows becomes one row per key, day and BYOK flag with the same sums", async () => {
    const sums = await run(
      Effect.gen(function* () {
        const sql = yield* schemaBefore(8)
        const spend = (key: string, user: string, amount: number, byok: number, at: string) =>
          sql`INSERT INTO spend (key_hash, user_id, workspace_id, generation_id, amount_usd, is_byok, created_at)
            VALUES (${key}, ${user}, ${`ws-${user}`}, NULL, ${amount}, ${byok}, ${at})`
        yield* spend("k1", "u1", 0.5, 0, "2026-11-22T08:00:00.000Z")
        yield* spend("k1", "u1", 0.25, 0, "2026-11-22T23:59:59.999Z")
        yield* spend("k1", "u1", 1, 1, "2026-11-22T12:00:00.000Z")
        yield* spend("k1", "u1", 2, 0, "2026-11-23T00:00:00.000Z")
        yield* spend("k2", "u2", 4, 0, "2026-11-23T09:00:00.000Z")
        // Later migrations follow these (they are not this test's concern).
        expect((yield* migrate).slice(0, 5)).toEqual(["8_spend_daily", "9_usage_estimated", "10_generation_client", "11_money_nano", "12_hold_leases"])
        const rows = yield* sql<{ key_hash: string; day: string; is_byok: number; user_id: string; workspace_id: string; amount_nano: number }>`
          SELECT key_hash, day, is_byok, user_id, workspace_id, amount_nano FROM spend_daily ORDER BY key_hash, day, is_byok`
        const gone = yield* Effect.either(sql`SELECT COUNT(*) FROM spend`)
        return { rows: rows.map((r) => ({ ...r, is_byok: Number(r.is_byok), amount_nano: Number(r.amount_nano) })), spendGone: gone._tag === "Left" }
      }),
    )
    expect(sums.rows).toEqual([
      { key_hash: "k1", day: "2026-11-22", is_byok: 0, user_id: "u1", workspace_id: "ws-u1", amount_nano: 750_000_000 },
      { key_hash: "k1", day: "2026-11-22", is_byok: 1, user_id: "u1", workspace_id: "ws-u1", amount_nano: 1_000_000_000 },
      { key_hash: "k1", day: "2026-11-23", is_byok: 0, user_id: "u1", workspace_id: "ws-u1", amount_nano: 2_000_000_000 },
      { key_hash: "k2", day: "2026-11-23", is_byok: 0, user_id: "u2", workspace_id: "ws-u2", amount_nano: 4_000_000_000 },
    ])
    expect(sums.spendGone).toBe(true)
  })

  test("adding spend to a day that has a row adds to its amount; an empty batch writes nothing", async () => {
    const total = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* addSpendWith(sql, rollUp([item({ keyHash: "k1", userId: "u1", amountUsd: 0.125, createdAt: "2026-11-23T18:00:00.000Z" })]))
        yield* addSpendWith(sql, rollUp([item({ keyHash: "k1", userId: "u1", amountUsd: 0.125, createdAt: "2026-11-23T19:00:00.000Z" })]))
        yield* addSpendWith(sql, [])
        return yield* sql<{ amount_nano: number; n: number }>`SELECT amount_nano, (SELECT COUNT(*) FROM spend_daily) AS n
          FROM spend_daily WHERE key_hash = 'k1' AND day = '2026-11-23' AND is_byok = 0`
      }),
    )
    expect(Number(total[0]!.amount_nano)).toBe(2_250_000_000)
    expect(Number(total[0]!.n)).toBe(4)
  })
})
