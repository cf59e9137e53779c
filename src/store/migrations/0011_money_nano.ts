import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Money becomes integers: every USD amount moves to a BIGINT column of nano-dollars (1e-9 USD,
 * src/domain/pricing.ts `toNanoUsd`), so sums and limit checks are exact on both engines (in
 * DOUBLE PRECISION five $0.01 holds summed to 0.049999999999999996 and passed a $0.05 limit).
 * Each column is added, filled with ROUND(x * 1e9) and the old one dropped.
 */
const moved: ReadonlyArray<readonly [table: string, from: string, to: string, nullable: boolean]> = [
  ["api_keys", "limit_usd", "limit_nano", true],
  ["api_keys", "reserved_usd", "reserved_nano", false],
  ["api_keys", "window_spend_usd", "window_spend_nano", false],
  ["users", "credits_reserved_usd", "credits_reserved_nano", false],
  ["credit_grants", "amount_usd", "amount_nano", false],
  ["spend_daily", "amount_usd", "amount_nano", false],
  ["reservations", "amount_usd", "amount_nano", false],
  ["reservations", "credits_usd", "credits_nano", false],
  ["generations", "total_cost", "total_cost_nano", false],
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const toInteger = sql.onDialectOrElse({
    pg: () => (column: string) => `ROUND(${column} * 1000000000)::BIGINT`,
    orElse: () => (column: string) => `CAST(ROUND(${column} * 1000000000) AS INTEGER)`,
  })
  for (const [table, from, to, nullable] of moved) {
    yield* sql.unsafe(`ALTER TABLE ${table} ADD COLUMN ${to} BIGINT${nullable ? "" : " NOT NULL DEFAULT 0"}`)
    yield* sql.unsafe(`UPDATE ${table} SET ${to} = ${toInteger(from)}`)
    yield* sql.unsafe(`ALTER TABLE ${table} DROP COLUMN ${from}`)
  }
})
