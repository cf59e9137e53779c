import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The spend ledger becomes a daily rollup (src/store/spend-rollup.ts): `spend`, a row per
 * request with two indexes, is summed into `spend_daily` by key, UTC day and BYOK flag, and
 * dropped. Spend windows start at UTC midnights, so every window sum is kept exactly; the
 * per-request amounts remain in `generations.total_cost`.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // On SQLite the rows live in the primary key's b-tree (no separate rowid table to update).
  const withoutRowid = sql.onDialectOrElse({ sqlite: () => " WITHOUT ROWID", orElse: () => "" })
  yield* sql.unsafe(`CREATE TABLE spend_daily (
    key_hash TEXT NOT NULL,
    day TEXT NOT NULL,
    is_byok INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    amount_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (key_hash, day, is_byok)
  )${withoutRowid}`)
  yield* sql`CREATE INDEX spend_daily_user ON spend_daily (user_id)`
  yield* sql`INSERT INTO spend_daily (key_hash, day, is_byok, user_id, workspace_id, amount_usd)
    SELECT key_hash, substr(created_at, 1, 10), is_byok, MIN(user_id), MIN(workspace_id), SUM(amount_usd)
    FROM spend GROUP BY key_hash, substr(created_at, 1, 10), is_byok`
  yield* sql`DROP TABLE spend`
})
