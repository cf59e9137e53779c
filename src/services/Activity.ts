/**
 * Reads of usage for the activity endpoints and the console: sums over the daily rollup
 * (`usage_daily`, src/store/usage-rollup.ts), never a scan of `generations`; and the generation
 * log's keyset-paginated listing (src/services/generation-log.ts). Every read is scoped: the
 * workspaces a management key's user may use, or an inference key's own hash. Every answer is
 * bounded (a range of days, a page, a top N).
 */
import { SqlClient } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import type { ActivityItem, LogParams, UsageSummary } from "../domain/activity.js"
import { SUMMARY_TOP } from "../domain/activity.js"
import { fromNanoUsd } from "../domain/pricing.js"
import { LATENCY_BOUNDS_MS } from "../store/usage-rollup.js"
import { makeLogPage } from "./generation-log.js"

/** Who may see which rows: every row of some workspaces, or one key's. */
export type UsageScope = { readonly workspaces: ReadonlyArray<string> } | { readonly keyHash: string }

export interface UsageFilter {
  readonly workspaceId?: string | undefined
  readonly keyHash?: string | undefined
  readonly userId?: string | undefined
  readonly model?: string | undefined
}

type Sums = {
  requests: number | string
  cost: number | string
  byok: number | string
  prompt: number | string
  completion: number | string
  reasoning: number | string
  errors: number | string
}

const SUMS = `SUM(requests) AS requests, SUM(cost_nano) AS cost, SUM(byok_cost_nano) AS byok, SUM(input_tokens) AS prompt,
  SUM(output_tokens) AS completion, SUM(reasoning_tokens) AS reasoning,
  SUM(CASE WHEN status_code >= 400 THEN requests ELSE 0 END) AS errors`

const totalsOf = (r: Sums) => ({
  requests: Number(r.requests ?? 0),
  usage: fromNanoUsd(Number(r.cost ?? 0)),
  byok_usage: fromNanoUsd(Number(r.byok ?? 0)),
  prompt_tokens: Number(r.prompt ?? 0),
  completion_tokens: Number(r.completion ?? 0),
  reasoning_tokens: Number(r.reasoning ?? 0),
  errors: Number(r.errors ?? 0),
})

/** The days from `from` to `to`, inclusive (both `YYYY-MM-DD`). */
export const daysBetween = (from: string, to: string): Array<string> => {
  const out: Array<string> = []
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10))
  return out
}

/** The upper bound of the bucket holding the q-th quantile of a histogram (the last bucket: its lower bound). */
export const quantileOf = (counts: ReadonlyArray<number>, q: number): number | null => {
  const total = counts.reduce((a, b) => a + b, 0)
  if (total === 0) return null
  const rank = Math.ceil(q * total)
  let seen = 0
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] as number
    if (seen >= rank) return (LATENCY_BOUNDS_MS[i] ?? LATENCY_BOUNDS_MS[LATENCY_BOUNDS_MS.length - 1]) as number
  }
  return null
}

