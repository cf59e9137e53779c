/**
 * The ledger's rows and the two ways a batch of them is committed in one transaction: through
 * @effect/sql (Postgres, and an in-memory SQLite), or, for a SQLite file, with prepared
 * statements on a connection of the writer's own. Each batch adds its spend to the daily rollup
 * (src/store/spend-rollup.ts): one upsert per key and day, not a row per generation; and its usage
 * to the activity rollup (src/store/usage-rollup.ts): one upsert per day, key, model, provider and
 * outcome; and where its generations lie in the log, by key and by model (src/store/log-spans.ts).
 * Measured on this machine (bench/scratch micro-benchmark, 20-row batches of a generation and
 * what was then its spend row): 25-40 µs of CPU per row through @effect/sql (the statement
 * machinery per call), 17 µs per row with prepared statements, nearly all of it SQLite's own b-tree work; the
 * generation row alone ~8 µs.
 */
import type { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import type { GenerationEntry, GenerationError, GenerationStatus, StoredGeneration } from "../domain/generations.js"
import { fromNanoUsd, toNanoUsd } from "../domain/pricing.js"
import { BACKSTOP_AUTOCHECKPOINT } from "./checkpoints.js"
import { addLogSpansWith, logSpanAdderOn, logSpansOf } from "./log-spans.js"
import { type SettleArgs, settlementsOn, settlementsWith } from "./settlement.js"
import { addSpendWith, rollUp, type SpendItem, spendAdderOn } from "./spend-rollup.js"
import { addUsageWith, rollUpUsage, usageAdderOn } from "./usage-rollup.js"

/** A row of `generations` (a type alias, so it is a record `sql.insert` takes). */
export type GenerationRow = {
  readonly id: string
  readonly key_hash: string
  readonly user_id: string
  readonly workspace_id: string
  readonly model: string
  readonly provider_name: string
  readonly upstream_model: string
  readonly upstream_id: string | null
  readonly created_at: string
  readonly streamed: number
  readonly cancelled: number
  readonly finish_reason: string | null
  readonly session_id: string | null
  readonly input_tokens: number
  readonly cached_tokens: number
  readonly cache_write_tokens: number
  readonly output_tokens: number
  readonly reasoning_tokens: number
  /** Nano-dollars (1e-9 USD), the cost rounded once (`toNanoUsd`). */
  readonly total_cost_nano: number
  readonly is_byok: number
  readonly generation_time_ms: number
  readonly latency_ms: number | null
  readonly status: GenerationStatus
  readonly error: string | null
  readonly has_content: number
  readonly usage_estimated: number
  readonly http_referer: string | null
  readonly app_title: string | null
  readonly user_agent: string | null
  readonly router: string | null
  readonly num_search_results: number | null
  readonly num_fetches: number | null
  readonly web_search_engine: string | null
  readonly parent_generation_id: string | null
}

const count = (n: number) => Math.max(0, Math.round(Number.isFinite(n) ? n : 0))
const bit = (b: boolean) => (b ? 1 : 0)

export const toRow = (e: GenerationEntry): GenerationRow => ({
  id: e.id,
  key_hash: e.keyHash,
  user_id: e.userId,
  workspace_id: e.workspaceId,
  model: e.model,
  provider_name: e.providerName,
  upstream_model: e.upstreamModel,
  upstream_id: e.upstreamId ?? null,
  created_at: e.createdAt,
  streamed: bit(e.streamed),
  cancelled: bit(e.cancelled),
  finish_reason: e.finishReason,
  session_id: e.sessionId,
  input_tokens: count(e.inputTokens),
  cached_tokens: count(e.cachedTokens),
  cache_write_tokens: count(e.cacheWriteTokens),
  output_tokens: count(e.outputTokens),
  reasoning_tokens: count(e.reasoningTokens),
  total_cost_nano: toNanoUsd(e.totalCost),
  is_byok: bit(e.isByok),
  generation_time_ms: count(e.generationTimeMs),
  latency_ms: e.latencyMs === null ? null : count(e.latencyMs),
  status: e.status,
  error: e.error == null ? null : JSON.stringify(e.error),
  has_content: bit(e.content != null),
  usage_estimated: bit(e.usageEstimated === true),
  http_referer: e.httpReferer ?? null,
  app_title: e.appTitle ?? null,
  user_agent: e.userAgent ?? null,
  router: e.router ?? null,
  num_search_results: e.numSearchResults ?? null,
  num_fetches: e.numFetches ?? null,
  web_search_engine: e.webSearchEngine ?? null,
  parent_generation_id: e.parentGenerationId ?? null,
})

export const fromRow = (r: GenerationRow): StoredGeneration => ({
  id: r.id,
  keyHash: r.key_hash,
  userId: r.user_id,
  workspaceId: r.workspace_id,
  model: r.model,
  providerName: r.provider_name,
  upstreamModel: r.upstream_model,
  upstreamId: r.upstream_id,
  createdAt: r.created_at,
  streamed: Number(r.streamed) === 1,
  cancelled: Number(r.cancelled) === 1,
  finishReason: r.finish_reason,
  sessionId: r.session_id,
  inputTokens: Number(r.input_tokens),
  cachedTokens: Number(r.cached_tokens),
  cacheWriteTokens: Number(r.cache_write_tokens),
  outputTokens: Number(r.output_tokens),
  reasoningTokens: Number(r.reasoning_tokens),
  totalCost: fromNanoUsd(r.total_cost_nano),
  isByok: Number(r.is_byok) === 1,
  generationTimeMs: Number(r.generation_time_ms),
  latencyMs: r.latency_ms === null ? null : Number(r.latency_ms),
  status: r.status,
  error: r.error === null ? null : (JSON.parse(r.error) as GenerationError),
  hasContent: Number(r.has_content) === 1,
  usageEstimated: Number(r.usage_estimated) === 1,
  httpReferer: r.http_referer ?? null,
  appTitle: r.app_title ?? null,
  userAgent: r.user_agent ?? null,
  // Only when a router chose: a record of a named model reads back as it was written.
  ...(r.router == null ? {} : { router: r.router }),
  // Only when a server tool ran: other records read back as they were written.
  ...(r.num_search_results == null ? {} : { numSearchResults: Number(r.num_search_results) }),
  ...(r.num_fetches == null ? {} : { numFetches: Number(r.num_fetches) }),
  ...(r.web_search_engine == null ? {} : { webSearchEngine: r.web_search_engine }),
  // Only on an inner call's record (fusion's panel and judge).
  ...(r.parent_generation_id == null ? {} : { parentGenerationId: r.parent_generation_id }),
})

/** The columns of `generations`: the prepared insert binds a row's fields by these names. */
export const GENERATION_COLUMNS: ReadonlyArray<keyof GenerationRow> = [
  "id", "key_hash", "user_id", "workspace_id", "model", "provider_name", "upstream_model", "upstream_id",
  "created_at", "streamed", "cancelled", "finish_reason", "session_id", "input_tokens", "cached_tokens",
  "cache_write_tokens", "output_tokens", "reasoning_tokens", "total_cost_nano", "is_byok", "generation_time_ms",
  "latency_ms", "status", "error", "has_content", "usage_estimated", "http_referer", "app_title", "user_agent",
  "router", "num_search_results", "num_fetches", "web_search_engine", "parent_generation_id",
]

const contentRowOf = (e: GenerationEntry) =>
  e.content == null
    ? undefined
    : { generation_id: e.id, input: JSON.stringify(e.content.input), output: JSON.stringify(e.content.output) }

/** What a generation adds to the spend ledger (its key's usage, its user's credits). */
const spendOf = (e: GenerationEntry): SpendItem => ({
  keyHash: e.keyHash,
  userId: e.userId,
  workspaceId: e.workspaceId,
  amountUsd: e.totalCost,
  isByok: e.isByok,
  createdAt: e.createdAt,
})

/**
 * Rows another feature commits with a batch of generations (the hooks of src/services/LedgerHooks.ts,
 * e.g. the broadcast outbox). Table and column names come from code, never from input.
 */
export interface LedgerRows {
  readonly table: string
  /** Every row has exactly these keys. */
  readonly columns: ReadonlyArray<string>
  readonly rows: ReadonlyArray<Readonly<Record<string, string | number | null>>>
}

/** A JSON text with an escaped lone surrogate (`\ud800`), which Postgres's json cannot turn into text. */
const LONE_SURROGATE_ESCAPE = /\\ud[89a-f]/i

/**
 * A multi-row INSERT of rows with the same keys. On Postgres the rows go as one JSON parameter
 * (`json_populate_recordset`): one statement text whatever the count, and the rows serialized
 * natively instead of bound one value at a time (~35 parameters a generation, the most of the
 * gateway's CPU that Postgres cost over SQLite per request). Rows whose JSON Postgres could not read
 * back (an escaped lone surrogate in a string) go as bound values, as everywhere else.
 */
const insertRows = (sql: SqlClient.SqlClient, table: string, rows: ReadonlyArray<Record<string, string | number | null>>) => {
  const json = sql.onDialectOrElse({ pg: () => JSON.stringify(rows), orElse: () => undefined })
  if (json === undefined || LONE_SURROGATE_ESCAPE.test(json)) return sql`INSERT INTO ${sql(table)} ${sql.insert(rows as Array<Record<string, string | number | null>>)}`
  // Names from code (the row builders, the ledger hooks' LedgerRows), never from input.
  const columns = sql.csv(Object.keys(rows[0] ?? {}).map((c) => `"${c}"`))
  return sql`INSERT INTO ${sql(table)} (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${sql(table)}, ${json}::json)`
}

/**
 * One transaction through @effect/sql: the generation rows, their content rows, their spend and
 * model usage, rolled up, the reservations they replace settled (summed per row, src/store/settlement.ts), and `extra`.
 */
export const sqlBatchWriter = (sql: SqlClient.SqlClient) => {
  const settle = settlementsWith(sql)
  return (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows> = []) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const entries = items.map((i) => i.entry)
        yield* insertRows(sql, "generations", entries.map(toRow))
        const contents = entries.flatMap((e) => contentRowOf(e) ?? [])
        if (contents.length > 0) yield* insertRows(sql, "generation_content", contents)
        yield* addSpendWith(sql, rollUp(entries.map(spendOf)))
        yield* addUsageWith(sql, rollUpUsage(entries))
        if (entries.length > 0) yield* addLogSpansWith(sql, logSpansOf(entries))
        yield* settle(items.flatMap((i) => i.settlement ?? []))
        for (const part of extra) {
          if (part.rows.length > 0) yield* insertRows(sql, part.table, part.rows)
        }
      }),
    )
}

