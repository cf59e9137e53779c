import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The generation log's listing (GET /v1/generations, the console's Logs page) pages newest first
 * on the id, which starts with the creation second: the primary key serves the unfiltered log, a
 * time range and filters that match often (provider, status, workspace, cost). A key's log (an
 * inference key's own view), a model's and a session's can match one row in thousands: each gets
 * an index that starts with it and ends with the id, so a page reads its rows and no others. The
 * session index holds only rows with a session. Each costs the ledger's insert about 2 µs a row on
 * SQLite (migration 7's figure for an index of this table); measured reads in docs/console.md.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX generations_key_id ON generations (key_hash, id)`
  yield* sql`CREATE INDEX generations_model_id ON generations (model, id)`
  yield* sql`CREATE INDEX generations_session_id ON generations (session_id, id) WHERE session_id IS NOT NULL`
})
