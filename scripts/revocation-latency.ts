#!/usr/bin/env bun
/**
 * Cross-process key revocation (docs/operations.md), measured: two gateway processes on one Postgres
 * database; a key is used on B (so B caches it), deleted through A, and B is polled until it
 * answers 401. Prints the time from sending the DELETE to B's first 401, over N trials.
 *
 *   bun scripts/revocation-latency.ts postgres://postgres@127.0.0.1:5432/postgres [--trials 30]
 *
 * A database of its own is created on that server and dropped after.
 */
import { SQL } from "bun"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const base = Bun.argv[2]
if (base === undefined || !base.startsWith("postgres")) throw new Error("usage: bun scripts/revocation-latency.ts postgres://… [--trials 30]")
const at = Bun.argv.indexOf("--trials")
const trials = at === -1 ? 30 : Number(Bun.argv[at + 1])
const root = join(import.meta.dir, "..")
const dir = mkdtempSync(join(tmpdir(), "gw-revocation-"))
const name = `gw_revocation_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
const admin = new SQL(base)
await admin.unsafe(`CREATE DATABASE ${name}`)
const url = new URL(base)
url.pathname = `/${name}`
const KEY = `sk-revocation-${crypto.randomUUID().replaceAll("-", "")}`

const start = async (label: string) => {
  const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
    cwd: dir,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: url.toString(), GATEWAY_MANAGEMENT_KEY: KEY, GATEWAY_LOG_LEVEL: "warn" },
    stdout: "pipe",
    stderr: "inherit",
  })
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
  let out = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`${label} exited before listening: ${out}`)
    out += new TextDecoder().decode(value)
    const match = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(out)
    if (match !== null) {
      void (async () => {
        while (!(await reader.read()).done) {}
      })()
      return { proc, url: match[1] }
    }
  }
}

const call = (server: string, key: string, path: string, method = "GET", json?: unknown) =>
  fetch(`${server}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: json === undefined ? undefined : JSON.stringify(json),
  })

const a = await start("A")
const b = await start("B")
const samples: Array<number> = []
/** When A had answered the DELETE (the notice is sent before it answers). */
const answered: Array<number> = []
try {
  // Both listeners connect in the background at start.
  await Bun.sleep(500)
  for (let i = 0; i < trials; i++) {
    const created = (await (await call(a.url, KEY, "/v1/keys", "POST", { name: `trial ${i}` })).json()) as { key: string; data: { hash: string } }
    const used = await call(b.url, created.key, "/v1/key")
    await used.arrayBuffer()
    if (used.status !== 200) throw new Error(`trial ${i}: the new key answered ${used.status} on B`)
    const t0 = performance.now()
    const deleted = call(a.url, KEY, `/v1/keys/${created.data.hash}`, "DELETE").then(async (res) => {
      await res.arrayBuffer()
      answered.push(performance.now() - t0)
    })
    for (;;) {
      const res = await call(b.url, created.key, "/v1/key")
      await res.arrayBuffer()
      if (res.status === 401) break
      if (performance.now() - t0 > 10_000) throw new Error(`trial ${i}: B still accepts the key after 10 s`)
    }
    samples.push(performance.now() - t0)
    await deleted
  }
} finally {
  a.proc.kill("SIGTERM")
  b.proc.kill("SIGTERM")
  await Promise.all([a.proc.exited, b.proc.exited])
  await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.close()
  rmSync(dir, { recursive: true, force: true })
}

const pct = (values: Array<number>, p: number) => {
  const sorted = [...values].sort((x, y) => x - y)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)].toFixed(1)
}
console.log("| from sending the DELETE to A until | trials | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|")
console.log(`| B's first 401 for the key | ${samples.length} | ${pct(samples, 50)} | ${pct(samples, 99)} | ${pct(samples, 100)} |`)
console.log(`| A's answer to the DELETE | ${answered.length} | ${pct(answered, 50)} | ${pct(answered, 99)} | ${pct(answered, 100)} |`)
console.log("B is polled back to back (GET /v1/key with the deleted key).")
