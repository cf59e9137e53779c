import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What the client said about itself on a model request, as clients of this API family send it:
 * `HTTP-Referer` (the generation's `http_referer` and `origin`), `X-Title` / `X-OpenRouter-Title`
 * (the app's name) and `User-Agent`. Null when the header was absent; each capped at 512 characters.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE generations ADD COLUMN http_referer TEXT`
  yield* sql`ALTER TABLE generations ADD COLUMN app_title TEXT`
  yield* sql`ALTER TABLE generations ADD COLUMN user_agent TEXT`
})
