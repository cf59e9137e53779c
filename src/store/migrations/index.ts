/**
 * The one migration set both engines run, in order. Append new migrations; never edit one
 * that has shipped. Portable SQL; where dialects differ, `sql.onDialectOrElse` in that query.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Effect } from "effect"
import foundation from "./0001_foundation.js"
import presets from "./0003_presets.js"
import generations from "./0004_generations.js"
import destinations from "./0005_destinations.js"
import reservations from "./0006_reservations.js"
import ledgerIndexes from "./0007_ledger_indexes.js"
import spendDaily from "./0008_spend_daily.js"
import usageEstimated from "./0009_usage_estimated.js"
import generationClient from "./0010_generation_client.js"
import moneyNano from "./0011_money_nano.js"
import holdLeases from "./0012_hold_leases.js"
import budgetSlices from "./0013_budget_slices.js"
import broadcast from "./0014_broadcast.js"
import generationRouter from "./0015_generation_router.js"
import generationServerTools from "./0016_generation_server_tools.js"
import broadcastBatches from "./0017_broadcast_batches.js"
import generationParent from "./0018_generation_parent.js"
import feedbackAndWorkspaceBudgets from "./0020_feedback_and_workspace_budgets.js"
import keyRateLimits from "./0026_key_rate_limits.js"
import usageDaily from "./0024_usage_daily.js"
import generationLogIndexes from "./0025_generation_log_indexes.js"
import broadcastBatchBytes from "./0027_broadcast_batch_bytes.js"
import generationLogSpans from "./0028_generation_log_spans.js"

export interface Migration {
  readonly id: number
  readonly name: string
  readonly up: Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient>
}

export const migrations: ReadonlyArray<Migration> = [
  { id: 1, name: "foundation", up: foundation },
  { id: 3, name: "presets", up: presets },
  { id: 4, name: "generations", up: generations },
  { id: 5, name: "destinations", up: destinations },
  { id: 6, name: "reservations", up: reservations },
  { id: 7, name: "ledger_indexes", up: ledgerIndexes },
  { id: 8, name: "spend_daily", up: spendDaily },
  { id: 9, name: "usage_estimated", up: usageEstimated },
  { id: 10, name: "generation_client", up: generationClient },
  { id: 11, name: "money_nano", up: moneyNano },
  { id: 12, name: "hold_leases", up: holdLeases },
  { id: 13, name: "budget_slices", up: budgetSlices },
  { id: 14, name: "broadcast", up: broadcast },
  { id: 15, name: "generation_router", up: generationRouter },
  { id: 16, name: "generation_server_tools", up: generationServerTools },
  { id: 17, name: "broadcast_batches", up: broadcastBatches },
  { id: 18, name: "generation_parent", up: generationParent },
  { id: 20, name: "feedback_and_workspace_budgets", up: feedbackAndWorkspaceBudgets },
  { id: 24, name: "usage_daily", up: usageDaily },
  { id: 25, name: "generation_log_indexes", up: generationLogIndexes },
  { id: 26, name: "key_rate_limits", up: keyRateLimits },
  { id: 27, name: "broadcast_batch_bytes", up: broadcastBatchBytes },
  { id: 28, name: "generation_log_spans", up: generationLogSpans },
]
