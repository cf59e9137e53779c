import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { SqlClient } from "@effect/sql"
import { Effect, Fiber, Layer, ManagedRuntime, Option } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import type { GenerationEntry } from "../../src/domain/generations.js"
import {
  GenerationStore,
  type GenerationWriterSettings,
  GenerationWriterOptions,
  newGenerationId,
} from "../../src/services/GenerationStore.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { StoreLive } from "../../src/store/Store.js"
import { freshDatabase, pgBaseUrl, sqliteFileDatabase, type TestDatabase } from "../support/db.js"
import { generationEntry } from "../support/generations.js"
import { newUserKey } from "../support/services.js"

/** One database that outlives a runtime (a file for SQLite), so a restart can read what was written. */
let db: TestDatabase
beforeAll(async () => {
  db = pgBaseUrl !== undefined ? await freshDatabase() : sqliteFileDatabase("gw-generations")
})
afterAll(async () => {
  for (const rt of open) await rt.dispose()
  await db?.drop()
})

const open: Array<ManagedRuntime.ManagedRuntime<GenerationStore | KeyStore | Users | SqlClient.SqlClient, unknown>> = []

const runtimeWith = async (writer: Partial<GenerationWriterSettings> = {}) => {
  const config = GatewayConfig.layer(testSettings({ databaseUrl: db.url }))
  const options = Layer.succeed(GenerationWriterOptions, { windowMs: 5, maxBatch: 200, retryDelayMs: 1, ...writer })
  const rt = ManagedRuntime.make(
    Layer.mergeAll(GenerationStore.Default, KeyStore.Default, Users.Default).pipe(
      Layer.provide(options),
      Layer.provideMerge(StoreLive),
      Layer.provide(config),
    ),
  )
  await rt.runtime()
  open.push(rt)
  return rt
}

let rt: Awaited<ReturnType<typeof runtimeWith>>
beforeAll(async () => {
  rt = await runtimeWith()
})

// Every entry on a key of its own, so what the spend ledger holds for its key is its spend alone.
let keys = 0
const entry = (overrides: Partial<GenerationEntry> = {}) => generationEntry({ keyHash: `gen-store-${Date.now()}-${keys++}`, ...overrides })

const countWhere = (ids: ReadonlyArray<string>, table: "generations") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM ${sql(table)} WHERE ${sql.in("id", ids)}`,
  ).pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0)))

/** What the spend ledger holds for the keys of `entries`. */
const spentOn = (entries: ReadonlyArray<GenerationEntry>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily
      WHERE ${sql.in("key_hash", [...new Set(entries.map((e) => e.keyHash))])}`,
  ).pipe(Effect.map((rows) => Number(rows[0]?.total ?? 0) / 1e9))
const costOf = (entries: ReadonlyArray<GenerationEntry>) => entries.reduce((n, e) => n + e.totalCost, 0)

describe("newGenerationId", () => {
  test("is gen-<unix seconds>-<20 alphanumerics> and unique", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newGenerationId(Date.parse("2026-11-22T10:00:00Z"))))
    expect(ids.size).toBe(1000)
    for (const id of ids) expect(id).toMatch(/^gen-1795341600-[A-Za-z0-9]{20}$/)
  })

  test("sorts by the millisecond it was made in (the ledger's inserts stay at the index's right edge)", () => {
    const start = Date.parse("2026-11-22T10:00:00.990Z")
    // Across a second's end, and from a millisecond with one digit to ones with two and three.
    const times = [start, start + 1, start + 9, start + 10, start + 15, start + 109, start + 110, start + 1005]
    const ids = times.map((t) => newGenerationId(t))
    expect([...ids].sort()).toEqual(ids)
    expect(ids[0]).toMatch(/^gen-1795341600-990[A-Za-z0-9]{17}$/)
    expect(ids[2]).toMatch(/^gen-1795341600-999[A-Za-z0-9]{17}$/)
    expect(ids[3]).toMatch(/^gen-1795341601-000[A-Za-z0-9]{17}$/)
    expect(ids[4]).toMatch(/^gen-1795341601-005[A-Za-z0-9]{17}$/)
    expect(ids[6]).toMatch(/^gen-1795341601-100[A-Za-z0-9]{17}$/)
    expect(ids[7]).toMatch(/^gen-1795341601-995[A-Za-z0-9]{17}$/)
    // A clock with fractions of a millisecond still gives three digits.
    expect(newGenerationId(start + 0.5)).toMatch(/^gen-1795341600-990[A-Za-z0-9]{17}$/)
    // Within one millisecond the random part keeps them distinct.
    expect(new Set(Array.from({ length: 1000 }, () => newGenerationId(start))).size).toBe(1000)
  })
})

