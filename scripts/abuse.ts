#!/usr/bin/env bun
/**
 * The abuse run (`scripts/abuse`): drives the gateway binary the way a hostile client, a crash and
 * a second process would, on loopback, and prints one table. Not run in CI (minutes, and it kills
 * processes on purpose). Each scenario starts its own gateway (and mock upstream):
 *
 *   partial bodies   1,100 connections without a key that declare a body and send 5 bytes, against a
 *                    gateway whose descriptors are capped at 1,024 (`ulimit -n`): all must be closed,
 *                    and a normal client meanwhile served within the body deadline plus 1 s. Then
 *                    1,100 such connections with a valid key: all but the key's unfinished-body cap
 *                    answered at once, and a normal client from the same address served.
 *   never-reading    500 clients that open ~4 MB streams and never read: RSS added, and a concurrent
 *                    JSON client's p99.
 *   SIGKILL          5 kills under load, with `ledger.durable_answers` off and on: answered requests
 *                    left without a generation record, and holds left after the restart.
 *   revocation       two processes on one Postgres database: a key deleted through one, how long until
 *                    the other answers 401 (p50 / p99 over 30 trials).
 *
 *   bun scripts/abuse.ts [--only partial,reading,kill,revoke] [--gateway dist/gateway] [--pg postgres://…]
 */
import { execSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { connect, type Socket } from "node:net"
import { join } from "node:path"
import { Database } from "bun:sqlite"

const argv = Bun.argv.slice(2)
const arg = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : (argv[at + 1] ?? fallback)
}
const root = join(import.meta.dir, "..")
const only = new Set(arg("only", "partial,reading,kill,revoke").split(","))
const binary = arg("gateway", join(root, "dist", "gateway"))
const pgBase = arg("pg", "postgres://postgres@127.0.0.1:5432/postgres")
const runDir = join(root, "bench", "scratch", `abuse-${new Date().toISOString().replace(/[:.]/g, "-")}`)
mkdirSync(runDir, { recursive: true })
const say = (line: string) => console.error(`[abuse] ${line}`)
const bun = process.execPath
const managementKey = `sk-abuse-${crypto.randomUUID().replaceAll("-", "")}`

const freePort = (): number => {
  const s = Bun.serve({ port: 0, fetch: () => new Response() })
  const port = s.port as number
  s.stop(true)
  return port
}

const percentile = (values: Array<number>, p: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number
}

const rssMb = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? "0")
  return kb / 1024
}

// ------------------------------------------------------------------ processes

interface Running {
  readonly proc: ReturnType<typeof Bun.spawn>
  readonly url: string
}
const running = new Set<ReturnType<typeof Bun.spawn>>()
process.on("exit", () => {
  for (const p of running) p.kill("SIGKILL")
})

const waitFor = async (url: string, ms = 30_000) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    try {
      await fetch(url)
      return
    } catch {
      await Bun.sleep(50)
    }
  }
  throw new Error(`${url} did not answer in ${ms} ms (logs in ${runDir})`)
}

const startMock = async (): Promise<Running> => {
  const port = freePort()
  const proc = Bun.spawn([bun, join(root, "scripts", "mock-upstream.ts"), "--port", String(port), "--log", "0"], {
    stdout: "ignore",
    stderr: Bun.file(join(runDir, `mock-${port}.err`)),
  })
  running.add(proc)
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/__mock/stats`)
  return { proc, url }
}

interface GatewayOptions {
  readonly name: string
  readonly config: unknown
  readonly databaseUrl: string
  /** The gateway's own descriptor limit (soft and hard). */
  readonly nofile?: number
  readonly env?: Record<string, string>
  readonly port?: number
}

const startGateway = async (o: GatewayOptions): Promise<Running> => {
  const port = o.port ?? freePort()
  const configPath = join(runDir, `${o.name}.json`)
  writeFileSync(configPath, JSON.stringify(o.config, null, 2))
  const dataDir = join(runDir, o.name)
  mkdirSync(dataDir, { recursive: true })
  const cmd = o.nofile === undefined ? [binary, "serve"] : ["prlimit", `--nofile=${o.nofile}:${o.nofile}`, binary, "serve"]
  const proc = Bun.spawn(cmd, {
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      GATEWAY_DATA_DIR: dataDir,
      DATABASE_URL: o.databaseUrl,
      GATEWAY_CONFIG: configPath,
      GATEWAY_MANAGEMENT_KEY: managementKey,
      GATEWAY_LOG_LEVEL: "error",
      ...o.env,
    },
    stdout: "ignore",
    stderr: Bun.file(join(runDir, `${o.name}-${Date.now()}.err`)),
  })
  running.add(proc)
  const url = `http://127.0.0.1:${port}`
  await waitFor(`${url}/v1/health`)
  return { proc, url }
}

