#!/usr/bin/env bun
/**
 * The benchmark (`npm run bench`, `scripts/bench`): on loopback, in one run, the gateway binary
 * against the floor (a bare Bun proxy, scripts/bench-proxy.ts) and, when it installs, a peer
 * gateway (Portkey), all in front of the same mock upstream (scripts/mock-upstream.ts,
 * openai-chat wire). Servers are pinned to core 0, the mock and the load generator
 * (scripts/bench-load.ts) to core 1. Runs are interleaved (A B C, C B A, …) and medians reported;
 * server CPU comes from /proc/<pid>/stat (utime + stime) around each run; the log line of each run
 * adds every thread's user and kernel CPU a request, by name.
 *
 *   bun scripts/bench-run.ts [--rounds 5] [--duration-ms 5000] [--warmup-ms 5000] [--warmup-max-ms 30000] [--jit-settled 0.03]
 *                            [--held 2000] [--held-seconds 60]
 *                            [--no-peer] [--no-held] [--no-held-proxy] [--log-level info] [--quick]
 *                            [--unread 500]
 *                            [--gateway path/to/binary]   (another build to measure; default dist/gateway, rebuilt if stale)
 *                            [--baseline path/to/binary]  (an A/B: this build too, interleaved with the others in the
 *                                                          same rounds; the report gains an A/B table and goes to the
 *                                                          run's folder, not bench/results/latest.md)
 *                            [--restart]  (an A/B's two builds start afresh, and warm up again, before every round:
 *                                          a median over process instances, not of one instance of each)
 *                            [--together]  (an A/B's two builds are loaded at the same time in every round, each by a
 *                                           load generator of its own, both on the server core: a slow spell of
 *                                           the machine weighs on both alike)
 *                            [--alternate]  (with --restart: the two builds trade slots every other round, the port,
 *                                            the load generator and the order they are started and warmed up in, so
 *                                            whatever favours a slot weighs on both builds alike)
 *                            [--baseline-this-config]  (with --baseline: the baseline is given this build's config too,
 *                                                       for a baseline that knows its providers' kinds: the embeddings
 *                                                       and Bedrock rows then run on it as well, in the same units)
 *                            [--plain-config]  (every build gets the config without the embeddings and Bedrock
 *                                               providers: an A/B of two builds older than them, as a bisect needs)
 *                            [--floor]  (with --baseline: a second instance of this build, its twin, measured in the same
 *                                        rounds and slots as the two builds; the report states the paired change of
 *                                        this build against its twin, the harness's own floor in that run)
 *                            [--only id,id]  (just these: scenario ids, "unread" for the never-reading clients, "durable"
 *                                             for the ledger.durable_answers rows, "pg" for the Postgres rows, "chat" for
 *                                             the Chat Completions rows with the Responses rows they are compared with,
 *                                             "embed" for the embeddings row with json-c32, "bedrock" for the Bedrock
 *                                             stream row with stream-c1;
 *                                             no peer, no held streams, and the report stays in the run's folder)
 *                            [--pg postgres://…]  (the server for the Postgres rows, a database is made on it per run;
 *                                                 default GATEWAY_BENCH_PG_URL, else postgres://postgres@127.0.0.1:5432/postgres;
 *                                                 the rows are skipped when it cannot be reached)
 *
 * `--unread N`: never-reading clients for that line (0 skips it).
 * Chat Completions rows (`chat-json-c32`, `chat-stream-c1`): the same loads as `json-c32` and
 * `stream-c1` through the gateway's POST /v1/chat/completions, in the same rounds as those rows when
 * both run, and reported against them. Each gateway's chat answers are checked once before the load;
 * a baseline without the endpoint (an older build) is left out of the chat rows, said so in the report.
 * Embeddings row (`embed-c32`): POST /v1/embeddings, a batch of 16 inputs, 32 connections, to an
 * openai-chat provider on scripts/mock-embeddings.ts; reported beside json-c32's CPU per request.
 * Bedrock stream row (`bedrock-stream-c1`): 200 deltas through the event-stream decoder from
 * scripts/mock-bedrock.ts (SigV4-signed), beside stream-c1's CPU per event. Both run on this build
 * (`--gateway`, and its `--floor` twin) only: its config adds the two providers, which an older
 * baseline would refuse; with `--baseline-this-config` on the baseline too (an A/B of either path).
 * Writes bench/results/latest.md (a full run only) and prints it.
 */
import { execSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus } from "node:os"
import { join } from "node:path"
import type { LoadResult, LoadSpec } from "./bench-load.js"
import { cpuOf, threadUsages, usageByName } from "./proc-usage.js"

// ------------------------------------------------------------------ options

const argv = Bun.argv.slice(2)
const has = (name: string) => argv.includes(`--${name}`)
const value = (name: string, fallback: number): number => {
  const at = argv.indexOf(`--${name}`)
  if (at === -1) return fallback
  const n = Number(argv[at + 1])
  if (!Number.isFinite(n)) throw new Error(`--${name} needs a number`)
  return n
}
const text = (name: string, fallback: string): string => {
  const at = argv.indexOf(`--${name}`)
  return at === -1 ? fallback : (argv[at + 1] ?? fallback)
}
const quick = has("quick")
/** `--only a,b`: those scenario ids ("durable", "pg" and "chat" stand for their groups of scenarios). */
const aliases: Record<string, Array<string>> = {
  durable: ["json-c32-ledger", "stream-c16-ledger"],
  pg: ["json-c32-pg", "json-c32-limited-pg", "json-c32-limited-2pg"],
  chat: ["json-c32", "chat-json-c32", "stream-c1", "chat-stream-c1"],
  embed: ["json-c32", "embed-c32"],
  bedrock: ["stream-c1", "bedrock-stream-c1"],
}
const only = text("only", "")
  .split(",")
  .filter((id) => id !== "")
  .flatMap((id) => aliases[id] ?? [id])
const options = {
  rounds: value("rounds", quick ? 3 : 5),
  durationMs: value("duration-ms", quick ? 2000 : 5000),
  // Per server and scenario, before its rounds: the gateway's JIT threads still used ~11 µs per
  // request 2 s into a load, ~3 µs after 25 s; the figures are for a server that runs for hours.
  // At least `warmup-ms`, then on in slices of a second until the JIT has settled (`warmUp`).
  warmupMs: value("warmup-ms", quick ? 1000 : 5000),
  warmupMaxMs: value("warmup-max-ms", quick ? 1000 : 30_000),
  /** The JIT's compiler threads' share of a server's CPU in a slice under which it counts as settled. */
  jitSettled: value("jit-settled", 0.03),
  heldStreams: value("held", quick ? 500 : 2000),
  heldSeconds: value("held-seconds", quick ? 10 : 60),
  peer: !has("no-peer") && only.length === 0,
  heldProxy: !has("no-held-proxy"),
  held: !has("no-held") && only.length === 0,
  gateway: text("gateway", ""),
  baseline: text("baseline", ""),
  /** The baseline knows the embeddings and Bedrock providers: it gets this build's config and their rows. */
  baselineThisConfig: has("baseline-this-config"),
  /** Every build gets config.json (no embeddings or Bedrock provider, which builds older than them refuse). */
  plainConfig: has("plain-config"),
  /** Same-build A/Bs read +6.7 % one way round and -0.7 % the other: one process instance is a sample. */
  restart: has("restart"),
  /** Rounds minutes apart read up to 1.6x apart here; loads at the same time share the machine's spell. */
  together: has("together"),
  /** A slot (its port, its place in the restart order) read up to +15 % against the other for one build. */
  alternate: has("alternate"),
  /** The same binary against itself in the same run: which differences of the A/B are the harness's own. */
  floor: has("floor"),
  logLevel: text("log-level", "info"),
  /** Never-reading clients on ~4 MB streams, beside a JSON client. */
  unread: value("unread", quick ? 200 : 500),
}
const fullRun = only.length === 0
if (options.alternate && !options.restart) throw new Error("--alternate needs --restart (the builds change slots when they start afresh)")
if (options.baselineThisConfig && options.baseline === "") throw new Error("--baseline-this-config goes with --baseline")
if (options.floor && options.baseline === "") throw new Error("--floor goes with --baseline (it states the A/B's floor)")

const root = join(import.meta.dir, "..")
const bun = process.execPath
const runId = new Date().toISOString().replace(/[:.]/g, "-")
const runDir = join(root, "bench", "scratch", `run-${runId}`)
mkdirSync(runDir, { recursive: true })
const say = (line: string) => console.error(`[bench] ${line}`)

// ------------------------------------------------------------------ machine

const coreCount = cpus().length
const hasTaskset = (() => {
  try {
    execSync("command -v taskset", { stdio: "ignore" })
    return coreCount >= 2
  } catch {
    return false
  }
})()
/** Servers on core 0; the mock and the load generator on core 1. */
const pin = (core: number): Array<string> => (hasTaskset ? ["taskset", "-c", String(core)] : [])
const SERVER_CORE = 0
const CLIENT_CORE = 1
/** utime + stime of a process, in µs. */
const cpuMicros = (pid: number): number => cpuOf(`/proc/${pid}/stat`)
/** What each thread spent a request between two `threadUsages`, user/kernel µs, the busiest first (≥ 0.5 µs). */
const threadsPerRequest = (pid: number, before: ReturnType<typeof threadUsages>, requests: number): string =>
  [...usageByName(pid, before, threadUsages(pid))]
    .map(([name, t]) => ({ name, user: t.user / requests, kernel: t.kernel / requests }))
    .filter((t) => t.user + t.kernel >= 0.5)
    .sort((a, b) => b.user + b.kernel - a.user - a.kernel)
    .map((t) => `${t.name} ${t.user.toFixed(1)}/${t.kernel.toFixed(1)}`)
    .join(", ")
/** Resident set size in bytes. */
const rssBytes = (pid: number): number => {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return match === null ? 0 : Number(match[1]) * 1024
}

const freePort = (): number => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}

// ------------------------------------------------------------------ processes

interface Proc {
  readonly name: string
  readonly proc: ReturnType<typeof Bun.spawn>
}
const started: Array<Proc> = []

