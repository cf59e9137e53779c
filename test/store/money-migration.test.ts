/**
 * Migration 11 (money as integers): every USD column of a database written by the floating-point
 * code becomes nano-dollars, ROUND(x * 1e9), on the engine under test; a missing limit stays
 * missing. Migration 12 gives old holds an expired lease (the next sweep releases them).
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { migrate } from "../../src/store/Store.js"
import { engine } from "../support/db.js"
import { schemaBefore, useDatabase } from "../support/migrations.js"

const run = useDatabase()

describe(`the money_nano migration (${engine})`, () => {
  test("float amounts written before it become exact nano-dollars; a drifted sum rounds to the cent it meant", async () => {
    const after = await run(
      Effect.gen(function* () {
        // The schema as it was before: migrations 1-10, and rows as the floating-point code wrote them.
        const sql = yield* schemaBefore(11)
        const t = "2026-11-23T10:00:00.000Z"
        yield* sql`INSERT INTO users (id, created_at, credits_reserved_usd) VALUES ('u1', ${t}, 0.30000000000000004)`
        yield* sql`INSERT INTO workspaces (id, owner_user_id, name, slug, created_by, created_at) VALUES ('w1', 'u1', 'W', 'w', 'u1', ${t})`
        yield* sql`INSERT INTO api_keys (hash, user_id, workspace_id, name, label, limit_usd, reserved_usd, window_spend_usd, created_at, updated_at)
          VALUES ('k-limited', 'u1', 'w1', 'a', 'l', 0.05, 0.04000000000000001, 0.049999999999999996, ${t}, ${t})`
        yield* sql`INSERT INTO api_keys (hash, user_id, workspace_id, name, label, limit_usd, reserved_usd, window_spend_usd, created_at, updated_at)
          VALUES ('k-open', 'u1', 'w1', 'b', 'l', NULL, 0, 12.345678901, ${t}, ${t})`
        yield* sql`INSERT INTO credit_grants (user_id, amount_usd, note, created_at) VALUES ('u1', 0.1, NULL, ${t}), ('u1', 0.2, NULL, ${t})`
        yield* sql`INSERT INTO spend_daily (key_hash, day, is_byok, user_id, workspace_id, amount_usd)
          VALUES ('k-limited', '2026-11-23', 0, 'u1', 'w1', 0.049999999999999996)`
        yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_usd, credits_usd, created_at)
          VALUES ('r1', 'k-limited', 'u1', 0.01, 0.000000001, ${t})`
        yield* sql`INSERT INTO generations (id, key_hash, user_id, workspace_id, model, provider_name, upstream_model, created_at, total_cost, status)
          VALUES ('g1', 'k-limited', 'u1', 'w1', 'm', 'p', 'u', ${t}, 0.000123456789, 'completed')`
        const ran = yield* migrate
        const num = <R extends Record<string, unknown>>(rows: ReadonlyArray<R>) =>
          rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null || typeof v === "string" ? v : Number(v)])))
        return {
          ran,
          keys: num(yield* sql`SELECT hash, limit_nano, reserved_nano, window_spend_nano FROM api_keys ORDER BY hash`),
          users: num(yield* sql`SELECT id, credits_reserved_nano FROM users`),
          grants: num(yield* sql`SELECT amount_nano FROM credit_grants ORDER BY amount_nano`),
          spend: num(yield* sql`SELECT key_hash, amount_nano FROM spend_daily`),
          holds: num(yield* sql`SELECT id, amount_nano, credits_nano, instance_id, boot_id, lease_until FROM reservations`),
          generations: num(yield* sql`SELECT id, total_cost_nano FROM generations`),
          oldColumn: (yield* Effect.either(sql`SELECT amount_usd FROM spend_daily`))._tag,
        }
      }),
    )
    // Later migrations follow these (they are not this test's concern).
    expect(after.ran.slice(0, 2)).toEqual(["11_money_nano", "12_hold_leases"])
    expect(after.keys).toEqual([
      { hash: "k-limited", limit_nano: 50_000_000, reserved_nano: 40_000_000, window_spend_nano: 50_000_000 },
      { hash: "k-open", limit_nano: null, reserved_nano: 0, window_spend_nano: 12_345_678_901 },
    ])
    expect(after.users).toEqual([{ id: "u1", credits_reserved_nano: 300_000_000 }])
    expect(after.grants).toEqual([{ amount_nano: 100_000_000 }, { amount_nano: 200_000_000 }])
    expect(after.spend).toEqual([{ key_hash: "k-limited", amount_nano: 50_000_000 }])
    expect(after.holds).toEqual([{ id: "r1", amount_nano: 10_000_000, credits_nano: 1, instance_id: "", boot_id: "", lease_until: 0 }])
    expect(after.generations).toEqual([{ id: "g1", total_cost_nano: 123_457 }])
    expect(after.oldColumn).toBe("Left")
  })
})
