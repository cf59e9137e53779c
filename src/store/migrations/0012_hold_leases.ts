import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Holds (reservation rows) carry their owner and a lease (src/services/HoldLeases.ts): the
 * owning process's instance id, its boot id, and the time (epoch ms) until which the owner has
 * vouched for them. Rows from before have an expired lease: the next sweep releases them.
 * No index: the table holds only requests in flight, and each insert (the hot path) pays for
 * every index; the renewal and the sweep scan it once per period.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE reservations ADD COLUMN instance_id TEXT NOT NULL DEFAULT ''`
  yield* sql`ALTER TABLE reservations ADD COLUMN boot_id TEXT NOT NULL DEFAULT ''`
  yield* sql`ALTER TABLE reservations ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0`
  yield* sql`DROP INDEX IF EXISTS reservations_created`
})
