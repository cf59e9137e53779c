/**
 * Broadcast's cost as users feel it: two gateways of the same build in one run, one whose
 * workspace has three enabled destinations (otel-collector, webhook, langfuse, each a loopback
 * receiver) and one with none (`--floor`: none on both, the run's noise; `--baseline DIR`: the
 * three destinations on both, the first gateway run from the source tree DIR, with its own
 * node_modules: an A/B of a change to delivery in one run). The gateways are
 * pinned to core 0; this process (the load generator) and the receivers (scripts/bench-receivers.ts,
 * a process of their own) to core 1. Each round,
 * for each gateway in alternating order:
 * - JSON at 32 connections, closed loop: requests per second, CPU per request of the whole
 *   process (/proc/<pid>/stat) and of the thread that serves requests (/proc/<pid>/task/<pid>/stat:
 *   the main thread's id is the process's; the delivery Worker is another thread); and, on stderr,
 *   each thread's user and kernel CPU and minor page faults a request;
 * - open loop at a fixed rate, 70 % of the no-destination gateway's closed-loop rate in the same
 *   round (the same for both): p50 and p99 latency (from when each request was due).
 * After each phase of the broadcasting gateway the run waits until its receivers have every
 * generation it answered so far (or stop getting any for 3 s), so that no phase is measured
 * while the previous one's deliveries still run on the shared core, and the closed loop's CPU
 * counts until then: the delivery Worker runs at a low priority and may catch up after the load,
 * which is work deferred, not saved. Then every receiver must have seen every generation the
 * broadcasting gateway answered (warm-up included) once. Prints a table and each gateway's peak resident memory; does not write bench/results.
 *   bun scripts/bench-broadcast.ts [--rounds 6] [--seconds 5] [--floor | --baseline DIR]
 */
import { execSync } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type LoadResult, runLoad } from "./bench-load.js"
import { cpuOf, threadUsages, usageByName } from "./proc-usage.js"

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? Number(process.argv[at + 1]) : fallback
}
const rounds = arg("rounds", 6)
const seconds = arg("seconds", 5)
const floor = process.argv.includes("--floor")
const baselineAt = process.argv.indexOf("--baseline")
/** `--baseline DIR`: the first gateway ("none") runs DIR's sources, and both broadcast. */
const baseline = baselineAt >= 0 ? process.argv[baselineAt + 1] : undefined
if (baseline !== undefined && floor) throw new Error("--floor and --baseline: one or the other")
const root = join(import.meta.dir, "..")
const processCpu = (pid: number) => cpuOf(`/proc/${pid}/stat`)
const mainThreadCpu = (pid: number) => cpuOf(`/proc/${pid}/task/${pid}/stat`)

