import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Which model router chose the generation's model (`auto`, `pareto`); null when the caller named the model. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE generations ADD COLUMN router TEXT`
})