const start = (name: string, cmd: Array<string>, env: Record<string, string> = {}, cwd = root, quiet = false): Proc => {
  const log = join(runDir, `${name}.log`)
  const proc = Bun.spawn(cmd, {
    cwd,
    env: { ...process.env, ...env },
    stdout: quiet ? "ignore" : Bun.file(log),
    stderr: Bun.file(`${log}.err`),
  })
  const p = { name, proc }
  started.push(p)
  return p
}

const stopAll = async () => {
  for (const p of started) {
    try {
      p.proc.kill("SIGTERM")
    } catch {}
  }
  await Promise.race([Promise.all(started.map((p) => p.proc.exited)), Bun.sleep(5000)])
  for (const p of started) {
    try {
      p.proc.kill("SIGKILL")
    } catch {}
  }
}
process.on("SIGINT", () => {
  void stopAll().then(() => process.exit(130))
})

const waitReady = async (name: string, url: string, init?: RequestInit) => {
  const until = Date.now() + 30_000
  while (Date.now() < until) {
    try {
      await fetch(url, init)
      return
    } catch {
      await Bun.sleep(100)
    }
  }
  throw new Error(`${name} did not start (see ${runDir}/${name}.log.err)`)
}

/** One run of the load generator on the client core; `onEvent` sees its progress lines. */
const load = async (spec: LoadSpec, onEvent: (event: { event: string }) => void = () => {}): Promise<LoadResult> => {
  const proc = Bun.spawn([...pin(CLIENT_CORE), bun, join(root, "scripts", "bench-load.ts"), JSON.stringify(spec)], {
    cwd: root,
    stdout: "pipe",
    stderr: "inherit",
  })
  let last = ""
  let pending = ""
  const decoder = new TextDecoder()
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    pending += decoder.decode(value, { stream: true })
    let nl = pending.indexOf("\n")
    while (nl !== -1) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      if (line.startsWith('{"event"')) onEvent(JSON.parse(line) as { event: string })
      else if (line.trim() !== "") last = line
      nl = pending.indexOf("\n")
    }
  }
  await proc.exited
  if (pending.trim() !== "") last = pending
  return JSON.parse(last) as LoadResult
}

// ------------------------------------------------------------------ the servers

const mockPort = freePort()
const proxyPort = freePort()
const gatewayPort = freePort()
const baselinePort = freePort()
const twinPort = freePort()
const durablePort = freePort()
const pgPort = freePort()
const pg2Port = freePort()
const peerPort = freePort()
const mockBase = `http://127.0.0.1:${mockPort}/v1`
const embedMockPort = freePort()
const bedrockMockPort = freePort()
const managementKey = process.env["GATEWAY_MANAGEMENT_KEY"] ?? `sk-bench-${crypto.randomUUID().replaceAll("-", "")}`
// Bun's fetch keeps at most 256 requests in flight unless told otherwise (read once at start).
const fetchLimit = { BUN_CONFIG_MAX_HTTP_REQUESTS: String(Math.max(4096, options.heldStreams * 2)) }
const STREAM_TOKENS = 200
const heldTokens = options.heldSeconds * 10
/** Deltas of an answer no client reads: ~4 MB of SSE to the client (~190 bytes an event), ~3 MB from the upstream. */
const UNREAD_TOKENS = 20_000

const provider = (id: string, headers: Record<string, string>) => ({ id, kind: "openai-chat", base_url: mockBase, headers })
const model = (id: string, providerId: string) => ({
  id,
  context_length: 128000,
  endpoints: [{ provider: providerId, upstream_model: "bench-model", pricing: { prompt: 0.15, completion: 0.6 } }],
})
const benchConfig = {
  providers: [
    provider("mock", {}),
    provider("mock-stream", { "x-mock-tokens": String(STREAM_TOKENS) }),
    provider("mock-paced", { "x-mock-tokens": String(STREAM_TOKENS), "x-mock-interval-ms": "1" }),
    provider("mock-held", { "x-mock-tokens": String(heldTokens), "x-mock-interval-ms": "100" }),
    provider("mock-unread", { "x-mock-tokens": String(UNREAD_TOKENS) }),
  ],
  models: [
    model("bench/json", "mock"),
    model("bench/stream", "mock-stream"),
    model("bench/paced", "mock-paced"),
    model("bench/held", "mock-held"),
    model("bench/unread", "mock-unread"),
    // $0.01 a request whatever its tokens: the two-process row's exactness check ($0.05 admits exactly 5).
    {
      id: "bench/penny",
      context_length: 128000,
      endpoints: [{ provider: "mock", upstream_model: "bench-model", pricing: { prompt: 0, completion: 0, request: 0.01 } }],
    },
  ],
}
writeFileSync(join(runDir, "config.json"), JSON.stringify(benchConfig, null, 2))
/** The embeddings and Bedrock rows' providers and models: this build's config only (an older baseline refuses the kind). */
const BEDROCK_KEYS = { BENCH_AWS_KEY: "AKIDMOCKBEDROCK", BENCH_AWS_SECRET: "mock/secret+KEY" }
const gatewayConfig = {
  ...benchConfig,
  providers: [
    ...benchConfig.providers,
    { id: "embed-host", kind: "openai-chat", base_url: `http://127.0.0.1:${embedMockPort}/v1` },
    {
      id: "bedrock-mock",
      kind: "bedrock",
      base_url: `http://127.0.0.1:${bedrockMockPort}`,
      region: "us-east-1",
      access_key_id_env: "BENCH_AWS_KEY",
      secret_access_key_env: "BENCH_AWS_SECRET",
      headers: { "x-mock-tokens": String(STREAM_TOKENS) },
    },
  ],
  models: [
    ...benchConfig.models,
    { id: "bench/embed", kind: "embedding", context_length: 8192, endpoints: [{ provider: "embed-host", upstream_model: "bench-embed", pricing: { prompt: 0.02, completion: 0 } }] },
    { id: "bench/bedrock-stream", context_length: 128000, endpoints: [{ provider: "bedrock-mock", upstream_model: "anthropic.claude-3-5-haiku-20241022-v1:0", pricing: { prompt: 0.15, completion: 0.6 } }] },
  ],
}
writeFileSync(join(runDir, "config-gateway.json"), JSON.stringify(gatewayConfig, null, 2))

const ensurePeer = (): string | undefined => {
  const dir = join(root, "bench", "scratch", "peer")
  const entry = join(dir, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js")
  if (existsSync(entry)) return dir
  mkdirSync(dir, { recursive: true })
  // Newer @hono/node-server versions break its streaming (TypeError: immutable): pinned, also where nested.
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({ name: "bench-peer", private: true, overrides: { "@hono/node-server": "1.13.5" } }, null, 2),
  )
  say("installing the peer gateway (@portkey-ai/gateway@1.15.2) into bench/scratch/peer …")
  try {
    execSync("npm install --ignore-scripts --no-audit --no-fund @portkey-ai/gateway@1.15.2 @hono/node-server@1.13.5", {
      cwd: dir,
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 240_000,
    })
    return existsSync(entry) ? dir : undefined
  } catch (e) {
    say(`peer install failed: ${(e as Error).message.split("\n")[0]}`)
    return undefined
  }
}

