/**
 * The ledger spool on a SQLite file whose write path fails (docs/operations.md, "When the database
 * goes away"): another connection holds the file's write lock past `ledger.commit_timeout_ms` (as
 * a full or read-only disk, the ledger cannot commit; reads go on). Answers go on and their records
 * wait in the spool, committed once the lock is gone; past the spool's bound new requests get 503
 * with Retry-After; with durable answers and the spool's file on a full disk (`/dev/full`) an answer
 * ends in the format's error instead of a complete 200; a process killed while its records are
 * spooled commits them when it starts again, before it serves. Each runs on a SQLite file of its
 * own, in the SQLite and the Postgres suite runs alike.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Layer, Option, Redacted } from "effect"
import { metricsAuth, TEST_METRICS_TOKEN } from "../support/gateway.js"
import { demoCatalog, GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { KeyCacheOptions } from "../../src/services/KeyStore.js"
import { untilListening } from "../support/spawned.js"

const ASK = { model: "demo/echo", input: "spooled", provider: { order: ["fake"] } }

const until = async (what: string, check: () => Promise<boolean> | boolean, ms = 20_000) => {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await Bun.sleep(20)
  }
}

interface Setup {
  readonly dir: string
  readonly file: string
  readonly server: RunningServer
  readonly secret: string
}

const setups: Array<Setup> = []
afterAll(async () => {
  for (const s of setups) {
    await s.server.stop().catch(() => undefined)
    rmSync(s.dir, { recursive: true, force: true })
  }
})

/** A gateway on a SQLite file of its own, an unlimited key read once (cached for the test's length). */
const setUp = async (overrides: Partial<Settings>, prepare?: (dir: string, instanceId: string) => void): Promise<Setup> => {
  const dir = mkdtempSync(join(tmpdir(), "gw-sqlite-spool-"))
  const file = join(dir, "gateway.db")
  const instanceId = `spool-${crypto.randomUUID().slice(0, 8)}`
  prepare?.(dir, instanceId)
  const config = GatewayConfig.layer(testSettings({ databaseUrl: file, dataDir: dir, instanceId, commitTimeoutMs: 300, metricsToken: Redacted.make(TEST_METRICS_TOKEN), ...overrides }))
  // The key stays cached: what is tested is the ledger's write path, not the key's read.
  const server = await startServer(Layer.merge(config, Layer.succeed(KeyCacheOptions, { ttlMs: 600_000 })) as Layer.Layer<GatewayConfig>)
  const admin = Option.getOrThrow(server.createdSecret)
  const res = await fetch(`${server.url}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "spooled" }),
  })
  const secret = ((await res.json()) as { key: string }).key
  const setup = { dir, file, server, secret }
  setups.push(setup)
  const first = await ask(setup, "/v1/responses", ASK)
  expect(first.status).toBe(200)
  return setup
}

const ask = async (s: Setup, path: string, body: unknown) => {
  const res = await fetch(`${s.server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.secret}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  })
  return { status: res.status, id: res.headers.get("x-generation-id"), retryAfter: res.headers.get("retry-after"), text: await res.text() }
}

/** Another connection takes the file's write lock and keeps it until `release`. */
const lockWrites = (file: string) => {
  const db = new Database(file)
  db.run("BEGIN IMMEDIATE")
  return () => {
    db.run("COMMIT")
    db.close()
  }
}

const recordedIds = (file: string): Set<string> => {
  const db = new Database(file, { readonly: true })
  try {
    return new Set(db.query<{ id: string }, []>("SELECT id FROM generations").all().map((r) => r.id))
  } finally {
    db.close()
  }
}

const spoolOf = async (s: Setup) => {
  const res = await fetch(`${s.server.url}/v1/ready`)
  if (res.status !== 200) return { status: res.status, generations: -1 }
  return { status: 200, generations: ((await res.json()) as { spool: { generations: number } }).spool.generations }
}

