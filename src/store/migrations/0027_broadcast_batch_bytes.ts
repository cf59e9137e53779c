import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What an outbox batch holds on disk: its items' and sealed content's characters, written with it
 * (src/broadcast/outbox.ts), so the cap on pending bytes (src/broadcast/maintenance.ts) sums a
 * column of the pending batches instead of reading their texts. Batches written before: 0.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE broadcast_batches ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0`
})
