import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Whether a generation's token counts are the gateway's estimate (the upstream gave none it could trust). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE generations ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0`
})
