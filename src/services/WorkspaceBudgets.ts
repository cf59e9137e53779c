/**
 * Workspace budgets (docs/api.md, "Workspace budgets"): at most one spending limit per workspace
 * and interval (`daily`, `weekly`, `monthly`, `lifetime`), stored and reported with the
 * workspace's spend in the interval's current window, read from the daily rollup by workspace
 * (UTC windows, as key limits: src/domain/windows.ts). They are not enforced on requests: a
 * request is held only against its key's limit and the credits (src/services/Spend.ts); a
 * hard cap on a workspace is a limit on each of its keys.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { BudgetInterval, WorkspaceBudget } from "../domain/budgets.js"
import { fromNanoUsd, toNanoUsd } from "../domain/pricing.js"
import { limitWindowStart, nextReset } from "../domain/windows.js"
import { dayOf } from "../store/spend-rollup.js"

interface BudgetRow {
  readonly id: string
  readonly workspace_id: string
  readonly reset_interval: BudgetInterval
  readonly limit_nano: number
  readonly created_at: string
  readonly updated_at: string
}

const resetOf = (interval: BudgetInterval) => (interval === "lifetime" ? null : interval)

export class WorkspaceBudgets extends Effect.Service<WorkspaceBudgets>()("WorkspaceBudgets", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const includesByok = (workspaceId: string) =>
      Effect.map(
        sql<{ b: number }>`SELECT include_byok_in_budgets AS b FROM workspaces WHERE id = ${workspaceId}`,
        (rows) => Number(rows[0]?.b ?? 0) === 1,
      )

    /** The row with the workspace's spend in its current window. */
    const view = (row: BudgetRow, includeByok: boolean, nowMs: number) =>
      Effect.gen(function* () {
        const reset = resetOf(row.reset_interval)
        const since = limitWindowStart(reset, nowMs)
        const spent = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily
          WHERE workspace_id = ${row.workspace_id}
          ${includeByok ? sql`` : sql`AND is_byok = 0`}
          ${since === undefined ? sql`` : sql`AND day >= ${dayOf(since)}`}`
        const spentNano = Number(spent[0]?.total ?? 0)
        const limitNano = Number(row.limit_nano)
        return {
          id: row.id,
          workspace_id: row.workspace_id,
          limit_usd: fromNanoUsd(limitNano),
          reset_interval: reset,
          created_at: row.created_at,
          updated_at: row.updated_at,
          interval: row.reset_interval,
          usage_usd: fromNanoUsd(spentNano),
          remaining_usd: fromNanoUsd(Math.max(0, limitNano - spentNano)),
          resets_at: nextReset(reset, nowMs)?.toISOString() ?? null,
        } satisfies WorkspaceBudget
      })

    const rowOf = (workspaceId: string, interval: BudgetInterval) =>
      Effect.map(
        sql<BudgetRow>`SELECT * FROM workspace_budgets WHERE workspace_id = ${workspaceId} AND reset_interval = ${interval}`,
        (rows) => Option.fromNullable(rows[0]),
      )

    /** The budgets of a workspace, daily to lifetime, and whether BYOK spend counts toward them. */
    const list = (workspaceId: string) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const includeByok = yield* includesByok(workspaceId)
        const rows = yield* sql<BudgetRow>`SELECT * FROM workspace_budgets WHERE workspace_id = ${workspaceId}`
        const order = (r: BudgetRow) => ["daily", "weekly", "monthly", "lifetime"].indexOf(r.reset_interval)
        const data = yield* Effect.forEach([...rows].sort((a, b) => order(a) - order(b)), (r) => view(r, includeByok, nowMs))
        return { data, include_byok_in_budgets: includeByok }
      }).pipe(Effect.orDie)

    /** One budget, or none for that interval. */
    const get = (workspaceId: string, interval: BudgetInterval) =>
      Effect.gen(function* () {
        const row = yield* rowOf(workspaceId, interval)
        if (Option.isNone(row)) return Option.none()
        const includeByok = yield* includesByok(workspaceId)
        const data = yield* view(row.value, includeByok, yield* Clock.currentTimeMillis)
        return Option.some({ data, include_byok_in_budgets: includeByok })
      }).pipe(Effect.orDie)

    /** Sets the interval's limit (creating the budget or changing it) and, when given, the BYOK flag, in one transaction. */
    const put = (workspaceId: string, interval: BudgetInterval, limitUsd: number, includeByok: boolean | undefined) =>
      Effect.gen(function* () {
        const nowMs = yield* Clock.currentTimeMillis
        const now = new Date(nowMs).toISOString()
        const limitNano = toNanoUsd(limitUsd)
        yield* sql.withTransaction(
          Effect.gen(function* () {
            if (includeByok !== undefined) {
              yield* sql`UPDATE workspaces SET include_byok_in_budgets = ${includeByok ? 1 : 0} WHERE id = ${workspaceId}`
            }
            // One statement: two writers of the same interval leave one row, the last limit.
            yield* sql`INSERT INTO workspace_budgets (id, workspace_id, reset_interval, limit_nano, created_at, updated_at)
              VALUES (${crypto.randomUUID()}, ${workspaceId}, ${interval}, ${limitNano}, ${now}, ${now})
              ON CONFLICT (workspace_id, reset_interval) DO UPDATE SET limit_nano = excluded.limit_nano, updated_at = excluded.updated_at`
          }),
        )
        const row = yield* rowOf(workspaceId, interval)
        const flag = yield* includesByok(workspaceId)
        return { data: yield* view(Option.getOrThrow(row), flag, nowMs), include_byok_in_budgets: flag }
      }).pipe(Effect.orDie)

    /** Removes the interval's budget: whether there was one. */
    const remove = (workspaceId: string, interval: BudgetInterval) =>
      Effect.map(
        sql<{ id: string }>`DELETE FROM workspace_budgets WHERE workspace_id = ${workspaceId} AND reset_interval = ${interval} RETURNING id`,
        (rows) => rows.length > 0,
      ).pipe(Effect.orDie)

    return { list, get, put, remove } as const
  }),
}) {}
