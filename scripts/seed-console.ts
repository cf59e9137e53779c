#!/usr/bin/env bun
/**
 * Seeds a database with a console-sized history: 1,000,000 generations over the last 30 days
 * from 50 keys in 3 workspaces on 20 models (defaults), for the scale figures of the Activity
 * and Logs queries (scripts/bench-console.ts, docs/console.md). The gateway itself makes the
 * schema, the user, the workspaces and the keys (through its API); the generations, their usage
 * rollup and their spend go in as bulk inserts (SQLite: prepared statements in large
 * transactions; Postgres: 5,000 rows a statement as one JSON parameter), the rollups summed by
 * the ledger's own functions, so they hold exactly what the ledger's commits would have written.
 *
 *   bun scripts/seed-console.ts --db data/console-1m.db [--rows 1000000] [--days 30] [--keys 50] [--models 20] [--workspaces 3]
 *   bun scripts/seed-console.ts --db postgres://postgres@127.0.0.1:5432/console_1m   (the database must exist)
 *
 * Prints the management key to sign in with (also usable as GATEWAY_MANAGEMENT_KEY later).
 */
import { Database } from "bun:sqlite"
import { SQL } from "bun"
import { Option } from "effect"
import { GatewayConfig, isPostgresUrl, testSettings } from "../src/config/Config.js"
import { type GenerationEntry, newGenerationId } from "../src/domain/generations.js"
import { startServer } from "../src/http/server.js"
import { GENERATION_COLUMNS, type GenerationRow, toRow } from "../src/store/ledger.js"
import { logSpanAdderOn, logSpansOf } from "../src/store/log-spans.js"
import { rollUp, type SpendDayRow } from "../src/store/spend-rollup.js"
import { coarsen, rollUpUsage, type UsageDayRow } from "../src/store/usage-rollup.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback
}
const db = arg("db", "data/console-1m.db")
const rows = Number(arg("rows", "1000000"))
const days = Number(arg("days", "30"))
const keyCount = Number(arg("keys", "50"))
const modelCount = Number(arg("models", "20"))
const workspaceCount = Number(arg("workspaces", "3"))
const pg = isPostgresUrl(db)

