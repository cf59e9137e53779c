/**
 * The ledger spool's file (src/store/spool.ts): batches appended in order and fsync'd, a commit mark
 * after the batches committed, a line a crash cut short skipped, the file removed once empty; and a
 * gateway started with a spool file commits each batch exactly once, skipping one whose rows the
 * database has already (its first commit did reach it).
 */
import { afterAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Layer, ManagedRuntime, Option } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import type { GenerationEntry } from "../../src/domain/generations.js"
import { startServer } from "../../src/http/server.js"
import { GenerationStore, GenerationWriterOptions } from "../../src/services/GenerationStore.js"
import { LedgerHooks } from "../../src/services/LedgerHooks.js"
import { StoreLive } from "../../src/store/Store.js"
import { openSpool, readSpoolFile } from "../../src/store/spool.js"
import { generationEntry } from "../support/generations.js"

const dirs: Array<string> = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "gw-spool-"))
  dirs.push(d)
  return d
}

const entry = (id: string, keyHash: string, userId: string, workspaceId: string, totalCost: number): GenerationEntry => ({
  id,
  keyHash,
  userId,
  workspaceId,
  model: "demo/echo",
  providerName: "fake",
  upstreamModel: "echo",
  createdAt: new Date().toISOString(),
  streamed: false,
  cancelled: false,
  finishReason: "stop",
  sessionId: null,
  inputTokens: 1,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 2,
  reasoningTokens: 0,
  totalCost,
  isByok: false,
  generationTimeMs: 3,
  latencyMs: 1,
  status: "completed",
})

describe("the spool's file", () => {
  test("batches are read back in order after the last commit mark; a line cut short is skipped; the file goes once empty", async () => {
    const path = join(tempDir(), "ledger-spool.test.jsonl")
    const spool = openSpool(path, { maxGenerations: 3, maxBytes: 1 << 30 })
    expect(existsSync(path)).toBe(false)
    await Promise.all([
      spool.append([{ entry: entry("g1", "k", "u", "w", 1) }], [{ table: "t", columns: ["a"], rows: [{ a: 1 }] }]),
      spool.append([{ entry: entry("g2", "k", "u", "w", 2) }, { entry: entry("g3", "k", "u", "w", 3) }], []),
    ])
    expect(spool.generations()).toBe(3)
    expect(spool.full()).toBe(true)
    await spool.committed(1)
    expect(spool.full()).toBe(false)
    await spool.close()
    // A crash in the middle of an append: the line is cut short.
    appendFileSync(path, '{"s":3,"i":[{"entry":{"id":"g4"')
    const read = readSpoolFile(path)
    expect(read.map((b) => b.items.map((i) => i.entry.id))).toEqual([["g2", "g3"]])
    const again = openSpool(path, { maxGenerations: 10, maxBytes: 1 << 30 })
    expect(again.generations()).toBe(2)
    await again.committed(1)
    await again.close()
    expect(existsSync(path)).toBe(false)
  })

  test("a settlement keeps its budget slice by id; the broadcast's live references are left out", async () => {
    const path = join(tempDir(), "ledger-spool.slice.jsonl")
    const spool = openSpool(path, { maxGenerations: 10, maxBytes: 1 << 30 })
    let released = 0
    const withBroadcast = { ...entry("g1", "k", "u", "w", 1), broadcast: { input: () => [] } } as unknown as GenerationEntry
    await spool.append(
      [
        {
          entry: withBroadcast,
          settlement: { id: "slice-1", keyHash: "k", userId: "u", amountNano: 5, creditsNano: 0, windowStart: "all", actualUsd: 1, slice: { id: "slice-1", release: () => released++ } },
        },
      ],
      [],
    )
    await spool.close()
    const text = readFileSync(path, "utf8")
    expect(text).not.toContain("broadcast")
    const [batch] = readSpoolFile(path)
    expect(batch?.items[0]?.settlement?.slice?.id).toBe("slice-1")
    batch?.items[0]?.settlement?.slice?.release(batch.items[0].settlement)
    expect(released).toBe(0)
  })
})