describe("a SQLite file that cannot take writes", () => {
  test(
    "answers go on and their records wait in the spool, committed once when the file takes writes again; past the spool's bound new requests get 503 with Retry-After",
    async () => {
      const s = await setUp({ spoolMaxGenerations: 40 })
      const release = lockWrites(s.file)
      const answers: Array<Awaited<ReturnType<typeof ask>>> = []
      try {
        for (let round = 0; round < 6; round++) {
          answers.push(...(await Promise.all(Array.from({ length: 16 }, (_, i) => ask(s, "/v1/responses", { ...ASK, stream: i % 2 === 1 })))))
          // The round's records meet the lock (the commit timeout), then reach the spool's file (with
          // the first answer's, when its window had not closed before the lock).
          await until("the round spooled", async () => {
            const m = await (await fetch(`${s.server.url}/metrics`, { headers: metricsAuth })).text()
            return Number(/gateway_ledger_spool_generations (\d+)/.exec(m)?.[1]) >= answers.filter((a) => a.status === 200).length
          })
        }
        const ok = answers.filter((a) => a.status === 200)
        const refused = answers.filter((a) => a.status === 503)
        // Answered until the spool held 40 (the round that reached it is answered whole), then refused.
        expect(ok.length).toBe(48)
        expect(refused.length).toBeGreaterThan(0)
        expect(refused.length).toBe(answers.length - 48)
        for (const r of refused) {
          expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1)
          expect(JSON.parse(r.text)).toMatchObject({ error: { code: 503 } })
        }
        const ready = await fetch(`${s.server.url}/v1/ready`)
        expect(ready.status).toBe(503)
        // What waits is in the refusal too (an outage is when operators need it).
        const readyBody = (await ready.json()) as { error: { code: number; metadata?: { spool?: { generations: number; bytes: number } } } }
        expect(readyBody.error.code).toBe(503)
        expect(readyBody.error.metadata?.spool?.generations).toBeGreaterThanOrEqual(ok.length)
        expect(readyBody.error.metadata?.spool?.bytes).toBeGreaterThan(0)
        const metrics = await (await fetch(`${s.server.url}/metrics`, { headers: metricsAuth })).text()
        expect(metrics).toContain("gateway_ledger_spool_full 1")
        // The records are on disk, in the spool's file under the data folder.
        const spoolFile = join(s.dir, readdirSpool(s.dir))
        expect(readFileSync(spoolFile, "utf8").split("\n").filter((l) => l.startsWith('{"s":')).length).toBeGreaterThan(0)
      } finally {
        release()
      }
      await until("the spool committed", async () => (await spoolOf(s)).generations === 0)
      const recorded = recordedIds(s.file)
      const ids = answers.filter((a) => a.status === 200).map((a) => a.id as string)
      expect(ids.filter((id) => !recorded.has(id))).toEqual([])
      // Each once: the first answer's record and the 48 spooled ones, nothing else.
      expect(recorded.size).toBe(ids.length + 1)
      expect(readdirSpool(s.dir)).toBe("")
      // Under its bound again: admitted.
      expect((await ask(s, "/v1/responses", ASK)).status).toBe(200)
    },
    40_000,
  )

  test.skipIf(!existsSync("/dev/full"))(
    "with durable answers and the spool's file on a full disk, an answer whose record can be kept nowhere ends in the format's error, never a complete 200",
    async () => {
      const s = await setUp({ durableAnswers: true }, (dir, instanceId) => symlinkSync("/dev/full", join(dir, `ledger-spool.${instanceId}.jsonl`)))
      const release = lockWrites(s.file)
      let answers: Array<Awaited<ReturnType<typeof ask>>>
      try {
        answers = await Promise.all([
          ask(s, "/v1/responses", ASK),
          ask(s, "/v1/responses", { ...ASK, stream: true }),
          ask(s, "/v1/chat/completions", { model: "demo/echo", messages: [{ role: "user", content: "hi" }], provider: { order: ["fake"] } }),
          ask(s, "/v1/chat/completions", { model: "demo/echo", messages: [{ role: "user", content: "hi" }], stream: true, provider: { order: ["fake"] } }),
          ask(s, "/v1/messages", { model: "demo/echo", max_tokens: 16, messages: [{ role: "user", content: "hi" }] }),
          ask(s, "/v1/messages", { model: "demo/echo", max_tokens: 16, messages: [{ role: "user", content: "hi" }], stream: true }),
        ])
      } finally {
        release()
      }
      const [json, stream, chat, chatStream, messages, messagesStream] = answers
      // JSON answers: 503 with Retry-After in the format's envelope.
      for (const a of [json, chat]) {
        expect(a?.status).toBe(503)
        expect(Number(a?.retryAfter)).toBeGreaterThanOrEqual(1)
        expect(JSON.parse(a?.text ?? "")).toMatchObject({ error: { code: 503 } })
      }
      expect(messages?.status).toBe(503)
      expect(JSON.parse(messages?.text ?? "")).toMatchObject({ type: "error" })
      // Streams (the head went out first): the format's failure event instead of the terminal events.
      expect(stream?.text).toContain('"type":"error"')
      expect(stream?.text).not.toContain("response.completed")
      expect(chatStream?.text).toContain('"finish_reason":"error"')
      expect(chatStream?.text).not.toContain("[DONE]")
      expect(messagesStream?.text).toContain("event: error")
      expect(messagesStream?.text).not.toContain("message_stop")
      const metrics = await (await fetch(`${s.server.url}/metrics`, { headers: metricsAuth })).text()
      expect(Number(/gateway_ledger_failed_rows_total (\d+)/.exec(metrics)?.[1])).toBe(6)
    },
    30_000,
  )
})

