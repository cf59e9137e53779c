/**
 * Workspace budgets as the official SDK of this API family validates them (`workspaces.getBudget`,
 * `setBudget`, `deleteBudget`, `listBudgets`): one spending limit per workspace and interval
 * (docs/api.md, "Workspace budgets").
 */
import { Schema } from "effect"
import { Usd } from "./keys.js"

export const BUDGET_INTERVALS = ["daily", "weekly", "monthly", "lifetime"] as const
export const BudgetInterval = Schema.Literal(...BUDGET_INTERVALS).annotations({
  message: () => ({ message: `must be one of ${BUDGET_INTERVALS.join(", ")}`, override: true }),
})
export type BudgetInterval = typeof BudgetInterval.Type

export const BudgetPath = Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })),
  interval: BudgetInterval,
})

export const WorkspaceBudget = Schema.Struct({
  id: Schema.String,
  workspace_id: Schema.String,
  limit_usd: Schema.Number,
  /** null for `lifetime`. */
  reset_interval: Schema.NullOr(Schema.Literal("daily", "weekly", "monthly")),
  created_at: Schema.String,
  updated_at: Schema.String,
  /** Beyond the SDK's fields: the interval as the path names it, and the workspace's spend in the current window. */
  interval: BudgetInterval,
  usage_usd: Schema.Number,
  remaining_usd: Schema.Number,
  /** When the current window ends (null for `lifetime`). */
  resets_at: Schema.NullOr(Schema.String),
})
export type WorkspaceBudget = typeof WorkspaceBudget.Type

export const WorkspaceBudgetData = Schema.Struct({ data: WorkspaceBudget, include_byok_in_budgets: Schema.Boolean })
export const WorkspaceBudgetList = Schema.Struct({ data: Schema.Array(WorkspaceBudget), include_byok_in_budgets: Schema.Boolean })

export const UpsertBudgetPayload = Schema.Struct({
  /** A key's limit's rules: below a nano-dollar a positive budget would be stored as 0. */
  limit_usd: Usd,
  /** Whether spend through BYOK providers counts toward every budget of the workspace (unchanged when absent). */
  include_byok_in_budgets: Schema.optional(Schema.Boolean),
})
export type UpsertBudgetPayload = typeof UpsertBudgetPayload.Type
