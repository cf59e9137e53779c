/**
 * Regression (found in review): the ledger writer's own connection committed between a read and a
 * write of a deferred transaction on the main connection; SQLite then answers SQLITE_BUSY_SNAPSHOT
 * (the busy handler is not consulted). The writer now commits inside the main connection's
 * transaction permit.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Exit } from "effect"
import { GenerationStore, newGenerationId } from "../../src/services/GenerationStore.js"
import type { GenerationEntry } from "../../src/domain/generations.js"
import { engine } from "../support/db.js"
import { useServices } from "../support/services.js"

const services = useServices()

const entry = (): GenerationEntry => ({
  id: newGenerationId(),
  keyHash: "k".repeat(64),
  userId: "user_gen",
  workspaceId: "ws_gen",
  model: "demo/echo",
  providerName: "fake",
  upstreamModel: "echo-1",
  createdAt: new Date().toISOString(),
  streamed: false,
  cancelled: false,
  finishReason: "stop",
  sessionId: null,
  inputTokens: 10,
  cachedTokens: 2,
  cacheWriteTokens: 1,
  outputTokens: 5,
  reasoningTokens: 3,
  totalCost: 0.001,
  isByok: false,
  generationTimeMs: 120,
  latencyMs: 40,
  status: "completed",
})

describe("main-connection transaction vs the ledger writer's connection", () => {
  test.skipIf(engine !== "sqlite")("a read-then-write transaction that yields while a batch is queued still commits", async () => {
    const rt = services()
    const exit = await rt.runPromiseExit(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* GenerationStore
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT COUNT(*) AS n FROM spend`
            // Any macrotask boundary inside the transaction lets the writer's timer run.
            yield* store.record(entry())
            yield* Effect.sleep(30)
            yield* sql`UPDATE users SET credits_reserved_usd = credits_reserved_usd WHERE id = 'nobody'`
          }),
        )
      }),
    )
    if (Exit.isFailure(exit)) console.log(String(exit.cause).slice(0, 400))
    expect(Exit.isSuccess(exit)).toBe(true)
  })
})
