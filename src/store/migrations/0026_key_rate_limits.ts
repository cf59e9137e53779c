import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** A key's request rate limit: at most `rate_limit_requests` per `rate_limit_interval_ms` (both null: none). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN rate_limit_requests INTEGER`
  yield* sql`ALTER TABLE api_keys ADD COLUMN rate_limit_interval_ms INTEGER`
})
