#!/usr/bin/env bun
/**
 * The server time of the console's queries on a seeded database (scripts/seed-console.ts): the
 * Activity page's data (30 days; filtered by one key, one model, one workspace) and the Logs
 * page's first and hundredth pages (no filter, each filter alone, model + key). The gateway runs
 * in-process on the database; each figure is the median of 5 answers' `Server-Timing: gw;dur`
 * (the whole request inside the server) after one warm-up. A hundredth page is reached by
 * following 99 cursors first, as the page's Next button does. Prints a Markdown table.
 *
 *   bun scripts/bench-console.ts --db data/console-1m.db --key sk-gw-v1-… [--runs 5] [--budget-ms 300]
 */
import { GatewayConfig, testSettings } from "../src/config/Config.js"
import { startServer } from "../src/http/server.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback
}
const db = arg("db", "data/console-1m.db")
const key = arg("key", process.env.GATEWAY_CONSOLE_KEY ?? "")
const runs = Number(arg("runs", "5"))
const budget = Number(arg("budget-ms", "300"))
if (key === "") throw new Error("--key: the management key the seed printed")

const server = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db, logLevel: "none", consoleEnabled: false })))
const get = async (path: string): Promise<{ ms: number; body: Record<string, unknown> }> => {
  const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${key}` } })
  const body = (await res.json()) as Record<string, unknown>
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`)
  const ms = Number(/gw;dur=([\d.]+)/.exec(res.headers.get("server-timing") ?? "")?.[1])
  return { ms, body }
}
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
const timed = async (path: string) => {
  await get(path)
  const ms: Array<number> = []
  for (let i = 0; i < runs; i++) ms.push((await get(path)).ms)
  return median(ms)
}

// What to filter by: the busiest key, model and workspace, and the quietest key (a small inference key's own view).
const summary = (await get("/v1/activity/summary")).body.data as {
  by_key: Array<{ api_key_hash: string; requests: number }>
  by_model: Array<{ model: string; requests: number }>
}
const busyKey = summary.by_key[0]?.api_key_hash as string
const quietKey = summary.by_key[summary.by_key.length - 1]?.api_key_hash as string
const busyModel = summary.by_model[0]?.model as string
const quietModel = summary.by_model[summary.by_model.length - 1]?.model as string
const workspaces = ((await get("/v1/workspaces")).body.data as Array<{ id: string }>).map((w) => w.id)
const workspace = workspaces[workspaces.length - 1] as string
const page1 = (await get("/v1/generations?limit=1")).body.data as Array<{ session_id: string | null; created_at: string }>
const day = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10)
const q = (params: Record<string, string>) => new URLSearchParams(params).toString()

const rows: Array<[string, number | string, string]> = []
const add = (name: string, ms: number | string, note = "") => {
  rows.push([name, ms, note])
  console.error(`${name}: ${ms} ${note}`)
}

add("activity summary, 30 days", await timed("/v1/activity/summary"))
add("activity summary, 30 days, one key (busiest)", await timed(`/v1/activity/summary?${q({ api_key_hash: busyKey })}`))
add("activity summary, 30 days, one model (busiest)", await timed(`/v1/activity/summary?${q({ model: busyModel })}`))
add("activity summary, 30 days, one workspace", await timed(`/v1/activity/summary?${q({ workspace_id: workspace })}`))
add("GET /v1/activity (30 completed days)", await timed("/v1/activity"))
add("GET /v1/activity, group_by=workspace", await timed("/v1/activity?group_by=workspace"))

const logCases: Array<[string, Record<string, string>]> = [
  ["no filter", {}],
  ["time range (days 20-10 ago)", { from: day(20), to: day(10) }],
  ["model (busiest)", { model: busyModel }],
  ["model (quietest)", { model: quietModel }],
  ["provider", { provider: "east" }],
  ["key (busiest)", { api_key_hash: busyKey }],
  ["key (quietest)", { api_key_hash: quietKey }],
  ["workspace", { workspace_id: workspace }],
  ["status failed", { status: "failed" }],
  ["session id", { session_id: "session-42" }],
  ["min cost $0.01", { min_cost: "0.01" }],
  ["model + key", { model: busyModel, api_key_hash: busyKey }],
]
void page1
for (const [name, params] of logCases) {
  const first = `/v1/generations?${q({ ...params, limit: "50" })}`
  add(`logs first page, ${name}`, await timed(first))
  let cursor: string | null = null
  let page = 1
  for (; page < 100; page++) {
    const body = (await get(`/v1/generations?${q({ ...params, limit: "50", ...(cursor === null ? {} : { cursor }) })}`)).body
    cursor = body.next_cursor as string | null
    if (cursor === null) break
  }
  if (cursor === null) add(`logs 100th page, ${name}`, "—", `only ${page} pages`)
  else add(`logs 100th page, ${name}`, await timed(`/v1/generations?${q({ ...params, limit: "50", cursor })}`))
}
await server.stop()

console.log(`| query | server ms (median of ${runs}) | |`)
console.log("|---|---:|---|")
for (const [name, ms, note] of rows) console.log(`| ${name} | ${typeof ms === "number" ? ms.toFixed(1) : ms} | ${typeof ms === "number" && ms > budget ? `over ${budget} ms` : ""}${note} |`)
