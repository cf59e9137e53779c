/**
 * How much each model is used, for the popularity sorts of `GET /models` (docs/models.md): the
 * requests served in the last 30 UTC days and the tokens processed in the last 7, read from the
 * ledger's activity rollup per model (src/store/usage-rollup.ts), at most once a minute per
 * process and only when a listing asks for them. A listing that sorts otherwise reads nothing.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect } from "effect"
import { dayOf } from "../store/spend-rollup.js"

export interface UsageSnapshot {
  /** Requests served per model id, the last 30 days (today included). */
  readonly requests30d: ReadonlyMap<string, number>
  /** Input plus output tokens per model id, the last 7 days (today included). */
  readonly tokens7d: ReadonlyMap<string, number>
}

const DAY_MS = 86_400_000
export const USAGE_REFRESH = Duration.minutes(1)

export class ModelUsage extends Effect.Service<ModelUsage>()("ModelUsage", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const read = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const since30 = dayOf(new Date(now - 29 * DAY_MS).toISOString())
      const since7 = dayOf(new Date(now - 6 * DAY_MS).toISOString())
      // The activity rollup the ledger keeps (src/store/usage-rollup.ts); a failed request served
      // nothing and is not counted (answered: 200; cancelled by its client: 499).
      const rows = yield* sql<{ model: string; requests: number; tokens: number }>`SELECT model,
          SUM(requests) AS requests,
          SUM(CASE WHEN day >= ${since7} THEN input_tokens + output_tokens ELSE 0 END) AS tokens
        FROM usage_daily_models WHERE day >= ${since30} AND status_code IN (200, 499) GROUP BY model`
      return {
        requests30d: new Map(rows.map((r) => [r.model, Number(r.requests)])),
        tokens7d: new Map(rows.map((r) => [r.model, Number(r.tokens)])),
      } satisfies UsageSnapshot
    }).pipe(Effect.orDie)

    /** The snapshot, read again once it is a minute old (concurrent askers share one read). */
    const snapshot = yield* Effect.cachedWithTTL(read, USAGE_REFRESH)

    return { snapshot } as const
  }),
}) {}
