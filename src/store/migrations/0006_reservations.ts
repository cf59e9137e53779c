import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Spend enforcement: a per-key counter of spend in the current limit window, and open
 * reservations (rows, so a crash can be recovered from at the next start).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN window_spend_usd DOUBLE PRECISION NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE api_keys ADD COLUMN window_start TEXT`
  yield* sql`CREATE TABLE reservations (
    id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    user_id TEXT NOT NULL,
    amount_usd DOUBLE PRECISION NOT NULL,
    credits_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX reservations_created ON reservations (created_at)`
  yield* sql`ALTER TABLE users ADD COLUMN credits_reserved_usd DOUBLE PRECISION NOT NULL DEFAULT 0`
})
