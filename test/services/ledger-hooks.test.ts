/** The ledger writer's hooks (LedgerHooks): their rows commit with the generations; rows that fail never cost a generation. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, ManagedRuntime } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import { GenerationStore, GenerationWriterOptions } from "../../src/services/GenerationStore.js"
import { LedgerHooks } from "../../src/services/LedgerHooks.js"
import { StoreLive } from "../../src/store/Store.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { generationEntry } from "../support/generations.js"

let db: TestDatabase
let rt: ManagedRuntime.ManagedRuntime<GenerationStore | LedgerHooks | SqlClient.SqlClient, unknown>
beforeAll(async () => {
  db = await freshDatabase()
  const config = GatewayConfig.layer(testSettings({ databaseUrl: db.url }))
  const options = Layer.succeed(GenerationWriterOptions, { windowMs: 5, maxBatch: 200, retryDelayMs: 1 })
  rt = ManagedRuntime.make(
    Layer.merge(GenerationStore.Default, LedgerHooks.Default).pipe(Layer.provide(options), Layer.provideMerge(StoreLive), Layer.provide(config)),
  )
  await rt.runtime()
})
afterAll(async () => {
  await rt.dispose()
  await db.drop()
})

const outboxRow = (generationId: string, destinationId: string) => ({
  batch_id: generationId,
  destination_id: destinationId,
  generations: 1,
  created_at: Date.now(),
  state: "pending",
  attempts: 0,
  next_attempt_at: 0,
  claimed_until: 0,
  last_error: null,
  finished_at: null,
})
const COLUMNS = Object.keys(outboxRow("g", "d"))

const count = (table: "generations" | "broadcast_deliveries", column: string, ids: ReadonlyArray<string>) =>
  rt.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)} WHERE ${sql.in(column, ids)}`.pipe(Effect.map((r) => Number(r[0]?.n ?? 0))),
    ),
  )

describe("ledger hooks", () => {
  test("a hook's rows commit in the generations' transaction (synchronous and asynchronous hooks)", async () => {
    const hooks = await rt.runPromise(LedgerHooks)
    const removeSync = hooks.register((entries) => [{ table: "broadcast_deliveries", columns: COLUMNS, rows: entries.map((e) => outboxRow(e.id, "sync")) }])
    const removeAsync = hooks.register(async (entries) => [
      { table: "broadcast_deliveries", columns: COLUMNS, rows: entries.map((e) => outboxRow(e.id, "async")) },
    ])
    const entries = Array.from({ length: 5 }, () => generationEntry())
    await rt.runPromise(Effect.flatMap(GenerationStore, (s) => Effect.forEach(entries, s.recordDurable, { discard: true, concurrency: "unbounded" })))
    removeSync()
    removeAsync()
    const ids = entries.map((e) => e.id)
    expect(await count("generations", "id", ids)).toBe(5)
    expect(await count("broadcast_deliveries", "batch_id", ids)).toBe(10)
  })

  test("rows that cannot be written: the generations are written without them; a hook that throws adds nothing", async () => {
    const hooks = await rt.runPromise(LedgerHooks)
    const removeBad = hooks.register(() => [{ table: "no_such_table", columns: ["id"], rows: [{ id: "x" }] }])
    const removeThrowing = hooks.register(() => {
      throw new Error("the hook broke")
    })
    const entries = Array.from({ length: 3 }, () => generationEntry())
    await rt.runPromise(Effect.flatMap(GenerationStore, (s) => Effect.forEach(entries, s.recordDurable, { discard: true, concurrency: "unbounded" })))
    removeBad()
    removeThrowing()
    expect(await count("generations", "id", entries.map((e) => e.id))).toBe(3)
  })
})