const gatewayBinary = options.gateway === "" ? join(root, "dist", "gateway") : options.gateway
if (options.gateway === "") {
  say(`building dist/gateway if stale …`)
  execSync("bash scripts/build --if-stale", { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
}

start("mock", [...pin(CLIENT_CORE), bun, "scripts/mock-upstream.ts", "--port", String(mockPort), "--log", "0"])
// The upstreams of the embeddings and Bedrock rows, beside the mock, when those rows run.
const embedRuns = only.length === 0 || only.includes("embed-c32")
const bedrockRuns = only.length === 0 || only.includes("bedrock-stream-c1")
if (options.plainConfig && (embedRuns || bedrockRuns)) throw new Error("--plain-config leaves the embeddings and Bedrock providers out: pass --only without their rows")
if (embedRuns) start("mock-embeddings", [...pin(CLIENT_CORE), bun, "scripts/mock-embeddings.ts", "--port", String(embedMockPort)], {}, root, true)
if (bedrockRuns) start("mock-bedrock", [...pin(CLIENT_CORE), bun, "scripts/mock-bedrock.ts", "--port", String(bedrockMockPort)], {}, root, true)
const proxy = start(
  "proxy",
  [...pin(SERVER_CORE), bun, "scripts/bench-proxy.ts", "--port", String(proxyPort), "--upstream", `http://127.0.0.1:${mockPort}`],
  fetchLimit,
)
/** A build's process on `port`; its data (and its API keys) stay with the build when `--alternate` moves it to the other port. */
const startGateway = (name: "gateway" | "baseline" | "twin", binary: string, port: number) => {
  const dataDir = name === "gateway" ? runDir : join(runDir, name)
  mkdirSync(dataDir, { recursive: true })
  return start(
    name,
    [...pin(SERVER_CORE), binary, "serve"],
    {
      ...fetchLimit,
      PORT: String(port),
      HOST: "127.0.0.1",
      GATEWAY_DATA_DIR: dataDir,
      DATABASE_URL: join(dataDir, "gateway.db"),
      GATEWAY_CONFIG: join(runDir, !options.plainConfig && (name !== "baseline" || options.baselineThisConfig) ? "config-gateway.json" : "config.json"),
      GATEWAY_MANAGEMENT_KEY: managementKey,
      GATEWAY_LOG_LEVEL: options.logLevel,
      ...BEDROCK_KEYS,
    },
    root,
    // One JSON line per request: written (the cost is measured), not kept.
    true,
  )
}
let gateway = startGateway("gateway", gatewayBinary, gatewayPort)
let baseline = options.baseline === "" ? undefined : startGateway("baseline", options.baseline, baselinePort)
let twin = options.floor ? startGateway("twin", gatewayBinary, twinPort) : undefined
// The same binary with ledger.durable_answers on, for the durability rows (started only when they run).
const durableRuns = only.length === 0 || only.some((id) => id.endsWith("-ledger"))
const durableGateway = durableRuns
  ? start(
      "gateway-durable",
      [...pin(SERVER_CORE), gatewayBinary, "serve"],
      {
        ...fetchLimit,
        PORT: String(durablePort),
        HOST: "127.0.0.1",
        GATEWAY_DATA_DIR: runDir,
        DATABASE_URL: join(runDir, "gateway-durable.db"),
        GATEWAY_CONFIG: join(runDir, "config.json"),
        GATEWAY_MANAGEMENT_KEY: managementKey,
        GATEWAY_LOG_LEVEL: options.logLevel,
        GATEWAY_DURABLE_ANSWERS: "true",
      },
      root,
      true,
    )
  : undefined
// The same binary on Postgres, with budget slices: one process for the unlimited and limited rows, a second
// beside it for the two-process row. A database of the run's own on the server given.
const pgRuns = only.length === 0 || only.some((id) => id.endsWith("-pg") || id.endsWith("-2pg"))
const pgBase = text("pg", process.env["GATEWAY_BENCH_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres")
const pgDatabase = `gw_bench_${runId.replace(/[^0-9]/g, "").slice(0, 14)}_${process.pid}`
let pgNote = "not run"
let pgUrl: string | undefined
if (pgRuns) {
  try {
    const admin = new Bun.SQL(pgBase)
    await admin.unsafe(`CREATE DATABASE ${pgDatabase}`)
    await admin.close()
    const u = new URL(pgBase)
    u.pathname = `/${pgDatabase}`
    pgUrl = u.toString()
    pgNote = `PostgreSQL at ${u.host}, database ${pgDatabase} (dropped after the run)`
  } catch (e) {
    pgNote = `skipped: ${(e as Error).message.split("\n")[0]} (--pg postgres://… or GATEWAY_BENCH_PG_URL)`
    say(`Postgres rows ${pgNote}`)
  }
}
const startPgGateway = (name: "gateway-pg" | "gateway-pg2", port: number) => {
  const dataDir = join(runDir, name)
  mkdirSync(dataDir, { recursive: true })
  return start(
    name,
    [...pin(SERVER_CORE), gatewayBinary, "serve"],
    {
      ...fetchLimit,
      PORT: String(port),
      HOST: "127.0.0.1",
      GATEWAY_DATA_DIR: dataDir,
      DATABASE_URL: pgUrl ?? "",
      GATEWAY_INSTANCE_ID: name,
      GATEWAY_CONFIG: join(runDir, "config.json"),
      GATEWAY_MANAGEMENT_KEY: managementKey,
      GATEWAY_LOG_LEVEL: options.logLevel,
    },
    root,
    true,
  )
}
const pgGateway = pgUrl === undefined ? undefined : startPgGateway("gateway-pg", pgPort)
let pg2Gateway: Proc | undefined

let peerNote = "not run (--no-peer)"
let peer: Proc | undefined
if (options.peer && fullRun) {
  const dir = ensurePeer()
  if (dir === undefined) peerNote = "skipped: the npm install of @portkey-ai/gateway@1.15.2 failed"
  else {
    peer = start("peer", [...pin(SERVER_CORE), "node", "node_modules/@portkey-ai/gateway/build/start-server.js", `--port=${peerPort}`, "--headless"], {}, dir)
    peerNote = `@portkey-ai/gateway 1.15.2 on Node ${execSync("node --version").toString().trim()}`
  }
}

try {
  await waitReady("mock", `${mockBase.replace("/v1", "")}/__mock/stats`)
  await waitReady("proxy", `http://127.0.0.1:${proxyPort}/`)
  await waitReady("gateway", `http://127.0.0.1:${gatewayPort}/v1/health`)
  if (embedRuns) await waitReady("mock-embeddings", `http://127.0.0.1:${embedMockPort}/`)
  if (bedrockRuns) await waitReady("mock-bedrock", `http://127.0.0.1:${bedrockMockPort}/`)
  if (baseline !== undefined) await waitReady("baseline", `http://127.0.0.1:${baselinePort}/v1/health`)
  if (twin !== undefined) await waitReady("twin", `http://127.0.0.1:${twinPort}/v1/health`)
  if (durableGateway !== undefined) await waitReady("gateway-durable", `http://127.0.0.1:${durablePort}/v1/health`)
  if (pgGateway !== undefined) {
    await waitReady("gateway-pg", `http://127.0.0.1:${pgPort}/v1/health`)
    // After the first has migrated the database: the second only finds it ready.
    pg2Gateway = startPgGateway("gateway-pg2", pg2Port)
    await waitReady("gateway-pg2", `http://127.0.0.1:${pg2Port}/v1/health`)
  }
  if (peer !== undefined) {
    try {
      await waitReady("peer", `http://127.0.0.1:${peerPort}/`)
    } catch (e) {
      peerNote = `skipped: ${(e as Error).message}`
      peer = undefined
    }
  }
} catch (e) {
  await stopAll()
  throw e
}

// ------------------------------------------------------------------ scenarios

type Kind = "proxy" | "gateway" | "baseline" | "twin" | "peer" | "durable" | "pg" | "pg2"
interface Target {
  readonly kind: Kind
  readonly label: string
  /** Changes when `--alternate` moves a build to the other slot. */
  port: number
  /** Changes when `--restart` starts the process afresh. */
  pid: number
}
const targets: Array<Target> = [
  { kind: "proxy", label: "bare Bun proxy", port: proxyPort, pid: proxy.proc.pid },
  { kind: "gateway", label: "gateway (dist/gateway)", port: gatewayPort, pid: gateway.proc.pid },
]
if (baseline !== undefined) targets.push({ kind: "baseline", label: `baseline (${options.baseline})`, port: baselinePort, pid: baseline.proc.pid })
if (twin !== undefined) targets.push({ kind: "twin", label: "this build's twin (--floor)", port: twinPort, pid: twin.proc.pid })
/** The gateway builds measured: this one, the baseline of an A/B and this build's twin. */
const isGateway = (kind: Kind) => kind === "gateway" || kind === "baseline" || kind === "twin"
if (peer !== undefined) targets.push({ kind: "peer", label: "peer (Portkey, Node)", port: peerPort, pid: peer.proc.pid })
const durableTarget: Target | undefined =
  durableGateway === undefined ? undefined : { kind: "durable", label: "gateway, durable answers on", port: durablePort, pid: durableGateway.proc.pid }
const pgTarget: Target | undefined =
  pgGateway === undefined ? undefined : { kind: "pg", label: "gateway on Postgres", port: pgPort, pid: pgGateway.proc.pid }
const pg2Target = (): Target | undefined =>
  pg2Gateway === undefined ? undefined : { kind: "pg2", label: "second gateway on Postgres", port: pg2Port, pid: pg2Gateway.proc.pid }
/** Gateways answering on /v1/responses (every kind but the proxy and the peer). */
const speaksResponses = (kind: Kind) => isGateway(kind) || kind === "durable" || kind === "pg" || kind === "pg2"

interface Shape {
  readonly stream: boolean
  /** Extra upstream behaviour, as x-mock-* headers (the gateway has them in its provider config). */
  readonly mock: Record<string, string>
  readonly gatewayModel: string
  /** A request of its own (not /v1/responses): the embeddings row. */
  readonly request?: (secret: string) => Request
}

const PROMPT = "Say hello to the benchmark."
const chatBody = (stream: boolean) =>
  JSON.stringify({
    model: "bench-model",
    messages: [{ role: "user", content: PROMPT }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  })
const DONE_TAIL = "data: [DONE]\n\n"

type Request = Pick<LoadSpec, "path" | "headers" | "body" | "expectTail">
/** A gateway's request in its Chat Completions form: the same model and prompt as the Responses one. */
const gatewayChatRequest = (shape: Shape, secret: string): Request => ({
  path: "/v1/chat/completions",
  headers: { authorization: `Bearer ${secret}` },
  body: JSON.stringify({ model: shape.gatewayModel, messages: [{ role: "user", content: PROMPT }], ...(shape.stream ? { stream: true } : {}) }),
  ...(shape.stream ? { expectTail: DONE_TAIL } : {}),
})

/** `chat`: a gateway's request through POST /v1/chat/completions instead of /v1/responses. */
const requestFor = (target: Target, shape: Shape, secret = managementKey, chat = false): Request => {
  const tail = shape.stream ? { expectTail: DONE_TAIL } : {}
  if (shape.request !== undefined) return shape.request(secret)
  if (chat && speaksResponses(target.kind)) return gatewayChatRequest(shape, secret)
  if (speaksResponses(target.kind)) {
    return {
      path: "/v1/responses",
      headers: { authorization: `Bearer ${secret}` },
      body: JSON.stringify({ model: shape.gatewayModel, input: PROMPT, ...(shape.stream ? { stream: true } : {}) }),
      ...tail,
    }
  }
  const headers: Record<string, string> = { authorization: "Bearer sk-bench-upstream", ...shape.mock }
  if (target.kind === "peer") {
    headers["x-portkey-provider"] = "openai"
    headers["x-portkey-custom-host"] = mockBase
    if (Object.keys(shape.mock).length > 0) headers["x-portkey-forward-headers"] = Object.keys(shape.mock).join(",")
  }
  return { path: "/v1/chat/completions", headers, body: chatBody(shape.stream), ...tail }
}

interface Scenario {
  readonly id: string
  readonly connections: number
  readonly shape: Shape
  /** Upstream text deltas per request (streams), for CPU per relayed event. */
  readonly events: number
  /** The gateway alone, on an API key with a spending limit (a reservation and a settlement per request). */
  readonly limitedKey?: true
  /** The gateway with ledger.durable_answers off and on (two processes of the same binary). */
  readonly ledger?: true
  /** The gateway on Postgres: one process, or two at once with a load of their own each. */
  readonly postgres?: "one" | "two"
  /**
   * Through POST /v1/chat/completions (the gateways whose chat answers passed the check): the id of
   * the Responses scenario it is compared with, run in the same rounds when both are selected.
   */
  readonly chatOf?: string
  /** This build only (the embeddings and Bedrock rows: its config has their providers). */
  readonly thisBuild?: true
  /**
   * The row this one is read against (embeddings against json-c32, Bedrock against stream-c1):
   * measured in the same rounds when both run, so their ratio is paired round by round rather
   * than of two loads minutes apart (which moved 0.86-1.37x between runs of one build).
   */
  readonly beside?: string
}
/** A batch of 16 inputs of ~60 characters each. */
const EMBED_INPUTS = Array.from({ length: 16 }, (_, i) => `Benchmark passage number ${i}: a sentence or two to embed here.`)
const EMBED_SHAPE: Shape = {
  stream: false,
  mock: {},
  gatewayModel: "bench/embed",
  request: (secret) => ({
    path: "/v1/embeddings",
    headers: { authorization: `Bearer ${secret}` },
    body: JSON.stringify({ model: "bench/embed", input: EMBED_INPUTS }),
  }),
}
const BEDROCK_SHAPE: Shape = { stream: true, mock: {}, gatewayModel: "bench/bedrock-stream" }
const JSON_SHAPE: Shape = { stream: false, mock: {}, gatewayModel: "bench/json" }
const BURST_SHAPE: Shape = { stream: true, mock: { "x-mock-tokens": String(STREAM_TOKENS) }, gatewayModel: "bench/stream" }
const PACED_SHAPE: Shape = {
  stream: true,
  mock: { "x-mock-tokens": String(STREAM_TOKENS), "x-mock-interval-ms": "1" },
  gatewayModel: "bench/paced",
}
const allScenarios: Array<Scenario> = [
  { id: "json-c1", connections: 1, shape: JSON_SHAPE, events: 0 },
  { id: "json-c32", connections: 32, shape: JSON_SHAPE, events: 0 },
  { id: "chat-json-c32", connections: 32, shape: JSON_SHAPE, events: 0, chatOf: "json-c32" },
  { id: "stream-c1", connections: 1, shape: BURST_SHAPE, events: STREAM_TOKENS },
  { id: "chat-stream-c1", connections: 1, shape: BURST_SHAPE, events: STREAM_TOKENS, chatOf: "stream-c1" },
  { id: "paced-c16", connections: 16, shape: PACED_SHAPE, events: STREAM_TOKENS },
  { id: "json-c32-limited", connections: 32, shape: JSON_SHAPE, events: 0, limitedKey: true },
  { id: "json-c32-ledger", connections: 32, shape: JSON_SHAPE, events: 0, ledger: true },
  { id: "stream-c16-ledger", connections: 16, shape: BURST_SHAPE, events: STREAM_TOKENS, ledger: true },
  { id: "json-c32-pg", connections: 32, shape: JSON_SHAPE, events: 0, postgres: "one" },
  { id: "json-c32-limited-pg", connections: 32, shape: JSON_SHAPE, events: 0, limitedKey: true, postgres: "one" },
  { id: "json-c32-limited-2pg", connections: 32, shape: JSON_SHAPE, events: 0, limitedKey: true, postgres: "two" },
  { id: "embed-c32", connections: 32, shape: EMBED_SHAPE, events: 0, thisBuild: true, beside: "json-c32" },
  { id: "bedrock-stream-c1", connections: 1, shape: BEDROCK_SHAPE, events: STREAM_TOKENS, thisBuild: true, beside: "stream-c1" },
]
const scenarios = only.length === 0 ? allScenarios : allScenarios.filter((s) => only.includes(s.id))
const unknownIds = only.filter((id) => id !== "unread" && !allScenarios.some((s) => s.id === id))
if (unknownIds.length > 0) throw new Error(`--only: ${unknownIds.join(", ")}? (scenarios: ${allScenarios.map((s) => s.id).join(", ")}; also durable, pg, chat, unread)`)

/**
 * One Chat Completions answer of each shape from a gateway, checked field by field before its load
 * (the load itself checks each answer's status and a stream's closing `[DONE]`): the problem found, or
 * undefined. A build without the endpoint (an older baseline) answers 404 here.
 */
const checkChat = async (target: Target): Promise<string | undefined> => {
  const ask = async (shape: Shape) => {
    const request = gatewayChatRequest(shape, managementKey)
    const res = await fetch(`http://127.0.0.1:${target.port}${request.path}`, {
      method: "POST",
      headers: { ...request.headers, "content-type": "application/json" },
      body: request.body,
    })
    return { status: res.status, type: res.headers.get("content-type") ?? "", body: await res.text() }
  }
  try {
    const json = await ask(JSON_SHAPE)
    if (json.status === 404) return "no POST /v1/chat/completions (404)"
    if (json.status !== 200) return `JSON answered ${json.status}: ${json.body.slice(0, 120)}`
    const answer = JSON.parse(json.body) as {
      object?: unknown
      choices?: Array<{ finish_reason?: unknown; message?: { role?: unknown; content?: unknown } }>
      usage?: { total_tokens?: unknown }
    }
    const choice = answer.choices?.[0]
    if (answer.object !== "chat.completion") return `JSON object ${JSON.stringify(answer.object)}, not "chat.completion"`
    if (answer.choices?.length !== 1 || choice?.message?.role !== "assistant" || typeof choice.message.content !== "string" || choice.message.content === "") {
      return `JSON choices ${JSON.stringify(answer.choices).slice(0, 160)}: not one assistant message with text`
    }
    if (choice.finish_reason !== "stop") return `JSON finish_reason ${JSON.stringify(choice.finish_reason)}, not "stop"`
    if (typeof answer.usage?.total_tokens !== "number") return "JSON answer without usage.total_tokens"

    const stream = await ask(BURST_SHAPE)
    if (stream.status !== 200) return `stream answered ${stream.status}: ${stream.body.slice(0, 120)}`
    if (!stream.type.startsWith("text/event-stream")) return `stream content-type ${stream.type}`
    if (!stream.body.endsWith(DONE_TAIL)) return `stream does not end with [DONE]: ${JSON.stringify(stream.body.slice(-80))}`
    const chunks = stream.body
      .split("\n\n")
      .filter((event) => event.startsWith("data: ") && event !== "data: [DONE]")
      .map(
        (event) =>
          JSON.parse(event.slice(6)) as {
            object?: unknown
            error?: unknown
            choices?: Array<{ delta?: { content?: unknown }; finish_reason?: unknown }>
            usage?: { completion_tokens?: unknown }
          },
      )
    const wrong = chunks.find((c) => c.object !== "chat.completion.chunk" || c.error !== undefined)
    if (wrong !== undefined) return `stream chunk ${JSON.stringify(wrong).slice(0, 160)}`
    const deltas = chunks.filter((c) => typeof c.choices?.[0]?.delta?.content === "string" && c.choices[0].delta.content !== "").length
    if (deltas !== STREAM_TOKENS) return `stream of ${deltas} text deltas, not ${STREAM_TOKENS}`
    if (!chunks.some((c) => c.choices?.[0]?.finish_reason === "stop")) return "stream without a chunk finishing with \"stop\""
    const last = chunks.at(-1)
    if (last?.choices?.length !== 0 || typeof last.usage?.completion_tokens !== "number") return "stream without the usage chunk (choices: []) before [DONE]"
    return undefined
  } catch (e) {
    return `check failed: ${(e as Error).message}`
  }
}
const chatRuns = scenarios.some((s) => s.chatOf !== undefined)
/** Why a gateway is left out of the chat rows, by kind (absent: it runs them). */
const chatSkipped = new Map<Kind, string>()
if (chatRuns) {
  for (const target of targets) {
    if (!isGateway(target.kind)) continue
    const problem = await checkChat(target)
    if (problem === undefined) say(`chat answers of ${target.kind}: checked`)
    else {
      chatSkipped.set(target.kind, problem)
      say(`chat rows skip ${target.kind}: ${problem}`)
    }
  }
}

/** An API key with a limit no run reaches, made through each gateway's own API. */
const limitedSecretOf = async (port: number, limit = 1_000_000) => {
  const res = await fetch(`http://127.0.0.1:${port}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${managementKey}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench-limited", limit }),
  })
  const body = (await res.json()) as { key?: string }
  if (res.status !== 201 || typeof body.key !== "string") throw new Error(`creating the limited key answered ${res.status}`)
  return body.key
}
/** By build for the A/B's two (a build keeps its data when it changes port), by port for the Postgres processes. */
const limitedSecrets = new Map<Kind | number, string>()
const secretOf = (target: Target) => limitedSecrets.get(isGateway(target.kind) ? target.kind : target.port)
for (const target of targets) if (isGateway(target.kind)) limitedSecrets.set(target.kind, await limitedSecretOf(target.port))
// One key for both Postgres processes (they share the database), made through the first.
if (pgTarget !== undefined) {
  const secret = await limitedSecretOf(pgTarget.port)
  limitedSecrets.set(pgPort, secret)
  limitedSecrets.set(pg2Port, secret)
}

interface Sample {
  readonly result: LoadResult
  readonly cpuUs: number
}
const samples = new Map<string, Array<Sample>>()
const key = (scenario: string, kind: Kind) => `${scenario}/${kind}`

const median = (values: Array<number>): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const specOf = (target: Target, scenario: Scenario, durationMs: number): LoadSpec => ({
  host: "127.0.0.1",
  port: target.port,
  connections: scenario.connections,
  mode: "loop",
  durationMs,
  ...requestFor(
    target,
    scenario.shape,
    scenario.limitedKey ? (secretOf(target) ?? managementKey) : managementKey,
    scenario.chatOf !== undefined,
  ),
})
const targetsOf = (scenario: Scenario): Array<Target> =>
  scenario.thisBuild
    ? targets.filter((t) => t.kind === "gateway" || t.kind === "twin" || (t.kind === "baseline" && options.baselineThisConfig))
    : scenario.chatOf !== undefined
    ? targets.filter((t) => isGateway(t.kind) && !chatSkipped.has(t.kind))
    : scenario.postgres !== undefined
    ? pgTarget === undefined ? [] : [pgTarget]
    : scenario.ledger
    ? [...targets.filter((t) => t.kind === "gateway"), ...(durableTarget === undefined ? [] : [durableTarget])]
    : scenario.limitedKey
      ? targets.filter((t) => isGateway(t.kind))
      : targets

/** Two loads run at once (one per process) as one: requests and rates summed, latencies of the first, errors summed. */
const combined = ([a, b]: Array<LoadResult>): LoadResult => ({
  ...a,
  requests: a.requests + b.requests,
  rps: a.rps + b.rps,
  errors: a.errors + b.errors,
  errorSamples: [...a.errorSamples, ...b.errorSamples],
})

/**
 * The limit's exactness with two processes: a $0.05 key at $0.01 a request (bench/penny), 200
 * concurrent requests, 100 through each process: exactly 5 must be admitted.
 */
const exactness = async (): Promise<{ admitted: number; refused: number; other: number } | undefined> => {
  const second = pg2Target()
  if (pgTarget === undefined || second === undefined) return undefined
  const secret = await limitedSecretOf(pgTarget.port, 0.05)
  const statuses = await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const res = await fetch(`http://127.0.0.1:${i % 2 === 0 ? pgTarget.port : second.port}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "bench/penny", input: PROMPT }),
      })
      await res.arrayBuffer()
      return res.status
    }),
  )
  return {
    admitted: statuses.filter((s) => s === 200).length,
    refused: statuses.filter((s) => s === 402).length,
    other: statuses.filter((s) => s !== 200 && s !== 402).length,
  }
}
let exact: Awaited<ReturnType<typeof exactness>>

