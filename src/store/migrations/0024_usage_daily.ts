import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The usage rollup the activity endpoints and the console read (src/store/usage-rollup.ts): one
 * row per UTC day, key, model, provider and outcome status, summed by the ledger's commit, so a
 * month of activity is a few thousand rows whatever the number of generations. The day leads the
 * key: every read is a range of days. `status_code` is 200 for an answer (complete or not), the
 * caller's status for a failure, 499 for a cancellation: the errors-by-status chart is a group by.
 * `lat_h0`..`lat_h7` count the time to the first token below 250, 500, 1000, 2000, 4000, 8000,
 * 16000 ms and above: the percentiles per provider come from them.
 *
 * Two coarser rollups beside it, summed in the same commit, so that no read scans the finest rows
 * of a whole month: `usage_daily_models` without the key (the unfiltered, per-workspace and
 * per-model views: ~1/50 of the rows with 50 keys) and `usage_daily_keys` without the model and
 * provider (the by-key table). The finest table is read only for one key or one model, through
 * its indexes. Measured on a 1M-generation seed (scripts/bench-console.ts): one summary over the
 * finest rows alone read ~90k rows per query, seconds in all.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  // On SQLite the rows live in the primary key's b-tree (no separate rowid table to update).
  const withoutRowid = sql.onDialectOrElse({ sqlite: () => " WITHOUT ROWID", orElse: () => "" })
  yield* sql.unsafe(`CREATE TABLE usage_daily (
    day TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    requests BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens BIGINT NOT NULL DEFAULT 0,
    cost_nano BIGINT NOT NULL DEFAULT 0,
    byok_cost_nano BIGINT NOT NULL DEFAULT 0,
    generation_ms BIGINT NOT NULL DEFAULT 0,
    latency_ms BIGINT NOT NULL DEFAULT 0,
    latency_count BIGINT NOT NULL DEFAULT 0,
    lat_h0 BIGINT NOT NULL DEFAULT 0,
    lat_h1 BIGINT NOT NULL DEFAULT 0,
    lat_h2 BIGINT NOT NULL DEFAULT 0,
    lat_h3 BIGINT NOT NULL DEFAULT 0,
    lat_h4 BIGINT NOT NULL DEFAULT 0,
    lat_h5 BIGINT NOT NULL DEFAULT 0,
    lat_h6 BIGINT NOT NULL DEFAULT 0,
    lat_h7 BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (day, key_hash, model, provider_name, status_code)
  )${withoutRowid}`)
  const sums = `requests BIGINT NOT NULL DEFAULT 0,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    cached_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens BIGINT NOT NULL DEFAULT 0,
    cost_nano BIGINT NOT NULL DEFAULT 0,
    byok_cost_nano BIGINT NOT NULL DEFAULT 0,
    generation_ms BIGINT NOT NULL DEFAULT 0,
    latency_ms BIGINT NOT NULL DEFAULT 0,
    latency_count BIGINT NOT NULL DEFAULT 0,
    lat_h0 BIGINT NOT NULL DEFAULT 0,
    lat_h1 BIGINT NOT NULL DEFAULT 0,
    lat_h2 BIGINT NOT NULL DEFAULT 0,
    lat_h3 BIGINT NOT NULL DEFAULT 0,
    lat_h4 BIGINT NOT NULL DEFAULT 0,
    lat_h5 BIGINT NOT NULL DEFAULT 0,
    lat_h6 BIGINT NOT NULL DEFAULT 0,
    lat_h7 BIGINT NOT NULL DEFAULT 0`
  yield* sql.unsafe(`CREATE TABLE usage_daily_models (
    day TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    model TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    ${sums},
    PRIMARY KEY (day, workspace_id, model, provider_name, status_code)
  )${withoutRowid}`)
  yield* sql.unsafe(`CREATE TABLE usage_daily_keys (
    day TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    ${sums},
    PRIMARY KEY (day, workspace_id, key_hash, status_code)
  )${withoutRowid}`)
  // One key's or one model's days in the finest rows (an inference key's own view, a filter).
  yield* sql`CREATE INDEX usage_daily_key_day ON usage_daily (key_hash, day)`
  yield* sql`CREATE INDEX usage_daily_model_day ON usage_daily (model, day)`
  // What the ledger already holds, summed once (an upgraded gateway's activity starts complete).
  const errorStatus = sql.onDialectOrElse({
    pg: () => "CAST(CAST(error AS json)->>'status' AS INTEGER)",
    orElse: () => "CAST(json_extract(error, '$.status') AS INTEGER)",
  })
  const latencyBucket = (bound: string) => `SUM(CASE WHEN latency_ms IS NOT NULL AND ${bound} THEN 1 ELSE 0 END)`
  yield* sql.unsafe(`INSERT INTO usage_daily (day, key_hash, model, provider_name, status_code, user_id, workspace_id,
      requests, input_tokens, cached_tokens, output_tokens, reasoning_tokens, cost_nano, byok_cost_nano,
      generation_ms, latency_ms, latency_count, lat_h0, lat_h1, lat_h2, lat_h3, lat_h4, lat_h5, lat_h6, lat_h7)
    SELECT day, key_hash, model, provider_name, status_code, MIN(user_id), MIN(workspace_id),
      COUNT(*), SUM(input_tokens), SUM(cached_tokens), SUM(output_tokens), SUM(reasoning_tokens),
      SUM(CASE WHEN is_byok = 0 THEN total_cost_nano ELSE 0 END), SUM(CASE WHEN is_byok = 1 THEN total_cost_nano ELSE 0 END),
      SUM(generation_time_ms), SUM(COALESCE(latency_ms, 0)), SUM(CASE WHEN latency_ms IS NULL THEN 0 ELSE 1 END),
      ${latencyBucket("latency_ms < 250")}, ${latencyBucket("latency_ms >= 250 AND latency_ms < 500")},
      ${latencyBucket("latency_ms >= 500 AND latency_ms < 1000")}, ${latencyBucket("latency_ms >= 1000 AND latency_ms < 2000")},
      ${latencyBucket("latency_ms >= 2000 AND latency_ms < 4000")}, ${latencyBucket("latency_ms >= 4000 AND latency_ms < 8000")},
      ${latencyBucket("latency_ms >= 8000 AND latency_ms < 16000")}, ${latencyBucket("latency_ms >= 16000")}
    FROM (SELECT g.*, substr(created_at, 1, 10) AS day,
        CASE WHEN status = 'cancelled' THEN 499 WHEN status = 'failed' THEN COALESCE(${errorStatus}, 500) ELSE 200 END AS status_code
      FROM generations g) AS s
    GROUP BY day, key_hash, model, provider_name, status_code`)
  const summed = "SUM(requests), SUM(input_tokens), SUM(cached_tokens), SUM(output_tokens), SUM(reasoning_tokens), SUM(cost_nano), SUM(byok_cost_nano), SUM(generation_ms), SUM(latency_ms), SUM(latency_count), SUM(lat_h0), SUM(lat_h1), SUM(lat_h2), SUM(lat_h3), SUM(lat_h4), SUM(lat_h5), SUM(lat_h6), SUM(lat_h7)"
  const columns = "requests, input_tokens, cached_tokens, output_tokens, reasoning_tokens, cost_nano, byok_cost_nano, generation_ms, latency_ms, latency_count, lat_h0, lat_h1, lat_h2, lat_h3, lat_h4, lat_h5, lat_h6, lat_h7"
  yield* sql.unsafe(`INSERT INTO usage_daily_models (day, workspace_id, model, provider_name, status_code, ${columns})
    SELECT day, workspace_id, model, provider_name, status_code, ${summed} FROM usage_daily
    GROUP BY day, workspace_id, model, provider_name, status_code`)
  yield* sql.unsafe(`INSERT INTO usage_daily_keys (day, workspace_id, key_hash, status_code, ${columns})
    SELECT day, workspace_id, key_hash, status_code, ${summed} FROM usage_daily GROUP BY day, workspace_id, key_hash, status_code`)
})
