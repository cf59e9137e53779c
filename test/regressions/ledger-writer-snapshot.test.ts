/**
 * Regression (found in review): the ledger writer's own connection committed between a read and a
 * write of a deferred transaction on the main connection; SQLite then answers SQLITE_BUSY_SNAPSHOT
 * (the busy handler is not consulted). The writer now commits inside the main connection's
 * transaction permit.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Exit } from "effect"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { engine } from "../support/db.js"
import { useServices } from "../support/services.js"
import { generationEntry } from "../support/generations.js"

const services = useServices()

const entry = generationEntry

describe("main-connection transaction vs the ledger writer's connection", () => {
  test.skipIf(engine !== "sqlite")("a read-then-write transaction that yields while a batch is queued still commits", async () => {
    const rt = services()
    const exit = await rt.runPromiseExit(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const store = yield* GenerationStore
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT COUNT(*) AS n FROM spend_daily`
            // Any macrotask boundary inside the transaction lets the writer's timer run.
            yield* store.record(entry())
            yield* Effect.sleep(30)
            yield* sql`UPDATE users SET credits_reserved_nano = credits_reserved_nano WHERE id = 'nobody'`
          }),
        )
      }),
    )
    if (Exit.isFailure(exit)) console.log(String(exit.cause).slice(0, 400))
    expect(Exit.isSuccess(exit)).toBe(true)
  })
})
