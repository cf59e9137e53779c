import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Generation records (the usage ledger of model requests) and their stored content.
 * No foreign keys: the ledger outlives keys and workspaces, and the group-commit writer
 * inserts without lookups.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE generations (
    id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    model TEXT NOT NULL,
    provider_name TEXT NOT NULL,
    upstream_model TEXT NOT NULL,
    upstream_id TEXT,
    created_at TEXT NOT NULL,
    streamed INTEGER NOT NULL DEFAULT 0,
    cancelled INTEGER NOT NULL DEFAULT 0,
    finish_reason TEXT,
    session_id TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens INTEGER NOT NULL DEFAULT 0,
    total_cost DOUBLE PRECISION NOT NULL DEFAULT 0,
    is_byok INTEGER NOT NULL DEFAULT 0,
    generation_time_ms INTEGER NOT NULL DEFAULT 0,
    latency_ms INTEGER,
    status TEXT NOT NULL,
    error TEXT,
    has_content INTEGER NOT NULL DEFAULT 0
  )`
  yield* sql`CREATE INDEX generations_key_time ON generations (key_hash, created_at)`
  yield* sql`CREATE INDEX generations_workspace_time ON generations (workspace_id, created_at)`
  yield* sql`CREATE TABLE generation_content (
    generation_id TEXT PRIMARY KEY,
    input TEXT NOT NULL,
    output TEXT NOT NULL
  )`
})
