import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Budget slices (src/store/budget-slices.ts): a process's slice of a key's budget is a row of
 * `reservations`, with the owner and lease of any hold, marked so it is told apart from a
 * request's own hold (`Spend.openReservations` counts requests, not slices).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE reservations ADD COLUMN is_slice INTEGER NOT NULL DEFAULT 0`
})
