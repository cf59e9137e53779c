/**
 * The usage rollup (`usage_daily`, migration 24): what the activity endpoints and the console's
 * charts read, summed per UTC day, key, model, provider and outcome status by the ledger's own
 * commit (src/store/ledger.ts), like the spend rollup beside it: a batch is summed in memory and
 * added with one upsert per row, in sorted order (two Postgres writers lock rows in the same
 * order). A batch of one key and one model is three upserts whatever its size (the finest row and
 * its two coarser sums, migration 24); nothing scans `generations` to answer a usage question.
 * Measured on a SQLite file (a micro-benchmark of the prepared-statement writer, 20-row batches of
 * one key and model, this 2-core machine under other load): the summing and the three upserts
 * cost ~3 µs of CPU per generation, against ~40-50 µs for the whole ledger write of that batch.
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

type Sums = { -readonly [K in (typeof SUMMED)[number]]: number }

/** A row of `usage_daily_models`: the finest rows summed over keys. */
export type UsageModelRow = Sums & {
  readonly day: string
  readonly workspace_id: string
  readonly model: string
  readonly provider_name: string
  readonly status_code: number
}

/** A row of `usage_daily_keys`: the finest rows summed over models and providers. */
export type UsageKeyRow = Sums & { readonly day: string; readonly workspace_id: string; readonly key_hash: string; readonly status_code: number }

const sumsOf = (r: UsageDayRow): Sums => {
  const out = {} as Sums
  for (const c of SUMMED) out[c] = r[c]
  return out
}

/** The finest rows summed into the two coarser rollups, each sorted by its primary key. */
export const coarsen = (rows: ReadonlyArray<UsageDayRow>): { models: Array<UsageModelRow>; keys: Array<UsageKeyRow> } => {
  const models = new Map<string, UsageModelRow>()
  const keys = new Map<string, UsageKeyRow>()
  const into = <R extends Sums>(map: Map<string, R>, id: string, make: () => R, r: UsageDayRow) => {
    const had = map.get(id)
    if (had === undefined) map.set(id, make())
    else for (const c of SUMMED) had[c] += r[c]
  }
  for (const r of rows) {
    into(models, `${r.day}\u0000${r.workspace_id}\u0000${r.model}\u0000${r.provider_name}\u0000${r.status_code}`, () => ({
      day: r.day, workspace_id: r.workspace_id, model: r.model, provider_name: r.provider_name, status_code: r.status_code, ...sumsOf(r),
    }), r)
    into(keys, `${r.day}\u0000${r.workspace_id}\u0000${r.key_hash}\u0000${r.status_code}`, () => ({
      day: r.day, workspace_id: r.workspace_id, key_hash: r.key_hash, status_code: r.status_code, ...sumsOf(r),
    }), r)
  }
  const sorted = <R,>(map: Map<string, R>) => [...map.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r)
  return { models: sorted(models), keys: sorted(keys) }
}

const upsertTail = (table: string, key: string) =>
  `ON CONFLICT (${key}) DO UPDATE SET ${SUMMED.map((c) => `${c} = ${table}.${c} + excluded.${c}`).join(", ")}`
const FINE_TAIL = upsertTail("usage_daily", "day, key_hash, model, provider_name, status_code")
const MODELS_TAIL = upsertTail("usage_daily_models", "day, workspace_id, model, provider_name, status_code")
const KEYS_TAIL = upsertTail("usage_daily_keys", "day, workspace_id, key_hash, status_code")
const MODEL_COLUMNS = ["day", "workspace_id", "model", "provider_name", "status_code", ...SUMMED] as const
const KEY_COLUMNS = ["day", "workspace_id", "key_hash", "status_code", ...SUMMED] as const

/** A JSON text with an escaped lone surrogate, which Postgres's json cannot turn into text (as in src/store/ledger.ts). */
const LONE_SURROGATE_ESCAPE = /\\ud[89a-f]/i

/**
 * The rows added through @effect/sql, in the caller's transaction. On Postgres one statement: the
 * three upserts as data-modifying CTEs, each table's rows as one JSON parameter (as the ledger
 * sends its generation rows: ~70 bound values a commit otherwise). Elsewhere (an in-memory SQLite),
 * or for rows Postgres's json could not read back, three upserts of bound values.
 */
export const addUsageWith = (sql: SqlClient.SqlClient, rows: ReadonlyArray<UsageDayRow>) => {
  if (rows.length === 0) return Effect.void
  const { models, keys } = coarsen(rows)
  const json = sql.onDialectOrElse({ pg: () => [JSON.stringify(rows), JSON.stringify(models), JSON.stringify(keys)] as const, orElse: () => undefined })
  if (json === undefined || json.some((text) => LONE_SURROGATE_ESCAPE.test(text))) {
    return Effect.asVoid(
      Effect.all([
        sql`INSERT INTO usage_daily ${sql.insert(rows)} ${sql.unsafe(FINE_TAIL)}`,
        sql`INSERT INTO usage_daily_models ${sql.insert(models)} ${sql.unsafe(MODELS_TAIL)}`,
        sql`INSERT INTO usage_daily_keys ${sql.insert(keys)} ${sql.unsafe(KEYS_TAIL)}`,
      ]),
    )
  }
  const upsert = (table: string, columns: ReadonlyArray<string>, text: string, tail: string) => {
    const list = sql.unsafe(columns.join(", "))
    return sql`INSERT INTO ${sql(table)} (${list}) SELECT ${list} FROM json_populate_recordset(NULL::${sql(table)}, ${text}::json) ${sql.unsafe(tail)}`
  }
  return Effect.asVoid(sql`WITH fine AS (${upsert("usage_daily", COLUMNS, json[0], FINE_TAIL)} RETURNING 1),
    by_model AS (${upsert("usage_daily_models", MODEL_COLUMNS, json[1], MODELS_TAIL)} RETURNING 1)
    ${upsert("usage_daily_keys", KEY_COLUMNS, json[2], KEYS_TAIL)}`)
}

/** The rows added with prepared statements on a SQLite connection, in the caller's transaction. */
export const usageAdderOn = (db: Database): ((rows: ReadonlyArray<UsageDayRow>) => void) => {
  const prepare = (table: string, columns: ReadonlyArray<string>, tail: string) =>
    db.prepare<unknown, [Record<string, string | number>]>(
      `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((c) => `$${c}`).join(", ")}) ${tail}`,
    )
  const fine = prepare("usage_daily", COLUMNS, FINE_TAIL)
  const byModel = prepare("usage_daily_models", MODEL_COLUMNS, MODELS_TAIL)
  const byKey = prepare("usage_daily_keys", KEY_COLUMNS, KEYS_TAIL)
  return (rows) => {
    if (rows.length === 0) return
    const { models, keys } = coarsen(rows)
    for (const r of rows) fine.run(r as unknown as Record<string, string | number>)
    for (const r of models) byModel.run(r as unknown as Record<string, string | number>)
    for (const r of keys) byKey.run(r as unknown as Record<string, string | number>)
  }
}
