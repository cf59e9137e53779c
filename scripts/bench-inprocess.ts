#!/usr/bin/env bun
/**
 * An in-process A/B of two source trees of the gateway: both servers run in this one process (on
 * loopback ports, the scripted `fake` provider, so no upstream process), and are loaded in
 * alternating blocks of requests by this process's own fetch client; a block's CPU is this
 * process's (`process.cpuUsage`, client included, the same for both). A full collection before each
 * block keeps one block's garbage off the next's bill, and which tree goes first alternates.
 *
 * What it is for: telling a change of 1-2 % in the request path's CPU apart, which the compiled
 * bench (`scripts/bench --baseline`) cannot on a noisy machine. Both trees share the engine, its
 * spells and its heap, so the median of the pairs' ratios is steady: the same tree against itself
 * read 0.983 to 1.003 (four runs of 30 pairs; single pairs 0.86-1.09).
 *
 *   bun scripts/bench-inprocess.ts OLD_TREE NEW_TREE [--stream] [--pairs 30] [--block 5000] [--connections 32]
 *                                  [--log-level info] >/dev/null
 *
 * A tree is a checkout with `node_modules` (e.g. `git archive REV | tar -x -C DIR` and a symlink
 * to this one's). It prints each tree's median CPU per request and the median of the per-pair
 * ratios (new over old).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const args = process.argv.slice(2)
/** The value after `--name`, if given. */
const option = (name: string): string | undefined => {
  const at = args.indexOf(`--${name}`)
  return at === -1 ? undefined : args[at + 1]
}
const flag = (name: string, fallback: number): number => Number(option(name) ?? fallback)
const valued = new Set(["--pairs", "--block", "--connections", "--log-level"])
const [oldTree, newTree] = args.filter((a, i) => !a.startsWith("--") && !valued.has(args[i - 1] ?? ""))
if (oldTree === undefined || newTree === undefined) {
  console.error("usage: bun scripts/bench-inprocess.ts OLD_TREE NEW_TREE [--stream] [--pairs 30] [--block 5000] [--connections 32] [--log-level info] >/dev/null")
  process.exit(2)
}
const stream = args.includes("--stream")
const pairs = flag("pairs", 30)
const blockSize = flag("block", 5000)
const connections = flag("connections", 32)
/** As the compiled bench runs them: a JSON line per request (this process's stdout; send it to /dev/null). */
const logLevel = option("log-level") ?? "info"

const KEY = "sk-bench-inprocess"
const catalog = {
  providers: [{ id: "fake", kind: "fake" }],
  models: [
    {
      id: "bench/fake",
      context_length: 128000,
      endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0.15, completion: 0.6 } }],
    },
  ],
}
const scratch = mkdtempSync(join(tmpdir(), "bench-inprocess-"))

interface Started {
  readonly server: { readonly port: number }
  /** Settlements and queued generation records made durable. */
  readonly drain: () => Promise<void>
}

/** A tree's server on a free port, its data in a folder of its own (the settings are read from the environment as it starts). */
const start = async (name: string, tree: string): Promise<Started> => {
  const dir = join(scratch, name)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "config.json"), JSON.stringify(catalog))
  Object.assign(process.env, {
    PORT: "0",
    HOST: "127.0.0.1",
    GATEWAY_DATA_DIR: dir,
    DATABASE_URL: join(dir, "gateway.db"),
    GATEWAY_CONFIG: join(dir, "config.json"),
    GATEWAY_MANAGEMENT_KEY: KEY,
    GATEWAY_LOG_LEVEL: logLevel,
  })
  const root = resolve(tree)
  const { startServer } = (await import(join(root, "src/http/server.ts"))) as { startServer: (config: unknown) => Promise<Started> }
  const { GatewayConfig } = (await import(join(root, "src/config/Config.ts"))) as { GatewayConfig: { fromEnv: unknown } }
  return startServer(GatewayConfig.fromEnv)
}

const oldTarget = await start("old", oldTree)
const newTarget = await start("new", newTree)
const body = JSON.stringify({ model: "bench/fake", input: "Say hello to the benchmark, in a few more words than that.", ...(stream ? { stream: true } : {}) })
const init = { method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" }, body }

/**
 * `n` requests over `connections` at a time; the CPU per request, in µs, its ledger commits
 * included (drained before the block ends, so none falls into the next tree's block).
 */
const block = async (target: Started, n: number): Promise<number> => {
  Bun.gc(true)
  let left = n
  const url = `http://127.0.0.1:${target.server.port}/v1/responses`
  const worker = async () => {
    while (left-- > 0) {
      const res = await fetch(url, init)
      const text = await res.text()
      if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 200)}`)
    }
  }
  const before = process.cpuUsage()
  await Promise.all(Array.from({ length: connections }, worker))
  await target.drain()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / n
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

// Warm-up: both trees' code compiled by the JIT before any block counts.
for (let i = 0; i < 2; i++) {
  await block(oldTarget, blockSize * 2)
  await block(newTarget, blockSize * 2)
}
const olds: Array<number> = []
const news: Array<number> = []
for (let pair = 0; pair < pairs; pair++) {
  if (pair % 2 === 0) {
    olds.push(await block(oldTarget, blockSize))
    news.push(await block(newTarget, blockSize))
  } else {
    news.push(await block(newTarget, blockSize))
    olds.push(await block(oldTarget, blockSize))
  }
}
const ratios = olds.map((old, i) => (news[i] as number) / old)
// On stderr: stdout has the request lines.
console.error(
  `${stream ? "streams" : "JSON"}, ${pairs} pairs of ${blockSize} requests at ${connections} connections (CPU of this process per request, client included):\n` +
    `  old ${oldTree}: ${median(olds).toFixed(2)} µs\n` +
    `  new ${newTree}: ${median(news).toFixed(2)} µs\n` +
    `  new / old, median of the pairs: ${median(ratios).toFixed(4)} (pairs ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)})`,
)
rmSync(scratch, { recursive: true, force: true })
process.exit(0)
