/**
 * The usage rollup (`usage_daily`, migration 24): what the activity endpoints and the console's
 * charts read, summed per UTC day, key, model, provider and outcome status by the ledger's own
 * commit (src/store/ledger.ts), like the spend rollup beside it: a batch is summed in memory and
 * added with one upsert per row, in sorted order (two Postgres writers lock rows in the same
 * order). A batch of one key and one model is one upsert whatever its size; nothing scans
 * `generations` to answer a usage question.
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, type Types } from "effect"
import type { GenerationEntry } from "../domain/generations.js"
import { toNanoUsd } from "../domain/pricing.js"

/** Upper bounds (ms, exclusive) of the time-to-first-token buckets `lat_h0`..`lat_h6`; `lat_h7` is the rest. */
export const LATENCY_BOUNDS_MS: ReadonlyArray<number> = [250, 500, 1000, 2000, 4000, 8000, 16000]

/** A row of `usage_daily` (a type alias, so it is a record `sql.insert` takes). */
export type UsageDayRow = {
  readonly day: string
  readonly key_hash: string
  readonly model: string
  readonly provider_name: string
  readonly status_code: number
  readonly user_id: string
  readonly workspace_id: string
  readonly requests: number
  readonly input_tokens: number
  readonly cached_tokens: number
  readonly output_tokens: number
  readonly reasoning_tokens: number
  /** Nano-dollars spent on credits (not BYOK). */
  readonly cost_nano: number
  /** Nano-dollars spent through the user's own provider keys. */
  readonly byok_cost_nano: number
  readonly generation_ms: number
  readonly latency_ms: number
  readonly latency_count: number
  readonly lat_h0: number
  readonly lat_h1: number
  readonly lat_h2: number
  readonly lat_h3: number
  readonly lat_h4: number
  readonly lat_h5: number
  readonly lat_h6: number
  readonly lat_h7: number
}

const SUMMED = [
  "requests", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "cost_nano", "byok_cost_nano",
  "generation_ms", "latency_ms", "latency_count", "lat_h0", "lat_h1", "lat_h2", "lat_h3", "lat_h4", "lat_h5", "lat_h6", "lat_h7",
] as const

const COLUMNS = ["day", "key_hash", "model", "provider_name", "status_code", "user_id", "workspace_id", ...SUMMED] as const

/** The outcome a row is counted under: 200 for an answer, the caller's status for a failure, 499 for a cancellation. */
export const statusCodeOf = (e: Pick<GenerationEntry, "status" | "error">): number =>
  e.status === "cancelled" ? 499 : e.status === "failed" ? (e.error?.status ?? 500) : 200

const count = (n: number) => Math.max(0, Math.round(Number.isFinite(n) ? n : 0))

const bucketOf = (ms: number): number => {
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) if (ms < (LATENCY_BOUNDS_MS[i] as number)) return i
  return LATENCY_BOUNDS_MS.length
}

const add = (row: Types.Mutable<UsageDayRow>, e: GenerationEntry) => {
  row.requests += 1
  row.input_tokens += count(e.inputTokens)
  row.cached_tokens += count(e.cachedTokens)
  row.output_tokens += count(e.outputTokens)
  row.reasoning_tokens += count(e.reasoningTokens)
  if (e.isByok) row.byok_cost_nano += toNanoUsd(e.totalCost)
  else row.cost_nano += toNanoUsd(e.totalCost)
  row.generation_ms += count(e.generationTimeMs)
  if (e.latencyMs !== null) {
    const ms = count(e.latencyMs)
    row.latency_ms += ms
    row.latency_count += 1
    const h = `lat_h${bucketOf(ms)}` as "lat_h0"
    row[h] += 1
  }
}

const emptyRow = (e: GenerationEntry, day: string, status: number): Types.Mutable<UsageDayRow> => ({
  day,
  key_hash: e.keyHash,
  model: e.model,
  provider_name: e.providerName,
  status_code: status,
  user_id: e.userId,
  workspace_id: e.workspaceId,
  requests: 0, input_tokens: 0, cached_tokens: 0, output_tokens: 0, reasoning_tokens: 0, cost_nano: 0, byok_cost_nano: 0,
  generation_ms: 0, latency_ms: 0, latency_count: 0,
  lat_h0: 0, lat_h1: 0, lat_h2: 0, lat_h3: 0, lat_h4: 0, lat_h5: 0, lat_h6: 0, lat_h7: 0,
})

/** The entries summed per (day, key, model, provider, status), sorted by that key. */
export const rollUpUsage = (entries: ReadonlyArray<GenerationEntry>): Array<UsageDayRow> => {
  const rows = new Map<string, Types.Mutable<UsageDayRow>>()
  // A batch comes in runs of one key, model and day: a run is summed without building its map key.
  let last: Types.Mutable<UsageDayRow> | undefined
  for (const e of entries) {
    const status = statusCodeOf(e)
    if (
      last !== undefined && e.keyHash === last.key_hash && e.model === last.model && e.providerName === last.provider_name &&
      status === last.status_code && e.createdAt.startsWith(last.day)
    ) {
      add(last, e)
      continue
    }
    const day = e.createdAt.slice(0, 10)
    const id = `${day}\u0000${e.keyHash}\u0000${e.model}\u0000${e.providerName}\u0000${status}`
    let row = rows.get(id)
    if (row === undefined) {
      row = emptyRow(e, day, status)
      rows.set(id, row)
    }
    add(row, e)
    last = row
  }
  return [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row)
}

const UPSERT_TAIL = `ON CONFLICT (day, key_hash, model, provider_name, status_code) DO UPDATE SET ${SUMMED.map(
  (c) => `${c} = usage_daily.${c} + excluded.${c}`,
).join(", ")}`

/** The rows added through @effect/sql (Postgres, an in-memory SQLite), in the caller's transaction. */
export const addUsageWith = (sql: SqlClient.SqlClient, rows: ReadonlyArray<UsageDayRow>) =>
  rows.length === 0 ? Effect.void : Effect.asVoid(sql`INSERT INTO usage_daily ${sql.insert(rows)} ${sql.unsafe(UPSERT_TAIL)}`)

/** The rows added with a prepared statement on a SQLite connection, in the caller's transaction. */
export const usageAdderOn = (db: Database): ((rows: ReadonlyArray<UsageDayRow>) => void) => {
  const upsert = db.prepare<unknown, [UsageDayRow]>(
    `INSERT INTO usage_daily (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map((c) => `$${c}`).join(", ")}) ${UPSERT_TAIL}`,
  )
  return (rows) => {
    for (const r of rows) upsert.run(r)
  }
}