/** A settlement alone through @effect/sql, in a transaction of its own (its generation row could not be written). */
export const sqlSettleAlone = (sql: SqlClient.SqlClient) => {
  const settle = settlementsWith(sql)
  return (settlement: SettleArgs) => sql.withTransaction(settle([settlement]))
}

/** SQLite's "database is locked": another connection holds the write lock; try again shortly. */
export const isBusy = (e: unknown): boolean => {
  const code = (e as { code?: unknown } | null)?.code
  return typeof code === "string" && code.startsWith("SQLITE_BUSY")
}

/** A generation to record, and the reservation to settle in the same transaction (a key with a limit, credits). */
export interface LedgerItem {
  readonly entry: GenerationEntry
  readonly settlement?: SettleArgs
}

export interface SqliteBatchWriter {
  /** One transaction (BEGIN IMMEDIATE); throws, having rolled back, when it fails. */
  readonly write: (items: ReadonlyArray<LedgerItem>, extra?: ReadonlyArray<LedgerRows>) => void
  /** A settlement alone, in a transaction of its own (its generation row could not be written). */
  readonly settle: (settlement: SettleArgs) => void
  readonly close: () => void
}

/**
 * The writer's own connection to a SQLite file (WAL: readers are not blocked). The caller runs
 * `write` when no transaction is open on the main connection, or inside its transaction permit
 * (`besideMain`, src/store/sqlite-client.ts), so only another process can hold the lock; the
 * connection never waits for it (busy_timeout 0: a synchronous wait would stall the event loop),
 * a busy database throws SQLITE_BUSY and the caller tries again.
 */
