import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Requests served and tokens processed per model and UTC day (src/store/model-usage-rollup.ts),
 * for the popularity sorts of `GET /models` (docs/models.md): written with each ledger batch, so
 * a listing reads a few rows per model instead of scanning the generations. Filled here from the
 * generations already recorded.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // On SQLite the rows live in the primary key's b-tree (no separate rowid table to update).
  const withoutRowid = sql.onDialectOrElse({ sqlite: () => " WITHOUT ROWID", orElse: () => "" })
  // Day first: a listing reads the last days of every model.
  yield* sql.unsafe(`CREATE TABLE model_usage_daily (
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    requests BIGINT NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model)
  )${withoutRowid}`)
  yield* sql`INSERT INTO model_usage_daily (day, model, requests, tokens)
    SELECT substr(created_at, 1, 10), model, COUNT(*), SUM(input_tokens + output_tokens)
    FROM generations WHERE status <> 'failed' GROUP BY substr(created_at, 1, 10), model`
})
