#!/usr/bin/env bun
/**
 * What scaling out costs and buys, on loopback (docs/operations.md, "Scale out"):
 * - JSON at 32 connections, an unlimited key and no session, the same binary with Redis configured
 *   against without (CPU per request: the Redis link must cost a request that does not use it ~0);
 * - the same with Redis, a key with a rate limit (one Redis script per request) against an unlimited key;
 * - `serve --workers 2` against `--workers 1`, on SQLite and on Postgres: requests per second, with the
 *   load generator's own CPU stated (on a 2-core machine it shares the cores with the workers).
 * Rounds are interleaved (A B, B A, …); each build starts afresh and warms up before its rounds.
 *
 *   bun scripts/bench-scale.ts [--rounds 6] [--duration-ms 4000] [--warmup-ms 3000]
 *                              [--redis redis://127.0.0.1:6379] [--pg postgres://…] [--only redis,ratelimit,workers]
 */
import { execSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { LoadResult, LoadSpec } from "./bench-load.js"

const argv = Bun.argv.slice(2)
const flag = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : (argv[at + 1] ?? fallback)
}
const rounds = Number(flag("rounds", "6"))
const durationMs = Number(flag("duration-ms", "4000"))
const warmupMs = Number(flag("warmup-ms", "3000"))
const redisUrl = flag("redis", process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379")
const pgBase = flag("pg", process.env["GATEWAY_BENCH_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
const only = new Set(flag("only", "redis,ratelimit,workers").split(","))

const root = join(import.meta.dir, "..")
const bun = process.execPath
const runDir = join(root, "bench", "scratch", `scale-${new Date().toISOString().replace(/[:.]/g, "-")}`)
mkdirSync(runDir, { recursive: true })
const say = (line: string) => console.error(`[bench-scale] ${line}`)
const pin = (core: number) => ["taskset", "-c", String(core)]
const clockTicks = Number(execSync("getconf CLK_TCK").toString().trim()) || 100
/** utime + stime of a process and its children that were waited for, in µs. */
const cpuMicros = (pid: number, children = false): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const own = Number(f[11]) + Number(f[12])
  return ((children ? own + Number(f[13]) + Number(f[14]) : own) * 1e6) / clockTicks
}
const freePort = (): number => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}
const median = (xs: Array<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2
}

execSync("bash scripts/build --if-stale", { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
const binary = join(root, "dist", "gateway")
const mockPort = freePort()
const mock = Bun.spawn([...pin(1), bun, "scripts/mock-upstream.ts", "--port", String(mockPort), "--log", "0"], { cwd: root, stdout: "ignore", stderr: "ignore" })
const config = {
  providers: [{ id: "mock", kind: "openai-chat", base_url: `http://127.0.0.1:${mockPort}/v1` }],
  models: [{ id: "bench/json", context_length: 128000, endpoints: [{ provider: "mock", upstream_model: "bench-model", pricing: { prompt: 0.15, completion: 0.6 } }] }],
}
writeFileSync(join(runDir, "config.json"), JSON.stringify(config))
const admin = `sk-bench-${crypto.randomUUID().replaceAll("-", "")}`

interface Build {
  readonly name: string
  readonly env: Record<string, string>
  readonly args: Array<string>
  /** Cores the server may use. */
  readonly cores: string
}
interface Running {
  readonly proc: ReturnType<typeof Bun.spawn>
  readonly port: number
}

const startBuild = async (build: Build, dataDir: string): Promise<Running> => {
  const port = freePort()
  mkdirSync(dataDir, { recursive: true })
  const proc = Bun.spawn(["taskset", "-c", build.cores, binary, "serve", ...build.args], {
    cwd: root,
    stdout: "ignore",
    stderr: Bun.file(join(runDir, `${build.name}.err`)),
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      GATEWAY_DATA_DIR: dataDir,
      DATABASE_URL: join(dataDir, "gateway.db"),
      GATEWAY_CONFIG: join(runDir, "config.json"),
      GATEWAY_MANAGEMENT_KEY: admin,
      GATEWAY_LOG_LEVEL: "warn",
      ...build.env,
    },
  })
  const until = Date.now() + 60_000
  for (;;) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/v1/health`)
      if (res.status === 200) break
    } catch {}
    if (Date.now() > until) throw new Error(`${build.name} did not start (${runDir}/${build.name}.err)`)
    await Bun.sleep(100)
  }
  // With workers, wait until every worker listens (the supervisor answers nothing itself).
  await Bun.sleep(build.args.includes("--workers") ? 3_000 : 0)
  return { proc, port }
}
const stopBuild = async (running: Running) => {
  running.proc.kill("SIGTERM")
  await Promise.race([running.proc.exited, Bun.sleep(10_000)])
  running.proc.kill("SIGKILL")
}

/** One load (its own process on core 1); returns the result and the load generator's CPU. */
const load = async (spec: LoadSpec): Promise<{ result: LoadResult; clientUs: number }> => {
  const proc = Bun.spawn([...pin(1), bun, join(root, "scripts", "bench-load.ts"), JSON.stringify(spec)], { cwd: root, stdout: "pipe", stderr: "inherit" })
  const text = await new Response(proc.stdout as ReadableStream<Uint8Array>).text()
  await proc.exited
  const lines = text.trim().split("\n").filter((l) => !l.startsWith('{"event"'))
  const usage = proc.resourceUsage()
  const clientUs = usage === undefined ? Number.NaN : Number(usage.cpuTime.user + usage.cpuTime.system)
  return { result: JSON.parse(lines[lines.length - 1] as string) as LoadResult, clientUs }
}

const json = (port: number, key: string, ms: number): LoadSpec => ({
  host: "127.0.0.1",
  port,
  path: "/v1/responses",
  headers: { authorization: `Bearer ${key}` },
  body: JSON.stringify({ model: "bench/json", input: "Say something short." }),
  connections: 32,
  mode: "loop",
  durationMs: ms,
})

const makeKey = async (port: number, body: Record<string, unknown>) => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench", ...body }),
  })
  return ((await res.json()) as { key: string }).key
}

const redisReachable = async () => {
  try {
    const { RedisClient } = await import("bun")
    const client = new RedisClient(redisUrl, { connectionTimeout: 1000, autoReconnect: false })
    await client.connect()
    client.close()
    return true
  } catch {
    return false
  }
}

const lines: Array<string> = []
const out = (line = "") => lines.push(line)
out("# Scaling out: Redis, rate limits, workers")
out()
out(`Run ${new Date().toISOString()}, ${rounds} rounds of ${durationMs} ms, interleaved (A B, B A, …), each build started afresh per round and warmed up ${warmupMs} ms.`)
out()

/**
 * A against B, CPU per request of the server process: A's build in every round, then B's (order
 * flipped each round); keys made per start with `keyBody`.
 */
const cpuAB = async (label: string, a: Build, b: Build, keyOf: (build: Build) => Record<string, unknown>) => {
  const per: Record<string, Array<number>> = { [a.name]: [], [b.name]: [] }
  for (let round = 1; round <= rounds; round++) {
    for (const build of round % 2 === 1 ? [a, b] : [b, a]) {
      const running = await startBuild(build, join(runDir, `${build.name}-${round}`))
      const key = await makeKey(running.port, keyOf(build))
      await load(json(running.port, key, warmupMs))
      const before = cpuMicros(running.proc.pid)
      const { result } = await load(json(running.port, key, durationMs))
      const perReq = (cpuMicros(running.proc.pid) - before) / result.requests
      per[build.name]?.push(perReq)
      say(`${label} round ${round} ${build.name}: ${result.requests} req, ${result.rps.toFixed(0)}/s, CPU ${perReq.toFixed(1)} µs/req, ${result.errors} errors`)
      await stopBuild(running)
    }
  }
  const pa = per[a.name] as Array<number>
  const pb = per[b.name] as Array<number>
  const paired = median(pb.map((x, i) => x / (pa[i] as number)))
  out(`| ${label} | ${median(pa).toFixed(1)} | ${median(pb).toFixed(1)} | ${paired.toFixed(3)}× |`)
}

const plain: Build = { name: "no-redis", env: {}, args: [], cores: "0" }
const withRedis: Build = { name: "redis", env: { REDIS_URL: redisUrl }, args: [], cores: "0" }
try {
  if ((only.has("redis") || only.has("ratelimit")) && (await redisReachable())) {
    out("## CPU per request (server process, core 0), JSON at 32 connections")
    out()
    out("| row | A µs/req | B µs/req | B/A paired |")
    out("|---|---:|---:|---:|")
    if (only.has("redis")) await cpuAB("A: no Redis, B: Redis configured (unlimited key, no session)", plain, withRedis, () => ({}))
    if (only.has("ratelimit")) {
      const limited: Build = { ...withRedis, name: "redis-rate-limited" }
      await cpuAB("A: Redis, unlimited key; B: Redis, a key with a rate limit", withRedis, limited, (build) =>
        build === limited ? { rate_limit: { requests: 1_000_000, interval: "1h" } } : {},
      )
    }
    out()
  } else if (only.has("redis") || only.has("ratelimit")) {
    out(`Redis rows skipped: ${redisUrl} is not reachable.`)
    out()
  }
  if (only.has("workers")) {
    out("## Requests per second, JSON at 64 connections: one worker against two")
    out()
    out("Both cores for the servers; the load generator shares them (its CPU per request is stated).")
    out()
    out("| engine | workers | req/s (median) | load generator CPU µs/req |")
    out("|---|---:|---:|---:|")
    const engines: Array<{ name: string; url: () => Promise<string | undefined> }> = [
      { name: "sqlite", url: async () => undefined },
      {
        name: "postgres",
        url: async () => {
          try {
            const name = `gw_scale_${Date.now()}_${process.pid}`
            const admin = new Bun.SQL(pgBase)
            await admin.unsafe(`CREATE DATABASE ${name}`)
            await admin.close()
            const u = new URL(pgBase)
            u.pathname = `/${name}`
            return u.toString()
          } catch {
            return "skip"
          }
        },
      },
    ]
    for (const engine of engines) {
      const url = await engine.url()
      if (url === "skip") {
        out(`| ${engine.name} | – | skipped: ${pgBase} not reachable | – |`)
        continue
      }
      const results: Record<number, { rps: Array<number>; client: Array<number> }> = { 1: { rps: [], client: [] }, 2: { rps: [], client: [] } }
      for (let round = 1; round <= rounds; round++) {
        for (const n of round % 2 === 1 ? [1, 2] : [2, 1]) {
          const build: Build = { name: `${engine.name}-w${n}`, env: url === undefined ? {} : { DATABASE_URL: url }, args: ["--workers", String(n)], cores: "0,1" }
          const running = await startBuild(build, join(runDir, `${build.name}-${round}`))
          const key = await makeKey(running.port, {})
          const spec = { ...json(running.port, key, durationMs), connections: 64 }
          await load({ ...spec, durationMs: warmupMs })
          const { result, clientUs } = await load(spec)
          results[n]?.rps.push(result.rps)
          results[n]?.client.push(clientUs / result.requests)
          say(`workers ${engine.name} round ${round} ×${n}: ${result.rps.toFixed(0)}/s, ${result.errors} errors`)
          await stopBuild(running)
        }
      }
      for (const n of [1, 2]) {
        const r = results[n] as { rps: Array<number>; client: Array<number> }
        out(`| ${engine.name} | ${n} | ${median(r.rps).toFixed(0)} | ${median(r.client).toFixed(1)} |`)
      }
      if (url !== undefined) {
        const admin = new Bun.SQL(pgBase)
        await admin.unsafe(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`).catch(() => {})
        await admin.close()
      }
    }
    out()
  }
} finally {
  mock.kill()
}
const report = `${lines.join("\n")}\n`
writeFileSync(join(runDir, "report.md"), report)
for (const entry of ["gateway.db"]) rmSync(join(runDir, entry), { force: true })
console.log(report)
process.exit(0)