export class Activity extends Effect.Service<Activity>()("Activity", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The workspaces a user owns or is a member of (deleted ones too: their usage still counts). */
    const workspacesOf = (userId: string) =>
      sql<{ id: string }>`SELECT id FROM workspaces w WHERE w.owner_user_id = ${userId}
        OR EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = w.id AND m.user_id = ${userId})`.pipe(
        Effect.map((rows) => rows.map((r) => r.id)),
        Effect.orDie,
      )

    const scopeWhere = (scope: UsageScope, filter: UsageFilter): Array<Fragment> => {
      const parts: Array<Fragment> = []
      if ("keyHash" in scope) parts.push(sql`key_hash = ${scope.keyHash}`)
      else parts.push(scope.workspaces.length === 0 ? sql`1 = 0` : sql`workspace_id IN ${sql.in(scope.workspaces)}`)
      if (filter.workspaceId !== undefined) parts.push(sql`workspace_id = ${filter.workspaceId}`)
      if (filter.keyHash !== undefined) parts.push(sql`key_hash = ${filter.keyHash}`)
      if (filter.userId !== undefined) parts.push(sql`user_id = ${filter.userId}`)
      if (filter.model !== undefined) parts.push(sql`model = ${filter.model}`)
      return parts
    }

    /**
     * The rollup a read sums (migration 24): the finest rows only for one key or user (through
     * their index), else the rows summed over keys; the by-key table, over models and providers,
     * unless a model or key narrows it.
     */
    const tablesFor = (scope: UsageScope, filter: UsageFilter) => {
      const oneKey = "keyHash" in scope || filter.keyHash !== undefined || filter.userId !== undefined
      return {
        main: sql(oneKey ? "usage_daily" : "usage_daily_models"),
        byKey: sql(oneKey || filter.model !== undefined ? "usage_daily" : "usage_daily_keys"),
      }
    }

    /** `GET /v1/activity`: per day and endpoint (and workspace), days `from`..`to` inclusive, newest first. */
    const activity = (scope: UsageScope, filter: UsageFilter, from: string, to: string, byWorkspace: boolean) =>
      Effect.gen(function* () {
        const where = sql.and([sql`day >= ${from}`, sql`day <= ${to}`, ...scopeWhere(scope, filter)])
        const groups = byWorkspace ? sql`day, model, provider_name, workspace_id` : sql`day, model, provider_name`
        const rows = yield* sql<Sums & { day: string; model: string; provider_name: string; workspace_id?: string }>`
          SELECT ${groups}, ${sql.unsafe(SUMS)} FROM ${tablesFor(scope, filter).main} WHERE ${where}
          GROUP BY ${groups} ORDER BY day DESC, model, provider_name`
        return rows.map((r): ActivityItem => {
          const t = totalsOf(r)
          return {
            date: r.day,
            model: r.model,
            model_permaslug: r.model,
            endpoint_id: `${r.model}:${r.provider_name}`,
            provider_name: r.provider_name,
            usage: t.usage,
            byok_usage_inference: t.byok_usage,
            requests: t.requests,
            prompt_tokens: t.prompt_tokens,
            completion_tokens: t.completion_tokens,
            reasoning_tokens: t.reasoning_tokens,
            ...(byWorkspace && r.workspace_id !== undefined ? { workspace_id: r.workspace_id } : {}),
          }
        })
      }).pipe(Effect.orDie)

    /** The console's charts: one pass per grouping over the range's rollup rows. */
    const summary = (scope: UsageScope, filter: UsageFilter, from: string, to: string) =>
      Effect.gen(function* () {
        const where = sql.and([sql`day >= ${from}`, sql`day <= ${to}`, ...scopeWhere(scope, filter)])
        const sums = sql.unsafe(SUMS)
        const { main, byKey } = tablesFor(scope, filter)
        const [totals, days, models, providers, keys, errors] = yield* Effect.all(
          [
            sql<Sums>`SELECT ${sums} FROM ${main} WHERE ${where}`,
            sql<Sums & { day: string }>`SELECT day, ${sums} FROM ${main} WHERE ${where} GROUP BY day`,
            sql<Sums & { model: string }>`SELECT model, ${sums} FROM ${main} WHERE ${where}
              GROUP BY model ORDER BY SUM(cost_nano + byok_cost_nano) DESC, SUM(requests) DESC, model LIMIT ${SUMMARY_TOP}`,
            sql<Sums & { provider_name: string; lat_sum: number | string; lat_n: number | string } & Record<`h${number}`, number | string>>`
              SELECT provider_name, ${sums}, SUM(latency_ms) AS lat_sum, SUM(latency_count) AS lat_n,
                SUM(lat_h0) AS h0, SUM(lat_h1) AS h1, SUM(lat_h2) AS h2, SUM(lat_h3) AS h3,
                SUM(lat_h4) AS h4, SUM(lat_h5) AS h5, SUM(lat_h6) AS h6, SUM(lat_h7) AS h7
              FROM ${main} WHERE ${where} GROUP BY provider_name ORDER BY SUM(requests) DESC, provider_name LIMIT ${SUMMARY_TOP}`,
            sql<Sums & { key_hash: string; name: string | null }>`
              SELECT u.key_hash, (SELECT k.name FROM api_keys k WHERE k.hash = u.key_hash) AS name, u.* FROM (
                SELECT key_hash, ${sums} FROM ${byKey} WHERE ${where}
                GROUP BY key_hash ORDER BY SUM(cost_nano + byok_cost_nano) DESC, SUM(requests) DESC, key_hash LIMIT ${SUMMARY_TOP}) u`,
            sql<{ status_code: number; n: number | string }>`SELECT status_code, SUM(requests) AS n FROM ${main}
              WHERE ${where} AND status_code >= 400 GROUP BY status_code ORDER BY status_code`,
          ],
          { concurrency: 1 },
        )
        const byDay = new Map(days.map((d) => [d.day, totalsOf(d)]))
        const zero = totalsOf({ requests: 0, cost: 0, byok: 0, prompt: 0, completion: 0, reasoning: 0, errors: 0 })
        const data: UsageSummary["data"] = {
          from,
          to,
          totals: totalsOf(totals[0] ?? (zero as never)),
          days: daysBetween(from, to).map((date) => ({ date, ...(byDay.get(date) ?? zero) })),
          by_model: models.map((m) => ({ model: m.model, ...totalsOf(m) })),
          by_provider: providers.map((p) => {
            const counts = [p.h0, p.h1, p.h2, p.h3, p.h4, p.h5, p.h6, p.h7].map((n) => Number(n ?? 0))
            const n = Number(p.lat_n ?? 0)
            return {
              provider_name: p.provider_name,
              ...totalsOf(p),
              latency_p50_ms: quantileOf(counts, 0.5),
              latency_p99_ms: quantileOf(counts, 0.99),
              latency_avg_ms: n === 0 ? null : Math.round(Number(p.lat_sum ?? 0) / n),
            }
          }),
          by_key: keys.map((k) => ({ api_key_hash: k.key_hash, name: k.name ?? null, ...totalsOf(k) })),
          errors_by_status: errors.map((e) => ({ status: Number(e.status_code), count: Number(e.n) })),
        }
        return data
      }).pipe(Effect.orDie)

    const pageOf = makeLogPage(sql)
    /** One page of the log that `scope` may see (src/services/generation-log.ts). */
    const logPage = (scope: UsageScope, params: LogParams) =>
      pageOf(
        scopeWhere(scope, { workspaceId: params.workspace_id, keyHash: params.api_key_hash, model: params.model }),
        "keyHash" in scope ? scope.keyHash : params.api_key_hash,
        params,
      )

    return { workspacesOf, activity, summary, logPage } as const
  }),
}) {}
