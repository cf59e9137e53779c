import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Presets (one per user and slug) and their immutable versions. `latest_version` is the
 * per-preset counter new versions take their number from; `designated_version_id` points at
 * the version requests use (the latest). No foreign key to workspaces: a preset outlives the
 * workspace of the key that created it.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE presets (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    workspace_id TEXT NOT NULL,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'active',
    latest_version INTEGER NOT NULL,
    designated_version_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    status_updated_at TEXT NOT NULL,
    UNIQUE (user_id, slug)
  )`
  yield* sql`CREATE TABLE preset_versions (
    id TEXT PRIMARY KEY,
    preset_id TEXT NOT NULL REFERENCES presets(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    config TEXT NOT NULL,
    system_prompt TEXT,
    creator_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (preset_id, version)
  )`
})
