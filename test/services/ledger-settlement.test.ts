/**
 * On every engine, a reservation is settled by the ledger writer in the transaction that writes
 * the generation replacing it (`recordSettled`): the hold is released exactly when the row is
 * written, and when the row cannot be written, alone after it: never both, never neither.
 * (Postgres settled in a transaction of its own per request before budget slices.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Spend } from "../../src/services/Spend.js"
import { Users } from "../../src/services/Users.js"
import { generationEntry } from "../support/generations.js"
import { newUserKey, servicesRuntime, useServices } from "../support/services.js"

const services = useServices()

/** A user, a key with a limit of $1, and a reservation of $0.5 on it. */
const reserved = Effect.gen(function* () {
  const spend = yield* Spend
  const { row, userId, workspaceId } = yield* newUserKey({ name: "limited", limit: 1 })
  const reservation = Option.getOrThrow(yield* spend.reserve(row, 0.5, { isByok: false }))
  return { row, reservation, base: { keyHash: row.hash, userId, workspaceId } }
})

/** The key's hold and window spend, and whether the reservation row and the generation row exist. */
const state = (hash: string, reservationId: string, generationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const key = (yield* sql<{ reserved: number; spent: number }>`SELECT reserved_nano AS reserved, window_spend_nano AS spent
      FROM api_keys WHERE hash = ${hash}`)[0]!
    const holds = (yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations WHERE id = ${reservationId}`)[0]!
    const rows = (yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM generations WHERE id = ${generationId}`)[0]!
    return { reserved: Number(key.reserved) / 1e9, spent: Number(key.spent) / 1e9, holds: Number(holds.n), rows: Number(rows.n) }
  })

describe("a reservation settled in the ledger's batch", () => {
  test("the row and the release land together: before the batch neither, after it both", async () => {
    const rt = services()
    const result = await rt.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        expect(store.settlesInBatch).toBe(true)
        const { reservation, base } = yield* reserved
        const entry = generationEntry({ ...base, totalCost: 0.125 })
        let committed = false
        expect(store.recordSettled(entry, { ...reservation, actualUsd: 0.125 }, () => (committed = true))).toBe(true)
        const queued = yield* state(base.keyHash, reservation.id, entry.id)
        yield* store.flush
        return { queued, committed, after: yield* state(base.keyHash, reservation.id, entry.id) }
      }),
    )
    expect(result.queued).toEqual({ reserved: 0.5, spent: 0, holds: 1, rows: 0 })
    expect(result.committed).toBe(true)
    expect(result.after).toEqual({ reserved: 0, spent: 0.125, holds: 0, rows: 1 })
  })

  test("a row that cannot be written is logged, and its hold is released all the same", async () => {
    const rt = services()
    const result = await rt.runPromise(
      Effect.gen(function* () {
        const store = yield* GenerationStore
        const { reservation, base } = yield* reserved
        // The same id twice: the second row breaks the primary key, in its batch and alone.
        const first = generationEntry({ ...base, totalCost: 0 })
        yield* store.recordDurable(first)
        const before = yield* store.stats
        const clash = { ...first, totalCost: 0.25 }
        let committed = false
        expect(store.recordSettled(clash, { ...reservation, actualUsd: 0.25 }, () => (committed = true))).toBe(true)
        yield* store.flush
        const after = yield* store.stats
        return { failedRows: after.failedRows - before.failedRows, committed, state: yield* state(base.keyHash, reservation.id, first.id) }
      }),
    )
    expect(result.failedRows).toBe(1)
    expect(result.committed).toBe(true)
    // Released, and the actual counted into the window as the separate settlement does.
    expect(result.state).toEqual({ reserved: 0, spent: 0.25, holds: 0, rows: 1 })
  })
})

describe("reservations asked for together", () => {
  test("ten at once on a $1 limit: admitted in order while the window has room, exactly as one at a time", async () => {
    const rt = services()
    const result = await rt.runPromise(
      Effect.gen(function* () {
        const spend = yield* Spend
        const sql = yield* SqlClient.SqlClient
        const { row } = yield* newUserKey({ name: "limited", limit: 1 })
        // All ten in the same turn of the event loop (one batch on SQLite, ten transactions on Postgres).
        const outcomes = yield* Effect.all(
          Array.from({ length: 10 }, () => Effect.either(spend.reserve(row, 0.3, { isByok: false }))),
          { concurrency: "unbounded" },
        )
        const held = (yield* sql<{ r: number }>`SELECT reserved_nano AS r FROM api_keys WHERE hash = ${row.hash}`)[0]!
        const rows = (yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations WHERE key_hash = ${row.hash}`)[0]!
        return { admitted: outcomes.filter((o) => o._tag === "Right").length, refused: outcomes.filter((o) => o._tag === "Left").map((o) => (o._tag === "Left" ? o.left.status : 0)), reserved: Number(held.r) / 1e9, rows: Number(rows.n) }
      }),
    )
    // Admitted while reserved < $1: 0, 0.3, 0.6, 0.9; the other six are refused with 402 and hold nothing.
    expect(result.admitted).toBe(4)
    expect(result.refused).toEqual([402, 402, 402, 402, 402, 402])
    expect(result.reserved).toBeCloseTo(1.2, 10)
    expect(result.rows).toBe(4)
  })
})

describe("reservations asked for together, with credits enforced", () => {
  let credits: Awaited<ReturnType<typeof servicesRuntime>>
  beforeAll(async () => {
    credits = await servicesRuntime({ creditsEnforced: true })
  })
  afterAll(async () => {
    await credits?.dispose()
  })

  test("one refused for credits after its key's hold: only its own hold is undone, the other's stays", async () => {
    const result = await credits.runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const keys = yield* KeyStore
        const spend = yield* Spend
        const sql = yield* SqlClient.SqlClient
        const keyOf = (credit: number) =>
          Effect.gen(function* () {
            const userId = `user_${crypto.randomUUID().slice(0, 8)}`
            const workspaceId = yield* users.ensure(userId)
            if (credit > 0) yield* keys.addCredits(userId, credit)
            return (yield* keys.create({ userId, workspaceId, name: "limited", limit: 1 })).row
          })
        const poor = yield* keyOf(0)
        const rich = yield* keyOf(5)
        const [a, b] = yield* Effect.all(
          [Effect.either(spend.reserve(poor, 0.5, { isByok: false })), Effect.either(spend.reserve(rich, 0.5, { isByok: false }))],
          { concurrency: "unbounded" },
        )
        const heldOf = (hash: string) =>
          Effect.map(sql<{ r: number }>`SELECT reserved_nano AS r FROM api_keys WHERE hash = ${hash}`, (r) => Number(r[0]!.r) / 1e9)
        return {
          poor: a._tag === "Left" ? a.left.status : 200,
          rich: b._tag === "Right" ? 200 : b.left.status,
          poorHeld: yield* heldOf(poor.hash),
          richHeld: yield* heldOf(rich.hash),
        }
      }),
    )
    expect(result).toEqual({ poor: 402, rich: 200, poorHeld: 0, richHeld: 0.5 })
  })
})
