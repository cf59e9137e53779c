/**
 * Broadcast's cost: JSON c=32 against two gateways in one run, one whose workspace
 * has three enabled destinations (otel-collector, webhook, langfuse, each a loopback receiver)
 * and one with none; interleaved rounds, CPU per request of each gateway process, and whether
 * the receivers saw every generation of the broadcasting one. Prints a small table; does not
 * write bench/results. `bun scripts/bench-broadcast.ts [--rounds 3] [--seconds 5]`
 */
import { readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { execSync } from "node:child_process"
import { runLoad } from "./bench-load.js"

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 ? Number(process.argv[at + 1]) : fallback
}
const rounds = arg("rounds", 3)
const seconds = arg("seconds", 5)
const root = join(import.meta.dir, "..")
const clockTicks = Number(execSync("getconf CLK_TCK").toString().trim()) || 100
const cpuMicros = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks
}

// Three receivers: each counts the generations (root spans) it is sent.
const seen = [new Set<string>(), new Set<string>(), new Set<string>()]
const receivers = seen.map((ids) =>
  Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const body = (await req.json()) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ attributes: Array<{ key: string; value: { stringValue?: string } }> }> }> }> }
      for (const r of body.resourceSpans) {
        for (const s of r.scopeSpans) {
          for (const span of s.spans) {
            if (span.attributes.some((a) => a.key === "gateway.attempt.index")) continue
            const id = span.attributes.find((a) => a.key === "gen_ai.response.id")?.value.stringValue
            if (id !== undefined) ids.add(id)
          }
        }
      }
      return new Response("{}")
    },
  }),
)

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
  const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
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
const workspace = ((await api(three.base, "/v1/key")) as { data: { workspace_id: string } }).data.workspace_id
await api(three.base, `/v1/workspaces/${workspace}`, { method: "PATCH", json: { is_observability_broadcast_enabled: true } })
const [r0, r1, r2] = receivers.map((r) => `http://127.0.0.1:${r.port}`)
await api(three.base, "/v1/observability/destinations", { method: "POST", json: { name: "collector", type: "otel-collector", config: { endpoint: r0 } } })
await api(three.base, "/v1/observability/destinations", { method: "POST", json: { name: "hook", type: "webhook", config: { url: r1 } } })
await api(three.base, "/v1/observability/destinations", { method: "POST", json: { name: "lf", type: "langfuse", config: { publicKey: "pk-lf-bench", secretKey: "sk-lf-bench", baseUrl: r2 } } })

const body = JSON.stringify({ model: "demo/free", input: "Say hello to the benchmark." })
const samples = new Map<string, Array<{ cpuUs: number; requests: number }>>([
  ["none", []],
  ["three", []],
])
let sent = 0
// The whole run too: delivery the worker defers past a round (and the drain at the end) counts there.
const runStart = new Map([none, three].map((g) => [g.name, cpuMicros(g.proc.pid)]))
const runRequests = new Map<string, number>([["none", 0], ["three", 0]])
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? [none, three] : [three, none]
  for (const g of order) {
    const before = cpuMicros(g.proc.pid)
    const result = await runLoad({ host: "127.0.0.1", port: g.port, path: "/v1/responses", headers: { authorization: `Bearer ${managementKey}` }, body, connections: 32, mode: "loop", durationMs: seconds * 1000, warmupMs: round === 0 ? 1000 : 0 })
    samples.get(g.name)?.push({ cpuUs: cpuMicros(g.proc.pid) - before, requests: result.requests })
    runRequests.set(g.name, (runRequests.get(g.name) ?? 0) + result.requests)
    if (g === three) sent += result.requests
    console.error(`round ${round} ${g.name}: ${result.requests} req, ${result.rps.toFixed(0)}/s, ${result.errors} errors`)
  }
}
// The broadcasting gateway delivers within a few seconds of the last request. `sent` leaves out
// the warm-up's requests: wait until the receivers agree and nothing more arrives for a second.
let last = ""
for (let i = 0, quiet = 0; i < 300 && quiet < 10; i++) {
  await Bun.sleep(100)
  const now = seen.map((s) => s.size).join("/")
  quiet = now === last && seen.every((s) => s.size === seen[0]?.size && s.size >= sent) ? quiet + 1 : 0
  last = now
}

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN
const perRequest = (name: string) => median((samples.get(name) ?? []).map((s) => s.cpuUs / Math.max(1, s.requests)))
const a = perRequest("none")
const b = perRequest("three")
console.log("| gateway | CPU µs per request (median) |")
console.log("|---|---|")
console.log(`| no destinations | ${a.toFixed(1)} |`)
console.log(`| three destinations | ${b.toFixed(1)} (${(((b - a) / a) * 100).toFixed(1)} %) |`)
const whole = (g: typeof none) => (cpuMicros(g.proc.pid) - (runStart.get(g.name) ?? 0)) / Math.max(1, runRequests.get(g.name) ?? 0)
const [wa, wb] = [whole(none), whole(three)]
console.log(`| whole run, drain included | ${wa.toFixed(1)} vs ${wb.toFixed(1)} (${(((wb - wa) / wa) * 100).toFixed(1)} %) |`)
console.log(`receivers saw ${seen.map((s) => s.size).join(" / ")} of ${sent} generations (warm-up requests included in what they saw)`)

for (const g of [none, three]) {
  g.proc.kill("SIGTERM")
  await g.proc.exited
  rmSync(g.dataDir, { recursive: true, force: true })
}
for (const r of receivers) r.stop(true)
rmSync(configFile, { force: true })