/**
 * Scenarios measured in the same rounds: each alone, but a chat scenario with the Responses one it
 * is compared with, and the embeddings and Bedrock rows with the rows they are read against, when
 * both run (their ratio is then of loads interleaved, not minutes apart).
 */
const pairedWith = (s: Scenario) => s.chatOf ?? s.beside
const groups: Array<Array<Scenario>> = scenarios
  .filter((s) => pairedWith(s) === undefined || !scenarios.some((r) => r.id === pairedWith(s)))
  .map((s) => [s, ...scenarios.filter((c) => pairedWith(c) === s.id)])

/** What a round measures at once: each target alone, or with `--together` the A/B's two builds as one. */
const unitsOf = (scenario: Scenario): Array<Array<Target>> => {
  const all = targetsOf(scenario)
  // In slot order (the gateway's port first): its load generator is started first.
  const builds = all.filter((t) => isGateway(t.kind)).sort((a, b) => slotPorts.indexOf(a.port) - slotPorts.indexOf(b.port))
  if (!options.together || builds.length < 2) return all.map((t) => [t])
  return [...all.filter((t) => !isGateway(t.kind)).map((t) => [t]), builds]
}

const record = (scenario: Scenario, target: Target, round: number, result: LoadResult, cpuUs: number, threads = "") => {
  const list = samples.get(key(scenario.id, target.kind)) ?? []
  list.push({ result, cpuUs })
  samples.set(key(scenario.id, target.kind), list)
  const perReq = result.requests > 0 ? cpuUs / result.requests : Number.NaN
  say(
    `${scenario.id} round ${round} ${target.kind}: ${result.requests} req, ${result.rps.toFixed(0)}/s, ` +
      `p50 ${result.latency.p50.toFixed(3)} ms, CPU ${perReq.toFixed(1)} µs/req` +
      (result.errors > 0 ? `, ${result.errors} errors (${result.errorSamples[0]})` : "") +
      (threads === "" ? "" : ` (threads, user/kernel µs a request: ${threads})`),
  )
}