export const openSqliteBatchWriter = (filename: string): SqliteBatchWriter => {
  const db = new Database(filename, { readwrite: true, create: true, strict: true })
  try {
    return prepareWriter(db)
  } catch (e) {
    db.close()
    throw e
  }
}

/**
 * A connection of this thread's own writers (the ledger, spend): it never waits for a lock (a
 * synchronous wait would stall the event loop), and the log is checkpointed off this thread
 * (src/store/checkpoints.ts), not inside their commits.
 */
export const prepareOwnConnection = (db: Database): void => {
  db.run("PRAGMA busy_timeout = 0")
  db.run("PRAGMA foreign_keys = ON")
  db.run("PRAGMA synchronous = NORMAL")
  db.run(`PRAGMA wal_autocheckpoint = ${BACKSTOP_AUTOCHECKPOINT}`)
}

const prepareWriter = (db: Database): SqliteBatchWriter => {
  prepareOwnConnection(db)
  // Bound by name from the row object (strict mode: no `$` in the keys): ~1.7 µs per row against
  // ~2.2 µs for a positional array mapped from it and spread (Bun 1.4.5, 25 columns).
  const insertGeneration = db.prepare<unknown, [GenerationRow]>(
    `INSERT INTO generations (${GENERATION_COLUMNS.join(", ")}) VALUES (${GENERATION_COLUMNS.map((c) => `$${c}`).join(", ")})`,
  )
  const insertContent = db.prepare<unknown, [string, string, string]>(
    "INSERT INTO generation_content (generation_id, input, output) VALUES (?, ?, ?)",
  )
  const addSpend = spendAdderOn(db)
  const addUsage = usageAdderOn(db)
  const addLogSpans = logSpanAdderOn(db)
  const settleAll = settlementsOn(db)
  // One prepared insert per table and column list a hook writes (bound by name, as above).
  const extraInserts = new Map<string, ReturnType<typeof db.prepare<unknown, [Record<string, string | number | null>]>>>()
  const insertExtra = (part: LedgerRows) => {
    const key = `${part.table}(${part.columns.join(",")})`
    let insert = extraInserts.get(key)
    if (insert === undefined) {
      insert = db.prepare(`INSERT INTO ${part.table} (${part.columns.join(", ")}) VALUES (${part.columns.map((c) => `$${c}`).join(", ")})`)
      extraInserts.set(key, insert)
    }
    for (const row of part.rows) insert.run(row as Record<string, string | number | null>)
  }
  const batch = db.transaction((items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows>) => {
    const settlements: Array<SettleArgs> = []
    for (const { entry: e, settlement } of items) {
      insertGeneration.run(toRow(e))
      const content = contentRowOf(e)
      if (content !== undefined) insertContent.run(content.generation_id, content.input, content.output)
      if (settlement !== undefined) settlements.push(settlement)
    }
    const entries = items.map((item) => item.entry)
    addSpend(rollUp(entries.map(spendOf)))
    addUsage(rollUpUsage(entries))
    addLogSpans(logSpansOf(entries))
    // The holds are released in the transaction that writes the spend replacing them: never both, never neither.
    settleAll(settlements)
    for (const part of extra) insertExtra(part)
  })
  const settleAlone = db.transaction((settlement: SettleArgs) => settleAll([settlement]))
  return {
    write: (items, extra = []) => batch.immediate(items, extra),
    settle: (settlement) => settleAlone.immediate(settlement),
    close: () => db.close(),
  }
}