// ---- the account side, through the gateway ----
const started = performance.now()
const server = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db, logLevel: "none", consoleEnabled: false })))
const admin = Option.getOrUndefined(server.createdSecret)
if (admin === undefined) throw new Error(`${db} already has keys: seed a new database`)
const api = async <T>(path: string, body?: unknown): Promise<T> => {
  const res = await fetch(`${server.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: body === undefined ? null : JSON.stringify(body),
  })
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as T
}
const me = await api<{ data: { creator_user_id: string; workspace_id: string } }>("/v1/key")
const userId = me.data.creator_user_id
const workspaces = [me.data.workspace_id]
for (let i = 1; i < workspaceCount; i++) {
  workspaces.push((await api<{ data: { id: string } }>("/v1/workspaces", { name: `Team ${i}`, slug: `team-${i}` })).data.id)
}
const keys: Array<{ hash: string; workspaceId: string }> = []
for (let i = 0; i < keyCount; i++) {
  const workspaceId = workspaces[i % workspaces.length] as string
  const made = await api<{ data: { hash: string } }>("/v1/keys", { name: `seed-key-${i + 1}`, workspace_id: workspaceId })
  keys.push({ hash: made.data.hash, workspaceId })
}
await server.stop()

// ---- the history, generated deterministically ----
let seed = 0x2545f491
const random = () => {
  // xorshift32: the same history on every run and both engines.
  seed ^= seed << 13
  seed ^= seed >>> 17
  seed ^= seed << 5
  return (seed >>> 0) / 4294967296
}
const providers = ["fake", "fake-backup", "flaky", "my-own-key", "east", "west"]
const models = Array.from({ length: modelCount }, (_, i) => ({
  id: `seed/model-${String(i + 1).padStart(2, "0")}`,
  provider: providers[i % providers.length] as string,
  // USD per token: a spread of cheap and dear models.
  price: (0.1 + (i % 7) * 0.6) / 1_000_000,
}))
const now = Date.now()
const span = days * 86_400_000
const entryAt = (i: number): GenerationEntry => {
  // Oldest first, evenly over the span, with jitter.
  const at = now - span + Math.floor(((i + random()) / rows) * span)
  // Skewed: a few keys and models carry most of the traffic, as in real use.
  const key = keys[Math.floor(keyCount * random() ** 2)] as (typeof keys)[number]
  const model = models[Math.floor(modelCount * random() ** 1.5)] as (typeof models)[number]
  const input = 50 + Math.floor(random() * 4000)
  const output = Math.floor(random() * 1200)
  const r = random()
  const failed = r < 0.02
  const cancelled = !failed && r < 0.025
  const createdAt = new Date(at).toISOString()
  return {
    id: newGenerationId(at),
    keyHash: key.hash,
    userId,
    workspaceId: key.workspaceId,
    model: model.id,
    providerName: model.provider,
    upstreamModel: model.id.slice(5),
    createdAt,
    streamed: random() < 0.6,
    cancelled,
    finishReason: failed ? null : cancelled ? null : "stop",
    sessionId: random() < 0.1 ? `session-${Math.floor(random() * 5000)}` : null,
    inputTokens: input,
    cachedTokens: Math.floor(input * random() * 0.3),
    cacheWriteTokens: 0,
    outputTokens: failed ? 0 : output,
    reasoningTokens: random() < 0.2 ? Math.floor(output * 0.3) : 0,
    totalCost: failed ? 0 : (input + output * 3) * model.price,
    isByok: model.provider === "my-own-key",
    generationTimeMs: 200 + Math.floor(random() * 6000),
    latencyMs: failed ? null : 80 + Math.floor(random() ** 3 * 4000),
    status: failed ? "failed" : cancelled ? "cancelled" : "completed",
    error: failed ? { message: "upstream error", status: random() < 0.5 ? 429 : 502, providerName: model.provider } : null,
  }
}

// ---- bulk writes ----
const CHUNK = pg ? 5_000 : 20_000
const usage = new Map<string, UsageDayRow>()
const spend = new Map<string, SpendDayRow>()
const SUMMED: ReadonlyArray<keyof UsageDayRow> = [
  "requests", "input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "cost_nano", "byok_cost_nano",
  "generation_ms", "latency_ms", "latency_count", "lat_h0", "lat_h1", "lat_h2", "lat_h3", "lat_h4", "lat_h5", "lat_h6", "lat_h7",
]
const addUp = (chunk: ReadonlyArray<GenerationEntry>) => {
  for (const row of rollUpUsage(chunk)) {
    const id = `${row.day}|${row.key_hash}|${row.model}|${row.provider_name}|${row.status_code}`
    const had = usage.get(id) as Record<string, number> | undefined
    if (had === undefined) usage.set(id, row)
    else for (const c of SUMMED) had[c] = (had[c] as number) + (row[c] as number)
  }
  for (const row of rollUp(chunk.map((e) => ({ ...e, amountUsd: e.totalCost })))) {
    const id = `${row.key_hash}|${row.day}|${row.is_byok}`
    const had = spend.get(id)
    if (had === undefined) spend.set(id, row)
    else spend.set(id, { ...had, amount_nano: had.amount_nano + row.amount_nano })
  }
}

const columnsOf = (row: object) => Object.keys(row)

if (!pg) {
  const sqlite = new Database(db, { strict: true })
  sqlite.run("PRAGMA journal_mode = WAL")
  sqlite.run("PRAGMA synchronous = OFF")
  const insert = sqlite.prepare<unknown, [GenerationRow]>(
    `INSERT INTO generations (${GENERATION_COLUMNS.join(", ")}) VALUES (${GENERATION_COLUMNS.map((c) => `$${c}`).join(", ")})`,
  )
  const addSpans = logSpanAdderOn(sqlite)
  const write = sqlite.transaction((chunk: ReadonlyArray<GenerationEntry>) => {
    for (const e of chunk) insert.run(toRow(e))
    // In the order of their last id, as a live ledger's commits add them (each commit's are its newest).
    addSpans(logSpansOf(chunk).sort((a, b) => (a.last_id < b.last_id ? -1 : 1)))
  })
  for (let i = 0; i < rows; i += CHUNK) {
    const chunk = Array.from({ length: Math.min(CHUNK, rows - i) }, (_, j) => entryAt(i + j))
    write(chunk)
    addUp(chunk)
  }
  const insertAll = (table: string, list: ReadonlyArray<object>) => {
    if (list.length === 0) return
    const cols = columnsOf(list[0] as object)
    const st = sqlite.prepare<unknown, [Record<string, string | number>]>(
      `INSERT INTO ${table} (${cols.join(", ")}) VALUES (${cols.map((c) => `$${c}`).join(", ")})`,
    )
    sqlite.transaction(() => {
      for (const r of list) st.run(r as Record<string, string | number>)
    })()
  }
  const { models: byModel, keys: byKey } = coarsen([...usage.values()])
  insertAll("usage_daily", [...usage.values()])
  insertAll("usage_daily_models", byModel)
  insertAll("usage_daily_keys", byKey)
  insertAll("spend_daily", [...spend.values()])
  sqlite.run("ANALYZE")
  sqlite.close()
} else {
  const sql = new SQL(db)
  /** Rows of one shape as one JSON parameter (Bun's SQL sends a value bound to a json parameter as JSON itself). */
  const insertJson = async (table: string, list: ReadonlyArray<object>) => {
    const c = columnsOf(list[0] as object).map((x) => `"${x}"`).join(", ")
    await sql.unsafe(`INSERT INTO ${table} (${c}) SELECT ${c} FROM json_populate_recordset(NULL::${table}, $1::json)`, [list])
  }
  for (let i = 0; i < rows; i += CHUNK) {
    const chunk = Array.from({ length: Math.min(CHUNK, rows - i) }, (_, j) => entryAt(i + j))
    await insertJson("generations", chunk.map(toRow))
    await insertJson("generation_log_spans", logSpansOf(chunk))
    addUp(chunk)
  }
  const { models: byModel, keys: byKey } = coarsen([...usage.values()])
  const tables: ReadonlyArray<readonly [string, ReadonlyArray<object>]> = [
    ["usage_daily", [...usage.values()]],
    ["usage_daily_models", byModel],
    ["usage_daily_keys", byKey],
    ["spend_daily", [...spend.values()]],
  ]
  for (const [table, list] of tables) {
    for (let i = 0; i < list.length; i += CHUNK) await insertJson(table, list.slice(i, i + CHUNK))
  }
  await sql.unsafe("ANALYZE")
  await sql.close()
}

const seconds = ((performance.now() - started) / 1000).toFixed(1)
console.log(
  JSON.stringify({ db, rows, days, keys: keyCount, models: modelCount, workspaces: workspaceCount, usage_rows: usage.size, seconds, management_key: admin }),
)
