import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The broadcast outbox (docs/broadcast.md): one row per generation and destination that wants it, written
 * in the ledger's transaction. `payload` is the generation as broadcast sees it (JSON, no
 * content); `content` its prompt and completion sealed with the gateway's secret (null in privacy
 * mode), cleared on delivery. Times are epoch ms. A worker claims due rows by setting
 * `claimed_until` (a lease: no lock is held while it sends). No foreign key: a destination
 * deleted between the outbox's read and the commit must not fail the ledger's batch; its rows
 * are deleted with it, or by the worker when it finds them.
 * The destination's last outcome is kept on it for `delivery` in its reads.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE broadcast_deliveries (
    id TEXT PRIMARY KEY,
    destination_id TEXT NOT NULL,
    generation_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    payload TEXT NOT NULL,
    content TEXT,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    finished_at BIGINT
  )`
  yield* sql`CREATE INDEX broadcast_deliveries_due ON broadcast_deliveries (state, next_attempt_at)`
  yield* sql`CREATE INDEX broadcast_deliveries_destination ON broadcast_deliveries (destination_id, state, created_at)`
  yield* sql`ALTER TABLE observability_destinations ADD COLUMN last_success_at TEXT`
  yield* sql`ALTER TABLE observability_destinations ADD COLUMN last_error TEXT`
  yield* sql`ALTER TABLE observability_destinations ADD COLUMN last_error_at TEXT`
})