/**
 * `--restart`: the builds of an A/B stopped, then started afresh on their own data and warmed up,
 * one after the other. With `--alternate`, the builds rotate through the slots round by round (two
 * builds: on even rounds each takes the other's): the port, and the place in that order (the first
 * waits idle while the next warm up).
 */
const slotPorts = [gatewayPort, baselinePort, twinPort]
const processOf = (kind: Kind) => (kind === "gateway" ? gateway : kind === "baseline" ? baseline : twin)
/** JavaScriptCore's compiler threads, by the name Bun gives them. */
const JIT_THREAD = "JITWorker"
const WARMUP_SLICE_MS = 1000

/**
 * `target` warmed up for `scenario`: `--warmup-ms`, then on in slices of a second until the JIT's
 * compiler threads took under `--jit-settled` of the server's CPU in a slice (at most
 * `--warmup-max-ms`). A fixed 5 s left a build with more code compiling into the rounds on a slow
 * machine (its JIT threads ~35-55 µs of a ~340 µs request against ~5-13 for the reference; with
 * 20 s, 1.5-3 µs): the rounds then measured start-up, not the server users run for hours.
 */
const warmUp = async (target: Target, scenario: Scenario): Promise<void> => {
  await load(specOf(target, scenario, options.warmupMs))
  let spent = options.warmupMs
  let share = Number.NaN
  while (spent < options.warmupMaxMs) {
    const [cpu0, threads0] = [cpuMicros(target.pid), threadUsages(target.pid)]
    await load(specOf(target, scenario, WARMUP_SLICE_MS))
    spent += WARMUP_SLICE_MS
    const jit = usageByName(target.pid, threads0, threadUsages(target.pid)).get(JIT_THREAD)
    const cpu = cpuMicros(target.pid) - cpu0
    share = cpu > 0 && jit !== undefined ? (jit.user + jit.kernel) / cpu : 0
    if (share < options.jitSettled) break
  }
  if (spent > options.warmupMs) say(`${scenario.id} ${target.kind}: warmed up ${(spent / 1000).toFixed(0)} s (JIT threads ${(share * 100).toFixed(1)} % of its CPU in the last second)`)
}

const restartBuilds = async (group: Array<Scenario>, round: number) => {
  const builds = targets.filter((t) => isGateway(t.kind))
  const shift = options.alternate ? (round - 1) % builds.length : 0
  const order = [...builds.slice(builds.length - shift), ...builds.slice(0, builds.length - shift)]
  for (const target of order) {
    const old = processOf(target.kind)
    if (old === undefined) continue
    old.proc.kill("SIGTERM")
    await Promise.race([old.proc.exited, Bun.sleep(10_000)])
    old.proc.kill("SIGKILL")
  }
  for (const [slot, target] of order.entries()) {
    const port = slotPorts[slot] as number
    const fresh =
      target.kind === "baseline" ? startGateway("baseline", options.baseline, port) : startGateway(target.kind === "twin" ? "twin" : "gateway", gatewayBinary, port)
    if (target.kind === "gateway") gateway = fresh
    else if (target.kind === "twin") twin = fresh
    else baseline = fresh
    target.port = port
    target.pid = fresh.proc.pid
    await waitReady(target.kind, `http://127.0.0.1:${port}/v1/health`)
    for (const scenario of group) {
      if (targetsOf(scenario).includes(target)) await warmUp(target, scenario)
    }
  }
}

const t0 = Date.now()
for (const group of groups) {
  for (const scenario of group) {
    say(`${scenario.id}: warm-up`)
    for (const target of targetsOf(scenario)) {
      const second = scenario.postgres === "two" ? pg2Target() : undefined
      if (second === undefined) await warmUp(target, scenario)
      // Two processes on one database warm up together, for `--warmup-ms` only (their JIT is not watched).
      else await Promise.all([load(specOf(target, scenario, options.warmupMs)), load(specOf(second, scenario, options.warmupMs))])
    }
  }
  for (let round = 1; round <= options.rounds; round++) {
    if (options.restart && round > 1) await restartBuilds(group, round)
    // Order reversed every other round (A B C, C B A, …): a server measured first in a round
    // measured slower in same-build A/Bs here, and a fixed order would favour the others.
    const inOrder = group.flatMap((scenario) => unitsOf(scenario).map((unit) => ({ scenario, unit })))
    for (const { scenario, unit } of round % 2 === 1 ? inOrder : [...inOrder].reverse()) {
      const [target] = unit
      if (target === undefined) continue
      if (unit.length > 1) {
        await Promise.all(
          unit.map(async (t) => {
            const [before, threads] = [cpuMicros(t.pid), threadUsages(t.pid)]
            const result = await load(specOf(t, scenario, options.durationMs))
            record(scenario, t, round, result, cpuMicros(t.pid) - before, threadsPerRequest(t.pid, threads, Math.max(1, result.requests)))
          }),
        )
        continue
      }
      const second = scenario.postgres === "two" ? pg2Target() : undefined
      const before = cpuMicros(target.pid) + (second === undefined ? 0 : cpuMicros(second.pid))
      const threads = threadUsages(target.pid)
      const result =
        second === undefined
          ? await load(specOf(target, scenario, options.durationMs))
          : combined(await Promise.all([load(specOf(target, scenario, options.durationMs)), load(specOf(second, scenario, options.durationMs))]))
      const threadLine = second === undefined ? threadsPerRequest(target.pid, threads, Math.max(1, result.requests)) : ""
      record(scenario, target, round, result, cpuMicros(target.pid) + (second === undefined ? 0 : cpuMicros(second.pid)) - before, threadLine)
    }
  }
}

if (scenarios.some((sc) => sc.postgres === "two")) {
  exact = await exactness()
  if (exact !== undefined) say(`two processes, $0.05 at $0.01 a request: ${exact.admitted} of 200 admitted, ${exact.refused} refused (402), ${exact.other} other`)
}

// ------------------------------------------------------------------ held streams

interface Held {
  readonly target: Target
  readonly idle: number
  readonly allOpen: number
  readonly peak: number
  readonly after: number
  readonly result: LoadResult
  readonly settleSeconds: number
  /** [ms since the first stream, RSS bytes] every 500 ms. */
  readonly timeline: Array<[number, number]>
}
const heldRuns: Array<Held> = []
const heldTargets = options.held && fullRun ? targets.filter((t) => t.kind === "gateway" || (t.kind === "proxy" && options.heldProxy)) : []
for (const target of heldTargets) {
  say(`held streams on ${target.kind}: ${options.heldStreams} streams, a token every 100 ms for ${options.heldSeconds} s`)
  await Bun.sleep(2000)
  const idle = rssBytes(target.pid)
  let allOpen = 0
  let peak = idle
  const heldStart = Date.now()
  const timeline: Array<[number, number]> = []
  const sampler = setInterval(() => {
    const rss = rssBytes(target.pid)
    timeline.push([Date.now() - heldStart, rss])
    peak = Math.max(peak, rss)
  }, 500)
  const shape: Shape = {
    stream: true,
    mock: { "x-mock-tokens": String(heldTokens), "x-mock-interval-ms": "100" },
    gatewayModel: "bench/held",
  }
  const result = await load(
    {
      host: "127.0.0.1",
      port: target.port,
      connections: options.heldStreams,
      mode: "hold",
      rampPerSec: 500,
      deadlineMs: options.heldSeconds * 1000 + 120_000,
      ...requestFor(target, shape),
    },
    (event) => {
      if (event.event === "all-open") {
        allOpen = rssBytes(target.pid)
        say(`all ${options.heldStreams} streams open: RSS ${(allOpen / 1048576).toFixed(1)} MB`)
      }
    },
  )
  clearInterval(sampler)
  peak = Math.max(peak, rssBytes(target.pid))
  // Memory goes back lazily: give it up to 20 s to come within 10 % of idle.
  const settleStart = Date.now()
  let after = rssBytes(target.pid)
  while (after > idle * 1.1 && Date.now() - settleStart < 20_000) {
    await Bun.sleep(1000)
    after = rssBytes(target.pid)
  }
  heldRuns.push({ target, idle, allOpen, peak, after, result, settleSeconds: (Date.now() - settleStart) / 1000, timeline })
  writeFileSync(join(runDir, `held-${target.kind}.json`), JSON.stringify({ idle, allOpen, peak, after, timeline }))
  say(
    `held on ${target.kind}: idle ${(idle / 1048576).toFixed(1)} MB, all open ${(allOpen / 1048576).toFixed(1)} MB, ` +
      `peak ${(peak / 1048576).toFixed(1)} MB, after ${(after / 1048576).toFixed(1)} MB; ${result.requests} ok, ${result.errors} errors`,
  )
}