describe("a gateway started with a spool file", () => {
  test("commits every batch once before serving, skipping a batch whose rows the database has already", async () => {
    const dir = tempDir()
    const file = join(dir, "gateway.db")
    const instanceId = "spool-replay"
    const settings = testSettings({ databaseUrl: file, dataDir: dir, instanceId })
    const first = await startServer(GatewayConfig.layer(settings))
    const admin = Option.getOrThrow(first.createdSecret)
    const res = await fetch(`${first.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "replayed" }),
    })
    const created = (await res.json()) as { key: string; data: { hash: string } }
    const answer = await fetch(`${first.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${created.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "demo/echo", input: "hi", provider: { order: ["fake"] } }),
    })
    await answer.arrayBuffer()
    const committedId = answer.headers.get("x-generation-id") ?? ""
    await first.stop()
    const db = new Database(file)
    const row = db.query<{ user_id: string; workspace_id: string; total_cost_nano: number }, [string]>(
      "SELECT user_id, workspace_id, total_cost_nano FROM generations WHERE id = ?",
    ).get(committedId)
    expect(row).not.toBeNull()
    const spendBefore = db.query<{ n: number }, []>("SELECT COALESCE(SUM(amount_nano), 0) AS n FROM spend_daily").get()?.n ?? 0
    db.close()
    // The spool as a process killed after the first commit went through (unbeknown to it) would leave it:
    // that batch again (a different cost, to tell them apart), then one the database never had.
    const spool = openSpool(join(dir, `ledger-spool.${instanceId}.jsonl`), { maxGenerations: 100, maxBytes: 1 << 30 })
    const hash = created.data.hash
    await spool.append([{ entry: entry(committedId, hash, row!.user_id, row!.workspace_id, 7) }], [])
    await spool.append([{ entry: entry("gen-spooled-only", hash, row!.user_id, row!.workspace_id, 2) }], [])
    await spool.close()

    const second = await startServer(GatewayConfig.layer(settings))
    try {
      const after = new Database(file, { readonly: true })
      const rows = after.query<{ id: string; total_cost_nano: number }, []>("SELECT id, total_cost_nano FROM generations ORDER BY id").all()
      const spend = after.query<{ n: number }, []>("SELECT COALESCE(SUM(amount_nano), 0) AS n FROM spend_daily").get()?.n ?? 0
      after.close()
      // Serving means the spool was committed: the new record once, the committed one not again.
      expect(rows.map((r) => r.id).sort()).toEqual([committedId, "gen-spooled-only"].sort())
      expect(rows.find((r) => r.id === committedId)?.total_cost_nano).toBe(row!.total_cost_nano)
      expect(Number(spend) - Number(spendBefore)).toBe(2_000_000_000)
      expect(existsSync(join(dir, `ledger-spool.${instanceId}.jsonl`))).toBe(false)
    } finally {
      await second.stop()
    }
  })
})