describe("record (group commit)", () => {
  test("returns before anything is written: the row waits in the queue until its window closes", async () => {
    const slow = await runtimeWith({ windowMs: 300 })
    const e = entry()
    await slow.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        yield* store.record(e)
        expect(yield* store.queueDepth).toBe(1)
        expect(Option.isNone(yield* store.get(e.id))).toBe(true)
        yield* store.flush
        expect(yield* store.queueDepth).toBe(0)
        expect(Option.isSome(yield* store.get(e.id))).toBe(true)
      }),
    )
  })

  test("written: a queued record is committed at once and then readable; an id not queued commits nothing", async () => {
    const slow = await runtimeWith({ windowMs: 60_000 })
    const [queued, other] = [entry(), entry()]
    await slow.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        yield* store.record(queued)
        const before = yield* store.stats
        yield* store.written(other.id)
        expect((yield* store.stats).flushes).toBe(before.flushes)
        expect(yield* store.queueDepth).toBe(1)
        yield* store.written(queued.id)
        expect(yield* store.queueDepth).toBe(0)
        expect((yield* store.stats).flushes).toBe(before.flushes + 1)
        expect(Option.isSome(yield* store.get(queued.id))).toBe(true)
      }),
    )
  })

  test("caughtUp: everything queued is committed at once; with nothing queued it commits nothing", async () => {
    const slow = await runtimeWith({ windowMs: 60_000 })
    await slow.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        const before = yield* store.stats
        yield* store.caughtUp
        expect((yield* store.stats).flushes).toBe(before.flushes)
        yield* Effect.forEach([entry(), entry()], store.record, { discard: true })
        expect(yield* store.queueDepth).toBe(2)
        yield* store.caughtUp
        expect(yield* store.queueDepth).toBe(0)
        expect((yield* store.stats).flushes).toBe(before.flushes + 1)
      }),
    )
  })

  test("500 record calls end up in a few transactions of at most 200 rows, each with its spend", async () => {
    const entries = Array.from({ length: 500 }, () => entry())
    const ids = entries.map((e) => e.id)
    const { before, after } = await rt.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        const before = yield* store.stats
        yield* Effect.forEach(entries, store.record, { discard: true })
        yield* store.flush
        return { before, after: yield* store.stats }
      }),
    )
    const flushes = after.flushes - before.flushes
    expect(flushes).toBeGreaterThanOrEqual(3) // 500 rows, 200 at most per transaction
    expect(flushes).toBeLessThanOrEqual(6)
    expect(after.rowsWritten - before.rowsWritten).toBe(500)
    expect(await rt.runPromise(countWhere(ids, "generations"))).toBe(500)
    expect(await rt.runPromise(spentOn(entries))).toBeCloseTo(costOf(entries), 12)
  })

  test("the writer flushes on its own once the window has passed", async () => {
    const e = entry()
    await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.record(e)))
    await Bun.sleep(100)
    expect(Option.isSome(await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.get(e.id))))).toBe(true)
  })
})

describe("recordDurable", () => {
  test("resolves only after its batch committed: the row is readable at once, and not before", async () => {
    const slow = await runtimeWith({ windowMs: 250 })
    const e = entry()
    await slow.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        const fiber = yield* Effect.fork(store.recordDurable(e))
        yield* Effect.sleep(50)
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        expect(Option.isNone(yield* store.get(e.id))).toBe(true)
        yield* Fiber.join(fiber)
        expect(Option.isSome(yield* store.get(e.id))).toBe(true)
      }),
    )
  })
})

describe("shutdown", () => {
  test("disposing the runtime flushes every pending row (nothing lost)", async () => {
    const lazy = await runtimeWith({ windowMs: 60_000 })
    const entries = Array.from({ length: 20 }, () => entry({ totalCost: 0.5 }))
    await lazy.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        yield* Effect.forEach(entries, store.record, { discard: true })
        expect(yield* store.queueDepth).toBe(20)
      }),
    )
    expect(await rt.runPromise(countWhere(entries.map((e) => e.id), "generations"))).toBe(0)
    await lazy.dispose()
    open.splice(open.indexOf(lazy), 1)
    const ids = entries.map((e) => e.id)
    expect(await rt.runPromise(countWhere(ids, "generations"))).toBe(20)
    expect(await rt.runPromise(spentOn(entries))).toBeCloseTo(costOf(entries), 12)
  })
})

describe("after shutdown", () => {
  test("a generation recorded after the store closed is refused at once (logged), never left waiting", async () => {
    const closing = await runtimeWith({ windowMs: 60_000 })
    const store = await closing.runPromise(GenerationStore)
    await closing.dispose()
    open.splice(open.indexOf(closing), 1)
    const late = entry()
    await Effect.runPromise(Effect.timeoutFail(store.recordDurable(late), { duration: 1000, onTimeout: () => "hung" }))
    await Effect.runPromise(store.flush)
    expect(await Effect.runPromise(store.queueDepth)).toBe(0)
    expect(await rt.runPromise(countWhere([late.id], "generations"))).toBe(0)
  })
})

