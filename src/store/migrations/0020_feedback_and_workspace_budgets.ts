import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Feedback on generations (`POST /generation/feedback`) and workspace budgets
 * (`/workspaces/{id}/budgets/{interval}`, docs/api.md). A budget is one row per workspace and
 * interval, removed with its workspace; whether BYOK spend counts toward a workspace's budgets is
 * one flag on the workspace. Its spend is read from `spend_daily` by workspace and day.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE generation_feedback (
    id TEXT PRIMARY KEY,
    generation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key_hash TEXT NOT NULL,
    category TEXT NOT NULL,
    comment TEXT,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX generation_feedback_generation ON generation_feedback (generation_id)`
  yield* sql`CREATE TABLE workspace_budgets (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    reset_interval TEXT NOT NULL,
    limit_nano BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (workspace_id, reset_interval)
  )`
  yield* sql`ALTER TABLE workspaces ADD COLUMN include_byok_in_budgets INTEGER NOT NULL DEFAULT 0`
  yield* sql`CREATE INDEX spend_daily_workspace ON spend_daily (workspace_id, day)`
})
