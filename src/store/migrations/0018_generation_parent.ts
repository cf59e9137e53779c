import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** The generation an inner model call was made for (fusion's panel and judge); null for a request's own generation. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE generations ADD COLUMN parent_generation_id TEXT`
})