describe("failed flushes", () => {
  test("a bad row (duplicate id) does not take its batch down: the others are written, the failure counted", async () => {
    const first = entry()
    const good = entry()
    const { before, after } = await rt.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        yield* store.recordDurable(first)
        const before = yield* store.stats
        // Its spend (on the same key) must not count either.
        yield* store.record(entry({ id: first.id, keyHash: first.keyHash, totalCost: 5 }))
        yield* store.record(good)
        yield* store.flush
        return { before, after: yield* store.stats }
      }),
    )
    expect(after.failedBatches - before.failedBatches).toBe(1)
    expect(after.failedRows - before.failedRows).toBe(1)
    expect(Option.isSome(await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.get(good.id))))).toBe(true)
    expect(await rt.runPromise(spentOn([first]))).toBeCloseTo(first.totalCost, 12)
    expect(await rt.runPromise(spentOn([good]))).toBeCloseTo(good.totalCost, 12)
  })
})

describe("a busy SQLite database", () => {
  // Another connection holding the write lock (another process, or this process's own connection
  // in the middle of a transaction) makes the writer wait, without blocking the event loop and
  // without counting the batch as failed.
  test.skipIf(pgBaseUrl !== undefined)("is waited out: the rows are written once the lock is released, no failure counted", async () => {
    const other = new Database(db.url)
    other.run("BEGIN IMMEDIATE")
    const e = entry()
    const before = await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.stats))
    const durable = rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.recordDurable(e)))
    let settled = false
    void durable.then(() => {
      settled = true
    })
    // The event loop keeps turning while the writer waits.
    const started = performance.now()
    await Bun.sleep(100)
    expect(performance.now() - started).toBeLessThan(1_000)
    expect(settled).toBe(false)
    other.run("COMMIT")
    other.close()
    await durable
    const after = await rt.runPromise(Effect.flatMap(GenerationStore, (s) => s.stats))
    expect(after.failedBatches - before.failedBatches).toBe(0)
    expect(after.failedRows - before.failedRows).toBe(0)
    expect(await rt.runPromise(countWhere([e.id], "generations"))).toBe(1)
    expect(await rt.runPromise(spentOn([e]))).toBeCloseTo(e.totalCost, 12)
  })
})

describe("spend ledger", () => {
  test("each generation's cost appears in its key's usage windows; BYOK separately", async () => {
    const view = await rt.runPromise(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        const store = yield* GenerationStore
        const { row, userId, workspaceId } = yield* newUserKey({ name: "spender", limit: 1 })
        const base = { keyHash: row.hash, userId, workspaceId }
        yield* store.record(entry({ ...base, totalCost: 0.25 }))
        yield* store.recordDurable(entry({ ...base, totalCost: 0.125 }))
        yield* store.recordDurable(entry({ ...base, totalCost: 0.5, isByok: true }))
        return yield* keys.viewOne(row)
      }),
    )
    expect(view.usage).toBe(0.375)
    expect(view.usage_daily).toBe(0.375)
    expect(view.usage_monthly).toBe(0.375)
    expect(view.byok_usage).toBe(0.5)
    expect(view.limit_remaining).toBe(0.625)
  })
})

describe("get and getContent", () => {
  test("a generation reads back field for field; its content and error too", async () => {
    const e = entry({
      streamed: true,
      cancelled: true,
      status: "cancelled",
      finishReason: null,
      sessionId: "s-1",
      upstreamId: "chatcmpl-1",
      isByok: true,
      latencyMs: null,
      error: {
        message: "upstream overloaded",
        status: 529,
        providerName: "fake",
        raw: { detail: "busy" },
        previousErrors: [{ code: 503, message: "unavailable", providerName: "other", raw: "x" }],
      },
      content: {
        input: { messages: [{ role: "user", content: "hi" }] },
        output: { completion: "hello", reasoning: null },
      },
      httpReferer: "https://app.example.com",
      appTitle: "My App",
      userAgent: "client/1.0",
    })
    const plain = entry({ inputTokens: 7.6 })
    const got = await rt.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        yield* store.record(e)
        yield* store.recordDurable(plain)
        return {
          g: Option.getOrThrow(yield* store.get(e.id)),
          content: Option.getOrThrow(yield* store.getContent(e.id)),
          p: Option.getOrThrow(yield* store.get(plain.id)),
          noContent: yield* store.getContent(plain.id),
          unknown: yield* store.get("gen-0-nope"),
        }
      }),
    )
    const { content: _content, ...rest } = e
    expect(got.g).toEqual({ ...rest, upstreamId: "chatcmpl-1", hasContent: true, usageEstimated: false })
    expect(got.content).toEqual(e.content!)
    expect(got.p.hasContent).toBe(false)
    expect(got.p.inputTokens).toBe(8) // token counts are stored as integers
    expect(got.p.error).toBeNull()
    // A request without client headers reads back nulls.
    expect([got.p.httpReferer, got.p.appTitle, got.p.userAgent]).toEqual([null, null, null])
    expect(Option.isNone(got.noContent)).toBe(true)
    expect(Option.isNone(got.unknown)).toBe(true)
  })
})
