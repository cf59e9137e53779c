import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The log's spans by key and by model (src/store/log-spans.ts) in place of migration 25's two
 * indexes, which each wrote an entry per generation. Spans for the rows already written are made
 * from them, one per key (or model) and 100 seconds of ids (the first eight digits of the id's
 * second), within the spans' 120-second width; a key's under the first 16 characters of its
 * hash, as src/store/log-spans.ts files them. The session index stays: it holds only the rows
 * with a session.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // Kept in the order of their last id (what retention deletes by, oldest first: src/services/Retention.ts);
  // on SQLite the table is that order itself. Two spans of one key or model never share a last id:
  // each holds its own generations.
  const columns = sql`field TEXT NOT NULL,
    value TEXT NOT NULL,
    first_id TEXT NOT NULL,
    last_id TEXT NOT NULL,
    row_count INTEGER NOT NULL,
    PRIMARY KEY (last_id, field, value)`
  yield* sql.onDialectOrElse({
    sqlite: () => sql`CREATE TABLE generation_log_spans (${columns}) WITHOUT ROWID`,
    orElse: () => sql`CREATE TABLE generation_log_spans (${columns})`,
  })
  // What the log reads: one key's or model's spans, newest first.
  yield* sql`CREATE INDEX generation_log_spans_find ON generation_log_spans (field, value, last_id)`
  yield* sql`INSERT INTO generation_log_spans (field, value, first_id, last_id, row_count)
    SELECT 'key', substr(key_hash, 1, 16), MIN(id), MAX(id), COUNT(*) FROM generations GROUP BY substr(key_hash, 1, 16), substr(id, 1, 12)`
  yield* sql`INSERT INTO generation_log_spans (field, value, first_id, last_id, row_count)
    SELECT 'model', model, MIN(id), MAX(id), COUNT(*) FROM generations GROUP BY model, substr(id, 1, 12)`
  yield* sql`DROP INDEX generations_key_id`
  yield* sql`DROP INDEX generations_model_id`
})