// ------------------------------------------------------------------ never-reading clients

interface Unread {
  readonly idle: number
  readonly peak: number
  /** Once every stream is open and paused: a second before the clients close. */
  readonly held: number
  readonly unread: LoadResult
  readonly json: LoadResult
}
let unreadRun: Unread | undefined
const UNREAD_JSON_MS = 10_000
if (options.unread > 0 && (fullRun || only.includes("unread"))) {
  const target = targets.find((t) => t.kind === "gateway") as Target
  say(`never-reading clients: ${options.unread} streams of ${UNREAD_TOKENS} deltas (~4 MB), a JSON client beside them for ${UNREAD_JSON_MS / 1000} s`)
  await Bun.sleep(2000)
  const idle = rssBytes(target.pid)
  let peak = idle
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssBytes(target.pid))
  }, 250)
  const unreadShape: Shape = { stream: true, mock: { "x-mock-tokens": String(UNREAD_TOKENS) }, gatewayModel: "bench/unread" }
  // Once every stream is open (and, its client reading nothing, paused): a JSON client beside them.
  let json: Promise<LoadResult> | undefined
  let held = 0
  const unread = await load(
    {
      host: "127.0.0.1",
      port: target.port,
      connections: options.unread,
      mode: "unread",
      rampPerSec: 500,
      holdMs: UNREAD_JSON_MS,
      deadlineMs: UNREAD_JSON_MS + 120_000,
      ...requestFor(target, unreadShape),
    },
    (event) => {
      if (event.event !== "all-open") return
      say(`all ${options.unread} never-reading streams open: RSS ${(rssBytes(target.pid) / 1048576).toFixed(1)} MB`)
      json = load({ host: "127.0.0.1", port: target.port, connections: 1, mode: "loop", durationMs: UNREAD_JSON_MS - 1000, ...requestFor(target, JSON_SHAPE) })
      setTimeout(() => {
        held = rssBytes(target.pid)
      }, UNREAD_JSON_MS - 1000)
    },
  )
  clearInterval(sampler)
  const jsonResult = json === undefined ? await load({ host: "127.0.0.1", port: target.port, connections: 1, mode: "loop", durationMs: 1000, ...requestFor(target, JSON_SHAPE) }) : await json
  unreadRun = { idle, peak: Math.max(peak, rssBytes(target.pid)), held, unread, json: jsonResult }
  writeFileSync(join(runDir, "unread.json"), JSON.stringify(unreadRun))
  say(
    `never-reading: idle ${(idle / 1048576).toFixed(1)} MB, peak ${(unreadRun.peak / 1048576).toFixed(1)} MB, held ${(held / 1048576).toFixed(1)} MB; ${unread.requests} streams answered 200, ` +
      `${unread.errors} errors; JSON p99 ${unreadRun.json.latency.p99.toFixed(2)} ms over ${unreadRun.json.requests} requests`,
  )
}
const elapsed = (Date.now() - t0) / 1000

// ------------------------------------------------------------------ figures

interface Figures {
  readonly runs: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly ttfb50: number
  readonly cpuPerReq: number
  readonly cpuPerEvent: number
  readonly errors: number
}
const figures = (scenario: Scenario, kind: Kind): Figures | undefined => {
  const list = samples.get(key(scenario.id, kind))
  if (list === undefined || list.length === 0) return undefined
  const ok = list.filter((s) => s.result.requests > 0)
  return {
    runs: list.length,
    rps: median(ok.map((s) => s.result.rps)),
    p50: median(ok.map((s) => s.result.latency.p50)),
    p99: median(ok.map((s) => s.result.latency.p99)),
    ttfb50: median(ok.map((s) => s.result.ttfb.p50)),
    cpuPerReq: median(ok.map((s) => s.cpuUs / s.result.requests)),
    cpuPerEvent: scenario.events === 0 ? Number.NaN : median(ok.map((s) => s.cpuUs / (s.result.requests * scenario.events))),
    errors: list.reduce((n, s) => n + s.result.errors, 0),
  }
}

/** The median of the per-round ratios of this build's CPU per request to the baseline's (or its twin's), minus one. */
const pairedChange = (scenario: Scenario, against: Kind = "baseline"): number => {
  const perReq = (kind: Kind) => (samples.get(key(scenario.id, kind)) ?? []).map((s) => (s.result.requests > 0 ? s.cpuUs / s.result.requests : Number.NaN))
  const a = perReq(against)
  const ratios = perReq("gateway").flatMap((b, i) => {
    const base = a[i]
    return base !== undefined && Number.isFinite(b) && Number.isFinite(base) ? [b / base] : []
  })
  return ratios.length === 0 ? Number.NaN : median(ratios) - 1
}

/** The median of the per-round ratios of one build's CPU per event (or per request) in row `id` to row `against` (same rounds). */
const pairedRowRatio = (id: Scenario, against: Scenario, kind: Kind, perEvent: boolean): number => {
  const per = (scenario: Scenario) =>
    (samples.get(key(scenario.id, kind)) ?? []).map((s) =>
      s.result.requests > 0 ? s.cpuUs / (s.result.requests * (perEvent ? scenario.events : 1)) : Number.NaN,
    )
  const theirs = per(against)
  const ratios = per(id).flatMap((mine, i) => {
    const other = theirs[i]
    return other !== undefined && Number.isFinite(mine) && Number.isFinite(other) && other > 0 ? [mine / other] : []
  })
  return ratios.length === 0 ? Number.NaN : median(ratios)
}

const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "–")
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "–")
const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : "–")
const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "–")
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : "–")
const mb = (bytes: number) => (bytes / 1048576).toFixed(1)
/** Free text (an error body) as one table cell. */
const cell = (text: string) => text.replace(/\s+/g, " ").replaceAll("|", "\\|")
const signed = (n: number, digits: number) => (Number.isFinite(n) ? `${n >= 0 ? "+" : ""}${n.toFixed(digits)}` : "–")

const byId = (id: string) => allScenarios.find((s) => s.id === id)!
const lines: Array<string> = []
const out = (line = "") => lines.push(line)

const bunVersion = Bun.version
const cpuModel = cpus()[0]?.model ?? "unknown CPU"
out(`# Benchmark: gateway vs a bare Bun proxy${peer !== undefined ? " and a peer gateway" : ""}`)
out()
out(`Run ${new Date().toISOString()} on ${cpuModel}, ${coreCount} cores, Bun ${bunVersion}; ${elapsed.toFixed(0)} s of load.`)
out(
  `Loopback; ${hasTaskset ? "servers pinned to core 0, mock upstream and load generator to core 1 (taskset)" : "no pinning (taskset or a second core missing)"}; ` +
    `${options.rounds} interleaved rounds of ${options.durationMs / 1000} s per server and scenario (order reversed every other round), medians; ` +
    `each server warmed up ${options.warmupMs / 1000} s, then until its JIT threads took under ${(options.jitSettled * 100).toFixed(0)} % of its CPU in a second (at most ${options.warmupMaxMs / 1000} s). ` +
    (options.restart ? "The A/B's builds were started afresh and warmed up again before every round (--restart). " : "") +
    (options.together ? "The A/B's two builds were loaded at the same time in each round, sharing the server core (--together). " : "") +
    (options.alternate ? "The two builds traded slots (port, start order) every other round (--alternate). " : "") +
    `Server CPU = utime + stime of the server process (/proc/<pid>/stat) over the run.`,
)
out(
  `Gateway: \`${options.gateway === "" ? "dist/gateway" : options.gateway}\` (bun build --compile), openai-chat provider to the mock, SQLite ledger in a temp file, ` +
    `management key from GATEWAY_MANAGEMENT_KEY, GATEWAY_LOG_LEVEL=${options.logLevel} (lines written to /dev/null), metrics on. ` +
    `Peer: ${peerNote}.`,
)
out(`Load: scripts/bench-load.ts (closed loop, keep-alive HTTP/1.1 over raw sockets). Upstream: scripts/mock-upstream.ts, zero delay unless stated.`)
out()

/** Whether a scenario ran (--only leaves the others out, and their tables with them). */
const ran = (id: string) => scenarios.some((s) => s.id === id)

