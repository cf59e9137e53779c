import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Observability destinations. `config` is JSON whose secret values are sealed (AES-256-GCM,
 * see services/secrets.ts); `api_key_hashes`, `filter_rules` and `regions` are JSON too.
 * A workspace that still has destinations cannot be deleted (the foreign key refuses it).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE observability_destinations (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    created_by TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    privacy_mode INTEGER NOT NULL DEFAULT 0,
    sampling_rate DOUBLE PRECISION NOT NULL DEFAULT 1,
    api_key_hashes TEXT,
    filter_rules TEXT,
    config TEXT NOT NULL,
    regions TEXT NOT NULL,
    broadcast_generation_cost INTEGER NOT NULL DEFAULT 1,
    broadcast_generation_identity INTEGER NOT NULL DEFAULT 1,
    broadcast_generation_request_context INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX observability_destinations_workspace ON observability_destinations (workspace_id)`
})