describe("a worker given stopped workers' spools (serve --workers)", () => {
  test("takes their batches into its own spool, commits them before serving, and removes their files", async () => {
    const dir = tempDir()
    const file = join(dir, "gateway.db")
    const first = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: file, dataDir: dir, instanceId: "sup-w0.1" })))
    const admin = Option.getOrThrow(first.createdSecret)
    const res = await fetch(`${first.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "orphaned" }),
    })
    const created = (await res.json()) as { data: { hash: string } }
    await first.stop()
    const db = new Database(file, { readonly: true })
    const owner = db.query<{ user_id: string; workspace_id: string }, [string]>("SELECT user_id, workspace_id FROM api_keys WHERE hash = ?").get(created.data.hash)!
    db.close()
    // Two workers killed while the database was away: each left its spool under its own name.
    const orphans = ["sup-w0.1", "sup-w1.2"]
    for (const [i, id] of orphans.entries()) {
      const spool = openSpool(join(dir, `ledger-spool.${id}.jsonl`), { maxGenerations: 100, maxBytes: 1 << 30 })
      await spool.append([{ entry: entry(`gen-orphan-${i}`, created.data.hash, owner.user_id, owner.workspace_id, i + 1) }], [])
      await spool.close()
    }

    process.env["GATEWAY_ADOPT_SPOOLS"] = orphans.join(",")
    let second: Awaited<ReturnType<typeof startServer>>
    try {
      second = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: file, dataDir: dir, instanceId: "sup-w0.3" })))
    } finally {
      delete process.env["GATEWAY_ADOPT_SPOOLS"]
    }
    try {
      const after = new Database(file, { readonly: true })
      const rows = after.query<{ id: string }, []>("SELECT id FROM generations WHERE id LIKE 'gen-orphan-%' ORDER BY id").all()
      after.close()
      expect(rows.map((r) => r.id)).toEqual(["gen-orphan-0", "gen-orphan-1"])
      for (const id of [...orphans, "sup-w0.3"]) expect(existsSync(join(dir, `ledger-spool.${id}.jsonl`))).toBe(false)
    } finally {
      await second.stop()
    }
  })
})

/** The ledger writer alone over a SQLite file of its own (a 200 ms commit timeout, a 5 ms window), with the hooks' registry. */
const writerRuntime = (instanceId: string) => {
  const dir = tempDir()
  const file = join(dir, "gateway.db")
  const config = GatewayConfig.layer(testSettings({ databaseUrl: file, dataDir: dir, instanceId, commitTimeoutMs: 200 }))
  const options = Layer.succeed(GenerationWriterOptions, { windowMs: 5, maxBatch: 200, retryDelayMs: 1 })
  const rt = ManagedRuntime.make(
    Layer.merge(GenerationStore.Default, LedgerHooks.Default).pipe(Layer.provide(options), Layer.provideMerge(StoreLive), Layer.provide(config)),
  )
  return { dir, file, rt }
}

describe("the ledger writer when its database cannot take a commit", () => {
  test("the batch is spooled with its hooks' rows, later records wait behind it, and all of them are committed once it can", async () => {
    const { dir, file, rt } = writerRuntime("spool-writer")
    try {
      await rt.runtime()
      const own = new Database(file)
      own.run("CREATE TABLE hook_rows (generation_id TEXT PRIMARY KEY)")
      const hooks = await rt.runPromise(LedgerHooks)
      hooks.register((entries) => [{ table: "hook_rows", columns: ["generation_id"], rows: entries.map((e) => ({ generation_id: e.id })) }])
      const store = await rt.runPromise(GenerationStore)
      // Another connection holds the write lock past the commit timeout: the batch cannot be committed.
      own.run("BEGIN IMMEDIATE")
      const entries = Array.from({ length: 5 }, () => generationEntry())
      const kept = await Promise.all(entries.map((e) => new Promise<boolean>((resolve) => store.recordSync(e, resolve))))
      // Reported kept (in the spool's file), not committed.
      expect(kept).toEqual([true, true, true, true, true])
      expect(store.spoolStats().generations).toBe(5)
      const stats = await rt.runPromise(store.stats)
      expect([stats.spooledRows, stats.rowsWritten]).toEqual([5, 0])
      // A record queued meanwhile waits behind the spooled ones (in order), in the spool too.
      const later = generationEntry()
      expect(await new Promise<boolean>((resolve) => store.recordSync(later, resolve))).toBe(true)
      expect(store.spoolStats().generations).toBe(6)
      expect(readSpoolFile(join(dir, "ledger-spool.spool-writer.jsonl")).flatMap((b) => b.items.map((i) => i.entry.id))).toEqual(
        [...entries, later].map((e) => e.id),
      )
      own.run("COMMIT")
      const deadline = Date.now() + 10_000
      while (store.spoolStats().generations > 0 && Date.now() < deadline) await Bun.sleep(20)
      const ids = [...entries, later].map((e) => e.id)
      const generations = own.query<{ id: string }, []>("SELECT id FROM generations").all().map((r) => r.id)
      const hooked = own.query<{ generation_id: string }, []>("SELECT generation_id FROM hook_rows").all().map((r) => r.generation_id)
      own.close()
      expect(generations.sort()).toEqual([...ids].sort())
      expect(hooked.sort()).toEqual([...ids].sort())
      expect((await rt.runPromise(store.stats)).replayedRows).toBe(6)
      // The file goes once its last batch is committed, a step after the count reaches 0.
      const spoolFile = join(dir, "ledger-spool.spool-writer.jsonl")
      while (existsSync(spoolFile) && Date.now() < deadline) await Bun.sleep(20)
      expect(existsSync(spoolFile)).toBe(false)
    } finally {
      await rt.dispose()
    }
  })
})

describe("a ledger hook that cannot read the store (an outage)", () => {
  test("the batch is spooled with its hooks still to ask; they are asked again at commit, so their rows are not lost", async () => {
    const { dir, file, rt } = writerRuntime("spool-hooks")
    try {
      await rt.runtime()
      const own = new Database(file)
      own.run("CREATE TABLE hook_rows (generation_id TEXT PRIMARY KEY)")
      const hooks = await rt.runPromise(LedgerHooks)
      // The hook reads the store first (as the broadcast outbox does for a workspace it has not seen): refused while `away`.
      let away = true
      let asked = 0
      hooks.register(async (entries) => {
        asked++
        if (away) throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
        return [{ table: "hook_rows", columns: ["generation_id"], rows: entries.map((e) => ({ generation_id: e.id })) }]
      })
      const store = await rt.runPromise(GenerationStore)
      const entries = Array.from({ length: 4 }, () => generationEntry())
      const kept = await Promise.all(entries.map((e) => new Promise<boolean>((resolve) => store.recordSync(e, resolve))))
      expect(kept).toEqual([true, true, true, true])
      expect(store.spoolStats().generations).toBe(4)
      // In the file without hook rows: they are made when the batch is committed.
      const spooled = readSpoolFile(join(dir, "ledger-spool.spool-hooks.jsonl"))
      expect(spooled.map((b) => b.extra)).toEqual(spooled.map(() => undefined))
      expect(own.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM generations").get()?.n).toBe(0)
      const askedWhileAway = asked
      away = false
      const deadline = Date.now() + 10_000
      while (store.spoolStats().generations > 0 && Date.now() < deadline) await Bun.sleep(20)
      const ids = entries.map((e) => e.id).sort()
      const generations = own.query<{ id: string }, []>("SELECT id FROM generations").all().map((r) => r.id)
      const hooked = own.query<{ generation_id: string }, []>("SELECT generation_id FROM hook_rows").all().map((r) => r.generation_id)
      own.close()
      expect(asked).toBeGreaterThan(askedWhileAway)
      expect(generations.sort()).toEqual(ids)
      expect(hooked.sort()).toEqual(ids)
    } finally {
      await rt.dispose()
    }
  })
})

describe("a spool without a file (an in-memory database)", () => {
  test("holds batches in memory and empties without touching the disk", async () => {
    const spool = openSpool(undefined, { maxGenerations: 10, maxBytes: 1 << 30 })
    await spool.append([{ entry: entry("m1", "k", "u", "w", 1) }], [])
    await spool.append([{ entry: entry("m2", "k", "u", "w", 1) }], [])
    expect(spool.batches().map((b) => b.items[0]?.entry.id)).toEqual(["m1", "m2"])
    await spool.committed(2)
    expect([spool.generations(), spool.bytes(), spool.busy()]).toEqual([0, 0, false])
    await spool.close()
  })
})