const jsonTable = (id: string, title: string) => {
  if (!ran(id)) return
  const scenario = byId(id)
  const base = figures(scenario, "proxy")
  out(`## ${title}`)
  out()
  out("| server | req/s | p50 ms | p99 ms | CPU µs/req | CPU vs proxy | req per CPU-second | added p50 ms | errors |")
  out("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
  for (const target of targets) {
    const f = figures(scenario, target.kind)
    if (f === undefined) continue
    const added = base === undefined || target.kind === "proxy" ? "–" : signed(f.p50 - base.p50, 3)
    out(
      `| ${target.label} | ${f0(f.rps)} | ${f3(f.p50)} | ${f3(f.p99)} | ${f1(f.cpuPerReq)} | ${base === undefined ? "–" : ratio(f.cpuPerReq, base.cpuPerReq)} | ${f0(1e6 / f.cpuPerReq)} | ${added} | ${f.errors} |`,
    )
  }
  out()
}
jsonTable("json-c1", "JSON answers, zero-delay upstream, 1 connection")
jsonTable("json-c32", "JSON answers, zero-delay upstream, 32 connections")

const streamTable = (id: string, title: string) => {
  if (!ran(id)) return
  const scenario = byId(id)
  const base = figures(scenario, "proxy")
  out(`## ${title}`)
  out()
  out("| server | streams/s | TTFB p50 ms | added TTFB ms | end p50 ms | CPU µs/stream | CPU µs/event | CPU vs proxy | errors |")
  out("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
  for (const target of targets) {
    const f = figures(scenario, target.kind)
    if (f === undefined) continue
    const added = base === undefined || target.kind === "proxy" ? "–" : signed(f.ttfb50 - base.ttfb50, 3)
    out(
      `| ${target.label} | ${f0(f.rps)} | ${f3(f.ttfb50)} | ${added} | ${f2(f.p50)} | ${f0(f.cpuPerReq)} | ${f2(f.cpuPerEvent)} | ${base === undefined ? "–" : ratio(f.cpuPerEvent, base.cpuPerEvent)} | ${f.errors} |`,
    )
  }
  out()
}
if (ran("json-c32-limited")) {
  const limited = figures(byId("json-c32-limited"), "gateway")
  const unlimited = figures(byId("json-c32"), "gateway")
  out("## JSON answers on a key with a spending limit, 32 connections (gateway only)")
  out()
  out(
    "Each request holds its worst case against the key's limit before the call and settles the actual after (SQLite): " +
      "admitted in memory against the process's budget slice, settled in the ledger writer's batch.",
  )
  out()
  out("| server | req/s | p50 ms | p99 ms | CPU µs/req | CPU vs the same gateway on an unlimited key | errors |")
  out("|---|---:|---:|---:|---:|---:|---:|")
  if (limited !== undefined) {
    out(
      `| gateway, limited key | ${f0(limited.rps)} | ${f3(limited.p50)} | ${f3(limited.p99)} | ${f1(limited.cpuPerReq)} | ${unlimited === undefined ? "–" : ratio(limited.cpuPerReq, unlimited.cpuPerReq)} | ${limited.errors} |`,
    )
  }
  out()
}
if (ran("json-c32-pg") || ran("json-c32-limited-pg") || ran("json-c32-limited-2pg")) {
  const unlimited = figures(byId("json-c32-pg"), "pg")
  const limited = figures(byId("json-c32-limited-pg"), "pg")
  const two = figures(byId("json-c32-limited-2pg"), "pg")
  out("## JSON answers on Postgres, 32 connections (gateway only)")
  out()
  out(
    `The same binary on Postgres (${pgNote}). A key with a limit takes budget slices and admits requests against them in memory; ` +
      "the two-process row runs two gateways on the one database at once, 32 connections each, on one limited key (req/s combined, CPU of both per request).",
  )
  out()
  out("| server | req/s | p50 ms | p99 ms | CPU µs/req | CPU vs the same gateway on an unlimited key (Postgres) | errors |")
  out("|---|---:|---:|---:|---:|---:|---:|")
  for (const [label, f] of [["unlimited key", unlimited], ["limited key", limited], ["two processes, one limited key", two]] as const) {
    if (f === undefined) continue
    out(
      `| ${label} | ${f0(f.rps)} | ${f3(f.p50)} | ${f3(f.p99)} | ${f1(f.cpuPerReq)} | ${unlimited === undefined ? "–" : ratio(f.cpuPerReq, unlimited.cpuPerReq)} | ${f.errors} |`,
    )
  }
  out()
  if (exact !== undefined) {
    out(
      `Limit exactness, two processes: a $0.05 key at $0.01 a request, 200 concurrent requests (100 through each): ` +
        `${exact.admitted} admitted, ${exact.refused} refused with 402, ${exact.other} other (${exact.admitted === 5 && exact.other === 0 ? "exact" : "**not exact**"}).`,
    )
    out()
  }
}
streamTable("stream-c1", `Streams of ${STREAM_TOKENS} text deltas sent at once, 1 connection`)
streamTable("paced-c16", `Streams of ${STREAM_TOKENS} text deltas 1 ms apart (one upstream chunk per delta), 16 connections`)

if (ran("embed-c32") || ran("bedrock-stream-c1")) {
  out("## Embeddings and Bedrock streams (this build only)")
  out()
  out(
    "Embeddings: POST /v1/embeddings with a batch of 16 inputs through an openai-chat provider (scripts/mock-embeddings.ts), 32 connections, " +
      "beside json-c32's CPU per request. Bedrock: a ConverseStream answer of " +
      `${STREAM_TOKENS} text deltas (AWS event-stream frames, SigV4-signed request, scripts/mock-bedrock.ts) to /v1/responses, 1 connection, beside stream-c1's CPU per event.`,
  )
  out()
  out("| row | req/s | p50 ms | CPU µs/req | CPU µs/event | compared with | its CPU | ratio | paired ratio (same rounds) | errors |")
  out("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|")
  const kinds: Array<Kind> = options.baselineThisConfig ? ["gateway", "baseline"] : ["gateway"]
  for (const [id, against, perEvent] of [["embed-c32", "json-c32", false], ["bedrock-stream-c1", "stream-c1", true]] as const) {
    if (!ran(id)) continue
    for (const kind of kinds) {
      const f = figures(byId(id), kind)
      if (f === undefined) continue
      const other = ran(against) ? figures(byId(against), kind) : undefined
      const mine = perEvent ? f.cpuPerEvent : f.cpuPerReq
      const theirs = other === undefined ? Number.NaN : perEvent ? other.cpuPerEvent : other.cpuPerReq
      out(
        `| ${id}${kind === "gateway" ? "" : ` (${kind})`} | ${f0(f.rps)} | ${f3(f.p50)} | ${f1(f.cpuPerReq)} | ${f2(f.cpuPerEvent)} | ${against} (${perEvent ? "µs/event" : "µs/req"}) | ${perEvent ? f2(theirs) : f1(theirs)} | ${ratio(mine, theirs)} | ${ran(against) ? f2(pairedRowRatio(byId(id), byId(against), kind, perEvent)) : "–"}× | ${f.errors} |`,
      )
    }
  }
  out()
}

/** Chat Completions rows: [chat scenario id, what it loads]. */
const CHAT_ROWS = [
  ["chat-json-c32", "JSON, 32 connections"],
  ["chat-stream-c1", `streams of ${STREAM_TOKENS} deltas, 1 connection`],
] as const
if (CHAT_ROWS.some(([id]) => ran(id))) {
  out("## Chat Completions against Responses (the same gateway, loads and upstream)")
  out()
  out(
    "The same requests through POST /v1/chat/completions (`{model, messages, stream}`) as the Responses rows through /v1/responses, " +
      "in the same rounds when both ran. Each gateway's chat answers were checked once before the load (object, message, finish reason, usage; " +
      `a stream's ${STREAM_TOKENS} deltas, finish chunk, usage chunk and [DONE]); the load counts an answer that is not 200 (or a stream not ending in [DONE]) as an error.`,
  )
  out()
  out("| load | server | req/s | p50 ms | TTFB p50 ms | CPU µs/req | Responses CPU µs/req | Chat vs Responses | errors |")
  out("|---|---|---:|---:|---:|---:|---:|---:|---:|")
  for (const [id, loadLabel] of CHAT_ROWS) {
    if (!ran(id)) continue
    const scenario = byId(id)
    for (const target of targets) {
      if (!isGateway(target.kind)) continue
      const skipped = chatSkipped.get(target.kind)
      if (skipped !== undefined) {
        out(`| ${loadLabel} | ${target.label} | n/a: ${cell(skipped)} | – | – | – | – | – | – |`)
        continue
      }
      const f = figures(scenario, target.kind)
      if (f === undefined) continue
      const responses = figures(byId(scenario.chatOf ?? ""), target.kind)
      const ttfb = scenario.shape.stream ? f3(f.ttfb50) : "–"
      out(
        `| ${loadLabel} | ${target.label} | ${f0(f.rps)} | ${f3(f.p50)} | ${ttfb} | ${f1(f.cpuPerReq)} | ${responses === undefined ? "– (not run)" : f1(responses.cpuPerReq)} | ${responses === undefined ? "–" : ratio(f.cpuPerReq, responses.cpuPerReq)} | ${f.errors} |`,
      )
    }
  }
  out()
}

if (ran("json-c32-ledger") || ran("stream-c16-ledger")) {
  out("## Ledger durability: `ledger.durable_answers` off and on (two processes of the same binary, SQLite file)")
  out()
  out(
    "Off: the group-commit writer commits every 25 ms; a process crash loses at most that window's records. " +
      "On: an answer's last byte (the JSON body; a stream's `response.completed` and `[DONE]`) waits for the commit of its record, " +
      "and the writer commits as soon as the previous commit ends (no window); nothing answered is lost.",
  )
  out()
  out("| setting | load | req/s | p50 ms | p99 ms | CPU µs/req | CPU vs off | errors |")
  out("|---|---|---:|---:|---:|---:|---:|---:|")
  for (const [id, load] of [["json-c32-ledger", "JSON, 32 connections"], [`stream-c16-ledger`, `streams of ${STREAM_TOKENS} deltas, 16 connections`]] as const) {
    if (!ran(id)) continue
    const off = figures(byId(id), "gateway")
    const on = figures(byId(id), "durable")
    for (const [label, f] of [["off (default)", off], ["on", on]] as const) {
      if (f === undefined) continue
      out(
        `| ${label} | ${load} | ${f0(f.rps)} | ${f3(f.p50)} | ${f3(f.p99)} | ${f1(f.cpuPerReq)} | ${off === undefined ? "–" : ratio(f.cpuPerReq, off.cpuPerReq)} | ${f.errors} |`,
      )
    }
  }
  out()
}

if (heldRuns.length > 0) {
  out(`## Held streams: ${options.heldStreams} concurrent, a token every 100 ms for ${options.heldSeconds} s`)
  out()
  out("| server | idle RSS MB | all open MB | peak MB | after MB | after vs idle | streams ok | errors |")
  out("|---|---:|---:|---:|---:|---:|---:|---:|")
  for (const h of heldRuns) {
    out(
      `| ${h.target.label} | ${mb(h.idle)} | ${mb(h.allOpen)} | ${mb(h.peak)} | ${mb(h.after)} | ${signed(((h.after - h.idle) / h.idle) * 100, 1)} % | ${h.result.requests} | ${h.result.errors} |`,
    )
  }
  out()
}

if (unreadRun !== undefined) {
  out(`## Clients that read nothing: ${options.unread} streams of ~4 MB (${UNREAD_TOKENS} deltas), beside a JSON client (gateway only)`)
  out()
  out(
    "Each client reads the answer's first bytes and then nothing; the gateway pauses their upstreams (backpressure). " +
      "Peak RSS includes the garbage of relaying what the sockets' kernel buffers took before any write waited; " +
      "held RSS is taken with every stream open and paused. The JSON client runs once all streams are open.",
  )
  out()
  out("| idle RSS MB | peak RSS MB | held RSS MB | added (held) MB | streams answered | stream TTFB p50 ms | stream errors | JSON requests | JSON p50 ms | JSON p99 ms | JSON errors |")
  out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  const u = unreadRun
  out(
    `| ${mb(u.idle)} | ${mb(u.peak)} | ${mb(u.held)} | ${mb(u.held - u.idle)} | ${u.unread.requests} | ${f0(u.unread.ttfb.p50)} | ${u.unread.errors} | ${u.json.requests} | ${f3(u.json.latency.p50)} | ${f3(u.json.latency.p99)} | ${u.json.errors} |`,
  )
  out()
}

// ------------------------------------------------------------------ targets

const verdict = (ok: boolean) => (ok ? "holds" : "**missed**")
const jc1 = { gw: figures(byId("json-c1"), "gateway"), px: figures(byId("json-c1"), "proxy") }
const jc32 = { gw: figures(byId("json-c32"), "gateway"), px: figures(byId("json-c32"), "proxy"), peer: figures(byId("json-c32"), "peer") }
const sc1 = { gw: figures(byId("stream-c1"), "gateway"), px: figures(byId("stream-c1"), "proxy") }
const pc16 = { gw: figures(byId("paced-c16"), "gateway"), px: figures(byId("paced-c16"), "proxy") }
const heldGateway = heldRuns.find((h) => h.target.kind === "gateway")
/** This build's chat rows against its Responses rows: [load, CPU ratio] where both ran. */
const chatRatios = CHAT_ROWS.flatMap(([id, loadLabel]) => {
  const chat = figures(byId(id), "gateway")
  const responses = figures(byId(byId(id).chatOf ?? ""), "gateway")
  return chat === undefined || responses === undefined ? [] : [[loadLabel, chat.cpuPerReq / responses.cpuPerReq] as const]
})
out("## Targets")
out()
out("| target | measured | verdict |")
out("|---|---|---|")
if (jc1.gw && jc1.px && jc32.gw && jc32.px) {
  const r1 = jc1.gw.cpuPerReq / jc1.px.cpuPerReq
  const r32 = jc32.gw.cpuPerReq / jc32.px.cpuPerReq
  out(`| JSON: gateway CPU per request ≤ 2.0× the proxy's | c=1: ${r1.toFixed(2)}×; c=32: ${r32.toFixed(2)}× | ${verdict(r1 <= 2 && r32 <= 2)} |`)
  const added = jc1.gw.p50 - jc1.px.p50
  out(`| JSON: added p50 latency at c=1 ≤ 0.5 ms | ${added.toFixed(3)} ms | ${verdict(added <= 0.5)} |`)
}
if (sc1.gw && sc1.px && pc16.gw && pc16.px) {
  const rb = sc1.gw.cpuPerEvent / sc1.px.cpuPerEvent
  const rp = pc16.gw.cpuPerEvent / pc16.px.cpuPerEvent
  out(`| Streams: CPU per relayed event ≤ 2.0× the proxy's | at once: ${rb.toFixed(2)}×; 1 ms apart: ${rp.toFixed(2)}× | ${verdict(rb <= 2 && rp <= 2)} |`)
  const added = sc1.gw.ttfb50 - sc1.px.ttfb50
  out(`| Streams: added TTFB ≤ 1 ms | ${added.toFixed(3)} ms | ${verdict(added <= 1)} |`)
}
if (chatRatios.length > 0) {
  out(
    `| Chat Completions: CPU per request within 10 % of the Responses row's | ${chatRatios.map(([l, r]) => `${l}: ${r.toFixed(2)}×`).join("; ")} | ${verdict(chatRatios.every(([, r]) => r <= 1.1))} |`,
  )
}
if (heldGateway !== undefined) {
  const peakOk = heldGateway.peak <= 200 * 1048576
  const backOk = heldGateway.after <= heldGateway.idle * 1.1
  out(`| ${options.heldStreams} held streams in ≤ 200 MB RSS | peak ${mb(heldGateway.peak)} MB | ${verdict(peakOk)} |`)
  out(`| RSS back within 10 % of idle after | ${mb(heldGateway.idle)} → ${mb(heldGateway.after)} MB | ${verdict(backOk)} |`)
}
if (unreadRun !== undefined) {
  const added = unreadRun.held - unreadRun.idle
  out(
    `| ${options.unread} never-reading clients on ~4 MB streams add ≤ 150 MB RSS | held ${mb(added)} MB (peak ${mb(unreadRun.peak - unreadRun.idle)} MB) | ${verdict(added <= 150 * 1048576)} |`,
  )
  out(`| beside them, a JSON client's p99 < 50 ms | ${f2(unreadRun.json.latency.p99)} ms | ${verdict(unreadRun.json.latency.p99 < 50)} |`)
}
{
  const unlimited = figures(byId("json-c32-pg"), "pg")
  const limited = figures(byId("json-c32-limited-pg"), "pg")
  if (unlimited !== undefined && limited !== undefined) {
    const r = limited.cpuPerReq / unlimited.cpuPerReq
    out(`| Postgres, limited key: CPU per request ≤ 1.3× the unlimited key's; ≥ 8,000 req/s | ${r.toFixed(2)}×; ${f0(limited.rps)} req/s | ${verdict(r <= 1.3 && limited.rps >= 8000)} |`)
  }
  const sqliteLimited = figures(byId("json-c32-limited"), "gateway")
  const sqliteUnlimited = figures(byId("json-c32"), "gateway")
  if (sqliteLimited !== undefined && sqliteUnlimited !== undefined) {
    const r = sqliteLimited.cpuPerReq / sqliteUnlimited.cpuPerReq
    out(`| SQLite, limited key: CPU per request ≤ 1.3× the unlimited key's | ${r.toFixed(2)}× | ${verdict(r <= 1.3)} |`)
  }
  if (exact !== undefined) out(`| Two processes on Postgres: a $0.05 limit at $0.01 admits exactly 5 of 200 | ${exact.admitted} of 200 | ${verdict(exact.admitted === 5 && exact.other === 0)} |`)
}
if (!fullRun) {
  // One line alone: no comparison with the peer.
} else if (jc32.gw && jc32.peer) {
  const r = jc32.peer.cpuPerReq / jc32.gw.cpuPerReq
  out(`| ≥ 10× the peer's requests per CPU-second (JSON, c=32) | ${r.toFixed(1)}× (${f0(1e6 / jc32.gw.cpuPerReq)} vs ${f0(1e6 / jc32.peer.cpuPerReq)}) | ${verdict(r >= 10)} |`)
} else {
  out(`| ≥ 10× the peer's requests per CPU-second | peer ${peerNote} | – |`)
}
out()
if (baseline !== undefined) {
  out(`## A/B: this build against the baseline (\`${options.baseline}\`), same rounds`)
  out()
  const floorHead = twin === undefined ? "" : " floor: this build vs its twin, paired |"
  out(`| scenario | baseline CPU µs/req | this build CPU µs/req | change | paired | baseline vs proxy | this build vs proxy |${floorHead}`)
  out(`|---|---:|---:|---:|---:|---:|---:|${twin === undefined ? "" : "---:|"}`)
  for (const scenario of scenarios) {
    const a = figures(scenario, "baseline")
    const b = figures(scenario, "gateway")
    const px = figures(scenario, "proxy")
    const skipped = scenario.chatOf === undefined ? undefined : chatSkipped.get("baseline")
    if (skipped !== undefined && b !== undefined) {
      out(`| ${scenario.id} | n/a: ${cell(skipped)} | ${f1(b.cpuPerReq)} | – | – | – | – |`)
      continue
    }
    if (a === undefined || b === undefined) continue
    const change = signed(((b.cpuPerReq - a.cpuPerReq) / a.cpuPerReq) * 100, 1)
    const vsProxy = (f: Figures) => (px === undefined || scenario.limitedKey ? "–" : ratio(f.cpuPerReq, px.cpuPerReq))
    const floor = twin === undefined ? "" : ` ${signed(pairedChange(scenario, "twin") * 100, 1)} % |`
    out(`| ${scenario.id} | ${f1(a.cpuPerReq)} | ${f1(b.cpuPerReq)} | ${change} % | ${signed(pairedChange(scenario) * 100, 1)} % | ${vsProxy(a)} | ${vsProxy(b)} |${floor}`)
  }
  out()
  out(
    "Paired: the median over rounds of this build's CPU per request over the baseline's in the same round " +
      "(the two loads minutes apart at most, so a machine's slow spell weighs on both)." +
      (twin === undefined
        ? ""
        : " Floor: the same figure for this build against a second instance of itself in the same rounds and slots; " +
          "an A/B difference inside it is the harness's, not the build's."),
  )
  out()
}
out(`Raw samples: bench/scratch/run-${runId}/raw.json (not committed).`)

const report = lines.join("\n") + "\n"
writeFileSync(
  join(runDir, "raw.json"),
  JSON.stringify({ options, samples: Object.fromEntries(samples), held: heldRuns.map((h) => ({ ...h, target: h.target.kind })), unread: unreadRun }, null, 2),
)
// An A/B is a comparison and a partial run (--only) is not the benchmark: both stay in the run's folder.
const reportPath = baseline !== undefined ? join(runDir, "ab.md") : fullRun ? join(root, "bench", "results", "latest.md") : join(runDir, "report.md")
mkdirSync(join(root, "bench", "results"), { recursive: true })
writeFileSync(reportPath, report)
await stopAll()
if (pgUrl !== undefined) {
  try {
    const admin = new Bun.SQL(pgBase)
    await admin.unsafe(`DROP DATABASE IF EXISTS ${pgDatabase} WITH (FORCE)`)
    await admin.close()
  } catch (e) {
    say(`could not drop the bench database ${pgDatabase}: ${(e as Error).message}`)
  }
}
// The ledger of a full run is ~100 MB of rows nobody reads: keep the logs and raw.json only.
for (const db of ["gateway.db", "gateway-durable.db", join("baseline", "gateway.db"), join("twin", "gateway.db")]) {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(join(runDir, `${db}${suffix}`), { force: true })
}
console.log(report)
process.exit(0)