const stop = async (r: Running, signal: "SIGTERM" | "SIGKILL" = "SIGTERM") => {
  r.proc.kill(signal)
  await r.proc.exited
  running.delete(r.proc)
}

const catalog = (mockUrl: string, extra: Record<string, unknown> = {}) => ({
  providers: [
    { id: "mock", kind: "openai-chat", base_url: `${mockUrl}/v1` },
    { id: "mock-big", kind: "openai-chat", base_url: `${mockUrl}/v1`, headers: { "x-mock-tokens": "1000", "x-mock-chunk": "x".repeat(4000) } },
    { id: "mock-stream", kind: "openai-chat", base_url: `${mockUrl}/v1`, headers: { "x-mock-tokens": "50", "x-mock-interval-ms": "2" } },
  ],
  models: [
    { id: "abuse/json", context_length: 128000, endpoints: [{ provider: "mock", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
    { id: "abuse/big", context_length: 128000, endpoints: [{ provider: "mock-big", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
    { id: "abuse/stream", context_length: 128000, endpoints: [{ provider: "mock-stream", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] },
  ],
  ...extra,
})

const auth = (key = managementKey) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" })

const ask = async (base: string, model: string, key = managementKey, stream = false) => {
  const started = performance.now()
  const res = await fetch(`${base}/v1/responses`, {
    method: "POST",
    headers: auth(key),
    body: JSON.stringify({ model, input: "hello", stream }),
  })
  const text = await res.text()
  return { status: res.status, ms: performance.now() - started, id: res.headers.get("x-generation-id"), text }
}

const createKey = async (base: string, body: Record<string, unknown>): Promise<{ key: string; hash: string }> => {
  const res = await fetch(`${base}/v1/keys`, { method: "POST", headers: auth(), body: JSON.stringify(body) })
  if (res.status !== 201) throw new Error(`POST /keys: ${res.status} ${await res.text()}`)
  const json = (await res.json()) as { key: string; data: { hash: string } }
  return { key: json.key, hash: json.data.hash }
}

const rows: Array<[string, string, string]> = []
const row = (what: string, figure: string, verdict: string) => {
  rows.push([what, figure, verdict])
  say(`${what}: ${figure} (${verdict})`)
}

// ------------------------------------------------------------------ partial bodies

/** `count` connections that declare a 1,000-byte body and send 5 bytes of it, with `key` or none. */
const holdPartialBodies = async (port: number, count: number, key: string | undefined) => {
  const closedAt: Array<number> = []
  const sockets: Array<Socket> = []
  const openedAt = performance.now()
  const authorization = key === undefined ? "" : `Authorization: Bearer ${key}\r\n`
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve) => {
          const s = connect({ host: "127.0.0.1", port }, () => {
            s.write(`POST /v1/responses HTTP/1.1\r\nHost: x\r\n${authorization}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"mod`)
            resolve()
          })
          s.on("data", () => {})
          s.on("error", () => resolve())
          s.on("close", () => {
            closedAt.push(performance.now() - openedAt)
            resolve()
          })
          sockets.push(s)
        }),
    ),
  )
  return { closedAt, sockets }
}

const partialBodies = async () => {
  await keylessPartialBodies()
  await keyedPartialBodies()
}

/**
 * 1,100 connections with a valid key that never finish their bodies: all but the key's cap
 * (`server.max_unfinished_bodies_per_key`, 64) are answered 429 and closed at once, and a client
 * from the same address with another key is served meanwhile (before the cap, they held 1,018
 * descriptors until the body deadline and the address's other clients got 503).
 */
const keyedPartialBodies = async () => {
  const mock = await startMock()
  const gw = await startGateway({ name: "partial-keyed", config: catalog(mock.url), databaseUrl: join(runDir, "partial-keyed.db"), nofile: 1024 })
  const port = Number(new URL(gw.url).port)
  const created = await fetch(`${gw.url}/v1/keys`, { method: "POST", headers: auth(), body: JSON.stringify({ name: "neighbour" }) })
  const neighbour = ((await created.json()) as { key: string }).key
  const count = 1100
  const { closedAt, sockets } = await holdPartialBodies(port, count, managementKey)
  await Bun.sleep(1_000)
  const closedAtOnce = closedAt.length
  const normal = await ask(gw.url, "abuse/json", neighbour).catch(() => ({ status: 0, ms: Number.NaN }))
  for (const s of sockets) s.destroy()
  row(
    "1,100 partial bodies with a valid key, gateway at ulimit -n 1024",
    `${closedAtOnce} of ${count} answered and closed within 1 s (the key's cap holds 64)`,
    closedAtOnce >= count - 64 ? "holds" : "MISSED",
  )
  row("a client with another key from the same address meanwhile", `${normal.status}, ${normal.ms.toFixed(0)} ms`, normal.status === 200 ? "holds" : "MISSED")
  await stop(gw)
  await stop(mock)
}

const keylessPartialBodies = async () => {
  const mock = await startMock()
  const bodyTimeoutMs = 10_000
  const gw = await startGateway({ name: "partial", config: catalog(mock.url), databaseUrl: join(runDir, "partial.db"), nofile: 1024 })
  const port = Number(new URL(gw.url).port)
  const count = 1100
  const { closedAt, sockets } = await holdPartialBodies(port, count, undefined)
  // A normal client meanwhile.
  const normal = await ask(gw.url, "abuse/json").catch(() => ({ status: 0, ms: Number.NaN }))
  const until = Date.now() + bodyTimeoutMs + 5_000
  while (closedAt.length < count && Date.now() < until) await Bun.sleep(100)
  for (const s of sockets) s.destroy()
  row(
    "1,100 keyless partial bodies, gateway at ulimit -n 1024",
    `${closedAt.length} of ${count} closed by the gateway, the last after ${(Math.max(0, ...closedAt) / 1000).toFixed(2)} s`,
    closedAt.length === count ? "holds" : "MISSED",
  )
  row(
    "a normal client meanwhile",
    `${normal.status}, ${normal.ms.toFixed(0)} ms`,
    normal.status === 200 && normal.ms <= bodyTimeoutMs + 1_000 ? "holds" : "MISSED",
  )
  await stop(gw)
  await stop(mock)
}

// ------------------------------------------------------------------ never-reading streams

const neverReading = async () => {
  const mock = await startMock()
  const gw = await startGateway({ name: "reading", config: catalog(mock.url), databaseUrl: join(runDir, "reading.db") })
  const port = Number(new URL(gw.url).port)
  // Warm up, then the idle figure.
  for (let i = 0; i < 200; i++) await ask(gw.url, "abuse/json")
  Bun.gc(true)
  await Bun.sleep(1_000)
  const idle = rssMb(gw.proc.pid)
  const body = JSON.stringify({ model: "abuse/big", input: "hello", stream: true })
  const head = `POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${managementKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const sockets: Array<Socket> = []
  for (let i = 0; i < 500; i++) {
    const s = connect({ host: "127.0.0.1", port }, () => {
      s.write(head)
      s.pause() // never read
    })
    s.on("error", () => {})
    sockets.push(s)
  }
  let peak = idle
  const latencies: Array<number> = []
  const until = Date.now() + 20_000
  while (Date.now() < until) {
    const r = await ask(gw.url, "abuse/json")
    if (r.status === 200) latencies.push(r.ms)
    peak = Math.max(peak, rssMb(gw.proc.pid))
    await Bun.sleep(20)
  }
  // Once the burst is over: what the paused streams still hold.
  const held = rssMb(gw.proc.pid)
  for (const s of sockets) s.destroy()
  const p99 = percentile(latencies, 99)
  row(
    "500 never-reading ~4 MB streams: RSS added while they are held (peak)",
    `${(held - idle).toFixed(1)} MB (${(peak - idle).toFixed(1)} MB); idle ${idle.toFixed(1)} MB`,
    held - idle <= 150 ? "holds" : "MISSED",
  )
  row("a concurrent JSON client meanwhile, p99", `${p99.toFixed(1)} ms over ${latencies.length} requests`, p99 < 50 ? "holds" : "MISSED")
  await stop(gw)
  await stop(mock)
}

// ------------------------------------------------------------------ SIGKILL under load

const killsUnderLoad = async (durable: boolean) => {
  const mock = await startMock()
  const db = join(runDir, `kill-${durable ? "on" : "off"}.db`)
  const config = catalog(mock.url, { ledger: { durable_answers: durable } })
  let lost = 0
  let answered = 0
  let holdsLeft = 0
  // A key with a limit, so every request holds a reservation while it runs.
  let key: string | undefined
  for (let round = 0; round < 5; round++) {
    const gw = await startGateway({ name: `kill-${durable ? "on" : "off"}`, config, databaseUrl: db })
    key ??= (await createKey(gw.url, { name: "limited", limit: 1_000 })).key
    const secret = key
    const ids: Array<string> = []
    let stopping = false
    const worker = async (i: number) => {
      while (!stopping) {
        const r = await ask(gw.url, i % 2 === 0 ? "abuse/json" : "abuse/stream", secret, i % 2 === 1).catch(() => undefined)
        // Answered: the whole JSON body, or a stream up to its [DONE].
        if (r?.status === 200 && r.id !== null && (i % 2 === 0 || r.text.endsWith("data: [DONE]\n\n"))) ids.push(r.id)
      }
    }
    const workers = Array.from({ length: 32 }, (_, i) => worker(i))
    await Bun.sleep(1_500)
    gw.proc.kill("SIGKILL")
    stopping = true
    await gw.proc.exited
    running.delete(gw.proc)
    await Promise.all(workers)
    // The restart releases the holds this instance left, then we count what is still there.
    const again = await startGateway({ name: `kill-${durable ? "on" : "off"}`, config, databaseUrl: db })
    await Bun.sleep(500)
    const store = new Database(db, { readonly: true })
    const known = new Set((store.query("SELECT id FROM generations").all() as Array<{ id: string }>).map((r) => r.id))
    const holds = (store.query("SELECT COUNT(*) AS n FROM reservations").get() as { n: number }).n
    store.close()
    answered += ids.length
    lost += ids.filter((id) => !known.has(id)).length
    holdsLeft += holds
    await stop(again)
  }
  const setting = `ledger.durable_answers ${durable ? "on" : "off"}`
  row(
    `5 SIGKILLs under load, ${setting}: answered requests without a record`,
    `${lost} of ${answered}`,
    durable ? (lost === 0 ? "holds" : "MISSED") : "the group-commit window (≤ 25 ms of records)",
  )
  row(`5 SIGKILLs, ${setting}: holds left after the restarts`, String(holdsLeft), holdsLeft === 0 ? "holds" : "MISSED")
  await stop(mock)
}

// ------------------------------------------------------------------ cross-process revocation

const revocation = async () => {
  const mock = await startMock()
  const name = `gw_abuse_${process.pid}_${Date.now()}`
  execSync(`psql "${pgBase}" -qc "CREATE DATABASE ${name}"`)
  const url = pgBase.replace(/\/[^/]*$/, `/${name}`)
  try {
    const a = await startGateway({ name: "revoke-a", config: catalog(mock.url), databaseUrl: url })
    const b = await startGateway({ name: "revoke-b", config: catalog(mock.url), databaseUrl: url })
    const delays: Array<number> = []
    for (let trial = 0; trial < 30; trial++) {
      const { key, hash } = await createKey(a.url, { name: `revoke-${trial}` })
      // B knows the key (it is in B's cache).
      const warm = await fetch(`${b.url}/v1/key`, { headers: auth(key) })
      if (warm.status !== 200) throw new Error(`B did not accept a new key: ${warm.status}`)
      const deleted = await fetch(`${a.url}/v1/keys/${hash}`, { method: "DELETE", headers: auth() })
      const at = performance.now()
      if (deleted.status !== 200) throw new Error(`DELETE: ${deleted.status}`)
      for (;;) {
        const res = await fetch(`${b.url}/v1/key`, { headers: auth(key) })
        await res.arrayBuffer()
        if (res.status === 401) break
        if (performance.now() - at > 5_000) break
      }
      delays.push(performance.now() - at)
    }
    const p99 = percentile(delays, 99)
    row("a key deleted on one process, 401 on the other (30 trials)", `p50 ${percentile(delays, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`, p99 <= 100 ? "holds" : "MISSED")
    await stop(a)
    await stop(b)
  } finally {
    execSync(`psql "${pgBase}" -qc "DROP DATABASE IF EXISTS ${name} WITH (FORCE)"`)
    await stop(mock)
  }
}

// ------------------------------------------------------------------ run

const scenarios: Array<[string, () => Promise<void>]> = [
  ["partial", partialBodies],
  ["reading", neverReading],
  ["kill", async () => {
    await killsUnderLoad(false)
    await killsUnderLoad(true)
  }],
  ["revoke", revocation],
]
for (const [name, run] of scenarios) {
  if (!only.has(name)) continue
  say(`— ${name}`)
  try {
    await run()
  } catch (e) {
    row(name, `failed: ${(e as Error).message}`, "MISSED")
  }
}

const table = [
  "| scenario | figure | verdict |",
  "|---|---|---|",
  ...rows.map(([a, b, c]) => `| ${a} | ${b} | ${c} |`),
].join("\n")
console.log(table)
writeFileSync(join(runDir, "table.md"), `${table}\n`)
process.exit(0)
