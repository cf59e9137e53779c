import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Drops the two indexes of `generations` that no query reads (generations are read by id; usage
 * windows come from `spend`). Every ledger row paid for both: ~4 µs of CPU per row on SQLite.
 * A listing of generations would add the index it needs with it.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX IF EXISTS generations_key_time`
  yield* sql`DROP INDEX IF EXISTS generations_workspace_time`
})
