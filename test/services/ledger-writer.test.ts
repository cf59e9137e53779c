/** The timer-driven ledger writer: flush, recordDurable, shutdown, a busy database, failed rows. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, ManagedRuntime } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import type { GenerationEntry } from "../../src/domain/generations.js"
import {
  GenerationStore,
  type GenerationWriterSettings,
  GenerationWriterOptions,
} from "../../src/services/GenerationStore.js"
import { StoreLive } from "../../src/store/Store.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { generationEntry } from "../support/generations.js"

let db: TestDatabase
const open: Array<ManagedRuntime.ManagedRuntime<GenerationStore | SqlClient.SqlClient, unknown>> = []
beforeAll(async () => {
  db = await freshDatabase()
})
afterAll(async () => {
  for (const rt of open) await rt.dispose()
  await db.drop()
})

const runtimeWith = async (writer: Partial<GenerationWriterSettings> = {}) => {
  const config = GatewayConfig.layer(testSettings({ databaseUrl: db.url }))
  const options = Layer.succeed(GenerationWriterOptions, { windowMs: 5, maxBatch: 200, retryDelayMs: 1, ...writer })
  const rt = ManagedRuntime.make(
    GenerationStore.Default.pipe(Layer.provide(options), Layer.provideMerge(StoreLive), Layer.provide(config)),
  )
  await rt.runtime()
  open.push(rt)
  return rt
}

// Each test's entries are on a key of their own, each costing COST: the key's spend counts them.
const COST = 0.001
let keys = 0
const newKey = () => `ledger-writer-${Date.now()}-${keys++}`
const entry = (overrides: Partial<GenerationEntry> = {}) => generationEntry({ totalCost: COST, ...overrides })

/** Rows written for `ids`, and how many entries' worth of spend the key holds. */
const counts = (rt: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>, ids: ReadonlyArray<string>, keyHash: string) =>
  rt.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const g = yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM generations WHERE ${sql.in("id", ids)}`
      const s = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${keyHash}`
      const c = yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM generation_content WHERE ${sql.in("generation_id", ids)}`
      return { generations: Number(g[0]!.n), spend: Math.round(Number(s[0]!.total) / 1e9 / COST), content: Number(c[0]!.n) }
    }),
  )

describe("writer", () => {
  test("many recordDurable over several small batches all resolve, each row once", async () => {
    const rt = await runtimeWith({ maxBatch: 7, windowMs: 2 })
    const keyHash = newKey()
    const entries = Array.from({ length: 100 }, (_, i) =>
      entry(i % 3 === 0 ? { keyHash, content: { input: { messages: [{ role: "user", content: "x" }] }, output: { completion: "y", reasoning: null } } } as Partial<GenerationEntry> : { keyHash }),
    )
    await rt.runPromise(
      Effect.flatMap(GenerationStore, (s) => Effect.forEach(entries, (e) => s.recordDurable(e), { concurrency: "unbounded", discard: true })),
    )
    const c = await counts(rt, entries.map((e) => e.id), keyHash)
    expect(c).toEqual({ generations: 100, spend: 100, content: 34 })
  })

  test.skipIf(engine !== "sqlite")("shutdown while another connection holds the write lock: the final flush waits, nothing lost", async () => {
    const rt = await runtimeWith({ windowMs: 60_000 })
    const reader = await runtimeWith()
    const keyHash = newKey()
    const entries = Array.from({ length: 30 }, () => entry({ keyHash }))
    await rt.runPromise(Effect.flatMap(GenerationStore, (s) => Effect.forEach(entries, s.record, { discard: true })))
    const other = new Database(db.url)
    other.run("BEGIN IMMEDIATE")
    setTimeout(() => {
      other.run("COMMIT")
      other.close()
    }, 300)
    await rt.dispose()
    open.splice(open.indexOf(rt), 1)
    expect(await counts(reader, entries.map((e) => e.id), keyHash)).toEqual({ generations: 30, spend: 30, content: 0 })
  })

  test("a duplicate among a batch: the others written exactly once with their spend, the duplicate's not counted", async () => {
    const rt = await runtimeWith({ windowMs: 50 })
    const keyHash = newKey()
    const first = entry({ keyHash })
    await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.recordDurable(first)))
    const others = Array.from({ length: 5 }, () => entry({ keyHash }))
    await rt.runPromise(
      Effect.gen(function* () {
        const s = yield* GenerationStore
        yield* s.record(others[0]!)
        yield* s.record(entry({ keyHash, id: first.id, totalCost: 5 }))
        for (const e of others.slice(1)) yield* s.record(e)
        yield* s.flush
      }),
    )
    // The first and the five others: six entries' worth of spend; the duplicate's 5 USD is not in it.
    expect(await counts(rt, others.map((e) => e.id), keyHash)).toEqual({ generations: 5, spend: 6, content: 0 })
    expect(await counts(rt, [first.id], keyHash)).toEqual({ generations: 1, spend: 6, content: 0 })
  })
})
