import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** What a request's server tools did: search results given to the model, pages fetched, the search engine. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE generations ADD COLUMN num_search_results INTEGER`
  yield* sql`ALTER TABLE generations ADD COLUMN num_fetches INTEGER`
  yield* sql`ALTER TABLE generations ADD COLUMN web_search_engine TEXT`
})
