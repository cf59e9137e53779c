import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Users, workspaces, members, API keys, the spend ledger and credit grants. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const serial = sql.onDialectOrElse({ pg: () => "SERIAL PRIMARY KEY", orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT" })
  yield* sql`CREATE TABLE users (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE workspaces (
    id TEXT PRIMARY KEY,
    owner_user_id TEXT NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    slug TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    default_text_model TEXT,
    default_image_model TEXT,
    default_provider_sort TEXT,
    io_logging_api_key_ids TEXT,
    io_logging_sampling_rate DOUBLE PRECISION NOT NULL DEFAULT 1,
    is_data_discount_logging_enabled INTEGER NOT NULL DEFAULT 0,
    is_observability_broadcast_enabled INTEGER NOT NULL DEFAULT 0,
    is_observability_io_logging_enabled INTEGER NOT NULL DEFAULT 0,
    disabled_server_tools TEXT,
    is_default INTEGER NOT NULL DEFAULT 0,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    UNIQUE (owner_user_id, slug)
  )`
  yield* sql`CREATE TABLE workspace_members (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL DEFAULT 'member',
    is_scim INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
  )`
  yield* sql.unsafe(`CREATE TABLE api_keys (
    id ${serial},
    hash TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL REFERENCES users(id),
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    is_management INTEGER NOT NULL DEFAULT 0,
    disabled INTEGER NOT NULL DEFAULT 0,
    limit_usd DOUBLE PRECISION,
    limit_reset TEXT,
    include_byok_in_limit INTEGER NOT NULL DEFAULT 0,
    reserved_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    expires_at TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  )`)
  yield* sql`CREATE INDEX api_keys_user ON api_keys (user_id)`
  yield* sql.unsafe(`CREATE TABLE spend (
    id ${serial},
    key_hash TEXT NOT NULL,
    user_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    generation_id TEXT,
    amount_usd DOUBLE PRECISION NOT NULL,
    is_byok INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
  )`)
  yield* sql`CREATE INDEX spend_key_time ON spend (key_hash, created_at)`
  yield* sql`CREATE INDEX spend_user ON spend (user_id)`
  yield* sql.unsafe(`CREATE TABLE credit_grants (
    id ${serial},
    user_id TEXT NOT NULL,
    amount_usd DOUBLE PRECISION NOT NULL,
    note TEXT,
    created_at TEXT NOT NULL
  )`)
  yield* sql`CREATE INDEX credit_grants_user ON credit_grants (user_id)`
})