// This process (the load generator) and the receivers it starts on core 1; the gateways on core 0.
const pinned = (() => {
  try {
    execSync(`taskset -a -p -c 1 ${process.pid}`, { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

// The three receivers (an OTLP collector, a webhook, Langfuse), in a process of their own on this
// core (scripts/bench-receivers.ts): parsing their bodies here stalled the load generator.
const receiverProc = Bun.spawn([process.execPath, join(import.meta.dir, "bench-receivers.ts")], { stdout: "pipe", stderr: "inherit" })
const receiverPorts = await (async () => {
  const reader = receiverProc.stdout.getReader()
  let text = ""
  while (!text.includes("\n")) {
    const { value, done } = await reader.read()
    if (done) throw new Error("the receivers ended before listening")
    text += new TextDecoder().decode(value)
  }
  reader.releaseLock()
  return (JSON.parse(text.slice(0, text.indexOf("\n"))) as { ports: Array<number> }).ports
})()
interface Counts {
  readonly sizes: ReadonlyArray<number>
  readonly duplicates: ReadonlyArray<number>
}
const receiverCounts = (): Promise<Counts> => fetch(`http://127.0.0.1:${receiverPorts[0]}/counts`).then((r) => r.json() as Promise<Counts>)

const configFile = join(tmpdir(), `bench-broadcast-${process.pid}.json`)
const demo = JSON.parse(readFileSync(join(root, "config", "demo.json"), "utf8")) as Record<string, unknown>
await Bun.write(configFile, JSON.stringify({ ...demo, outbound: { allow_private_addresses: true } }))
const managementKey = `sk-bench-${crypto.randomUUID().replaceAll("-", "")}`

const freePort = () => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port as number
  probe.stop(true)
  return port
}

const start = async (name: string) => {
  const port = freePort()
  const dataDir = join(tmpdir(), `bench-broadcast-${name}-${process.pid}`)
  const command = [process.execPath, join(name === "none" && baseline !== undefined ? baseline : root, "src", "main.ts"), "serve"]
  const proc = Bun.spawn(pinned ? ["taskset", "-c", "0", ...command] : command, {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", GATEWAY_DATA_DIR: dataDir, GATEWAY_CONFIG: configFile, GATEWAY_MANAGEMENT_KEY: managementKey, GATEWAY_LOG_LEVEL: "none" },
    stdout: "ignore",
    stderr: "inherit",
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 200; i++) {
    if (await fetch(`${base}/v1/health`).then((r) => r.ok, () => false)) break
    await Bun.sleep(50)
  }
  return { name, port, base, proc, dataDir }
}

const api = (base: string, path: string, init: { method?: string; json?: unknown } = {}) =>
  fetch(`${base}${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${managementKey}`, "content-type": "application/json" },
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
  }).then((r) => r.json() as Promise<Record<string, unknown>>)

const none = await start("none")
const three = await start("three")
/** The gateways whose workspace broadcasts to the three receivers. */
const broadcasting = floor ? [] : baseline === undefined ? [three] : [none, three]
for (const g of broadcasting) {
  const workspace = ((await api(g.base, "/v1/key")) as { data: { workspace_id: string } }).data.workspace_id
  await api(g.base, `/v1/workspaces/${workspace}`, { method: "PATCH", json: { is_observability_broadcast_enabled: true } })
  const [r0, r1, r2] = receiverPorts.map((port) => `http://127.0.0.1:${port}`)
  await api(g.base, "/v1/observability/destinations", { method: "POST", json: { name: "collector", type: "otel-collector", config: { endpoint: r0 } } })
  await api(g.base, "/v1/observability/destinations", { method: "POST", json: { name: "hook", type: "webhook", config: { url: r1 } } })
  await api(g.base, "/v1/observability/destinations", {
    method: "POST",
    json: { name: "lf", type: "langfuse", config: { publicKey: "pk-lf-bench", secretKey: "sk-lf-bench", baseUrl: r2 } },
  })
}

const body = JSON.stringify({ model: "demo/free", input: "Say hello to the benchmark." })
const load = (g: typeof none, spec: { mode: "loop" | "rate"; durationMs: number; ratePerSec?: number; connections?: number }) =>
  runLoad({ host: "127.0.0.1", port: g.port, path: "/v1/responses", headers: { authorization: `Bearer ${managementKey}` }, body, connections: 32, ...spec })

interface Round {
  threadUs: number
  workerUs: number
  processUs: number
  rps: number
  p50: number
  p99: number
}
const samples = new Map<string, Array<Round>>([
  ["none", []],
  ["three", []],
])
/** Generations the broadcasting gateway answered (every phase, warm-up included). */
let answered = 0
let errors = 0
const tally = (g: typeof none, r: LoadResult) => {
  if (broadcasting.includes(g)) answered += r.requests
  errors += r.errors
  if (r.errors > 0) console.error(`${g.name}: ${r.errors} errors, e.g. ${r.errorSamples[0]}`)
}

/** Until the receivers have every generation answered so far, or stop getting any for 3 s; how long it took (ms). */
const drained = async (): Promise<number> => {
  if (floor) return 0
  const from = performance.now()
  let last = ""
  for (let i = 0, quiet = 0; i < 1_200 && quiet < 30; i++) {
    const { sizes } = await receiverCounts()
    if (sizes.every((n) => n >= answered)) break
    await Bun.sleep(100)
    const now = sizes.join("/")
    quiet = now === last ? quiet + 1 : 0
    last = now
  }
  return performance.now() - from
}

// Warm-up (counted at the receivers): the JIT, the pools, the first outbox batches.
for (const g of [none, three]) tally(g, await load(g, { mode: "loop", durationMs: 2_000 }))
await drained()

let rate = 0
const rates: Array<number> = []
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? [none, three] : [three, none]
  type Closed = Omit<Round, "p50" | "p99">
  const closed = new Map<string, Closed>()
  for (const g of order) {
    const [p0, t0, all0] = [processCpu(g.proc.pid), mainThreadCpu(g.proc.pid), threadUsages(g.proc.pid)]
    const r = await load(g, { mode: "loop", durationMs: seconds * 1000 })
    tally(g, r)
    const tLoad = mainThreadCpu(g.proc.pid)
    const catchUp = broadcasting.includes(g) ? await drained() : 0
    const [p1, t1, all1] = [processCpu(g.proc.pid), mainThreadCpu(g.proc.pid), threadUsages(g.proc.pid)]
    if (catchUp >= 100) console.error(`  ${g.name}: delivery caught up ${catchUp.toFixed(0)} ms after the closed loop (request thread ${((t1 - tLoad) / Math.max(1, r.requests)).toFixed(1)} µs / request meanwhile)`)
    const n = Math.max(1, r.requests)
    const byName = usageByName(g.proc.pid, all0, all1)
    // The delivery Worker's thread (a restarted one is a new thread of the same name, counted from 0).
    const worker = byName.get("Worker")
    const threads = [...byName]
      .filter(([, t]) => (t.user + t.kernel) / n >= 0.5)
      .sort((a, b) => b[1].user + b[1].kernel - a[1].user - a[1].kernel)
    const usage = threads.map(([name, t]) => `${name} ${(t.user / n).toFixed(1)}/${(t.kernel / n).toFixed(1)} (${(t.faults / n).toFixed(2)})`)
    console.error(`  ${g.name}: threads, user/kernel µs (minor faults) a request: ${usage.join(", ")}`)
    closed.set(g.name, { threadUs: (t1 - t0) / n, workerUs: worker === undefined ? 0 : (worker.user + worker.kernel) / n, processUs: (p1 - p0) / n, rps: r.rps })
  }
  // 70 % of what the no-destination gateway just answered: the rate follows the machine (shared, its
  // capacity moves between rounds), both gateways get the same one in a round.
  rate = Math.round(0.7 * (closed.get("none")?.rps ?? 1000))
  rates.push(rate)
  for (const g of order) {
    // Enough sockets that a busy moment queues requests at the server, not here.
    const r = await load(g, { mode: "rate", durationMs: seconds * 1000, ratePerSec: rate, connections: 64 })
    tally(g, r)
    if (broadcasting.includes(g)) {
      const catchUp = await drained()
      if (catchUp >= 100) console.error(`  ${g.name}: delivery caught up ${catchUp.toFixed(0)} ms after the open loop`)
    }
    const c = closed.get(g.name) as Closed
    samples.get(g.name)?.push({ ...c, p50: r.latency.p50, p99: r.latency.p99 })
  }
  const line = (name: string) => {
    const s = samples.get(name)?.at(-1) as Round
    return `${name} @${rate}/s thread ${s.threadUs.toFixed(1)} µs, Worker ${s.workerUs.toFixed(1)} µs, process ${s.processUs.toFixed(1)} µs, ${s.rps.toFixed(0)}/s, p50 ${s.p50.toFixed(2)} p99 ${s.p99.toFixed(2)} ms`
  }
  console.error(`round ${round}: ${line("none")} | ${line("three")}`)
}

await drained()

const median = (xs: Array<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}
const med = (name: string, key: keyof Round) => median((samples.get(name) ?? []).map((s) => s[key]))
/** The median of the rounds' own ratios (three over none in the same round): steadier on a shared machine. */
const paired = (key: keyof Round) => {
  const [a, b] = [samples.get("none") ?? [], samples.get("three") ?? []]
  return median(a.map((s, i) => ((b[i] as Round)[key] as number) / (s[key] as number)))
}
const row = (label: string, key: keyof Round, digits: number) => {
  const [a, b] = [med("none", key), med("three", key)]
  console.log(`| ${label} | ${a.toFixed(digits)} | ${b.toFixed(digits)} | ${(b / a).toFixed(3)}× | ${paired(key).toFixed(3)}× |`)
}
console.log(
  `${rounds} rounds of ${seconds} s, ${pinned ? "gateways on core 0, load and receivers on core 1" : "not pinned (no taskset)"}; ${floor ? "FLOOR: no destinations on either" : baseline === undefined ? "three destinations against none" : `three destinations on both; "none" is the baseline ${baseline}, "three" this tree`}; open loop at ${rates.join(", ")}/s`,
)
console.log("| median of rounds | none | three | ratio | paired |")
console.log("|---|---|---|---|---|")
row("request thread CPU µs / request (c=32, until delivered)", "threadUs", 1)
row("delivery Worker thread CPU µs / request (c=32, until delivered)", "workerUs", 1)
row("process CPU µs / request (c=32, until delivered)", "processUs", 1)
row("requests / s (c=32)", "rps", 0)
row("p50 ms at 70 % (open loop)", "p50", 2)
row("p99 ms at 70 % (open loop)", "p99", 2)
if (!floor) {
  const { sizes, duplicates } = await receiverCounts()
  console.log(`receivers saw ${sizes.join(" / ")} of ${answered} generations (warm-up included), duplicates ${duplicates.join(" / ")}; ${errors} errors`)
}

const peakMb = (pid: number) => Number(/VmHWM:\s*(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
console.log(`peak resident memory (VmHWM): none ${peakMb(none.proc.pid).toFixed(0)} MB, three ${peakMb(three.proc.pid).toFixed(0)} MB`)

for (const g of [none, three]) {
  g.proc.kill("SIGTERM")
  await g.proc.exited
  rmSync(g.dataDir, { recursive: true, force: true })
}
receiverProc.kill("SIGTERM")
await receiverProc.exited
rmSync(configFile, { force: true })