/** The spool file's name in `dir` ("" when there is none). */
const readdirSpool = (dir: string): string => readdirSync(dir).find((f) => f.startsWith("ledger-spool.")) ?? ""

describe("a process killed while its records are spooled (durable answers)", () => {
  const root = join(import.meta.dir, "..", "..")
  const running: Array<ReturnType<typeof Bun.spawn>> = []
  const dir = mkdtempSync(join(tmpdir(), "gw-sqlite-kill-"))
  afterAll(async () => {
    for (const p of running) p.kill("SIGKILL")
    await Promise.all(running.map((p) => p.exited))
    rmSync(dir, { recursive: true, force: true })
  })
  const KEY = `sk-test-spool-${crypto.randomUUID().replaceAll("-", "")}`
  const file = join(dir, "gateway.db")
  const start = async () => {
    const config = join(dir, "config.json")
    writeFileSync(config, JSON.stringify({ ...demoCatalog, instance_id: "spool-kill", ledger: { durable_answers: true, commit_timeout_ms: 300 } }))
    const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
      cwd: dir,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: file, GATEWAY_CONFIG: config, GATEWAY_MANAGEMENT_KEY: KEY, GATEWAY_LOG_LEVEL: "none" },
      stdout: "pipe",
      stderr: "inherit",
    })
    running.push(proc)
    return { proc, url: await untilListening(proc) }
  }
  const answer = async (url: string, i: number) => {
    const res = await fetch(`${url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ ...ASK, stream: i % 2 === 1 }),
    })
    const text = await res.text()
    return { status: res.status, id: res.headers.get("x-generation-id") ?? "", complete: text.includes("completed") }
  }

  test(
    "started again, it commits its spool before serving: every answer it gave is recorded",
    async () => {
      const first = await start()
      expect((await answer(first.url, 0)).status).toBe(200)
      const release = lockWrites(file)
      let answered: Array<{ status: number; id: string; complete: boolean }>
      try {
        answered = await Promise.all(Array.from({ length: 20 }, (_, i) => answer(first.url, i)))
        first.proc.kill("SIGKILL")
        await first.proc.exited
      } finally {
        release()
      }
      // Durable answers: each was complete only once its record was in the spool's file.
      expect(answered.every((a) => a.status === 200 && a.complete)).toBe(true)
      const spoolFile = join(dir, "ledger-spool.spool-kill.jsonl")
      expect(statSync(spoolFile).size).toBeGreaterThan(0)
      const before = recordedIds(file)
      expect(answered.filter((a) => before.has(a.id))).toEqual([])
      const second = await start()
      // Listening means the spool was committed first.
      const recorded = recordedIds(file)
      expect(answered.map((a) => a.id).filter((id) => !recorded.has(id))).toEqual([])
      expect(existsSync(spoolFile)).toBe(false)
      expect((await answer(second.url, 0)).status).toBe(200)
    },
    40_000,
  )
})
