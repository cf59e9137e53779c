/**
 * The spend ledger as a daily rollup: one row per key, UTC day and BYOK flag, its amount the sum
 * of what was spent. Every spend window (src/domain/windows.ts) starts at a UTC midnight, so a
 * window's spend is the sum of its days' rows. The per-request detail stays in `generations`
 * (written in the same transaction). A batch is summed per row in memory and added with one
 * upsert per row, in the rows' sorted order (two writers of one Postgres database lock rows in
 * the same order: no deadlock). Measured on a SQLite file (bench/scratch micro-benchmark, 32-row
 * batches): a spend row per generation with its two indexes cost ~8 µs of CPU; the rollup's
 * upsert, once per key per batch, next to nothing.
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect, type Types } from "effect"
import { toNanoUsd } from "../domain/pricing.js"

/** What one request (or one recorded spend) adds to the ledger. */
export interface SpendItem {
  readonly keyHash: string
  readonly userId: string
  readonly workspaceId: string
  readonly amountUsd: number
  readonly isByok: boolean
  /** ISO 8601 in UTC: its first ten characters are the day. */
  readonly createdAt: string
}

/** A row of `spend_daily` (a type alias, so it is a record `sql.insert` takes). */
export type SpendDayRow = {
  readonly key_hash: string
  readonly day: string
  readonly is_byok: number
  readonly user_id: string
  readonly workspace_id: string
  /** Nano-dollars (1e-9 USD): integers, so the sums are exact. */
  readonly amount_nano: number
}

/** The UTC day (YYYY-MM-DD) of an ISO 8601 time, as `spend_daily.day` holds it. */
export const dayOf = (iso: string): string => iso.slice(0, 10)


/** The items summed per (key, day, BYOK), sorted by that key. */
export const rollUp = (items: Iterable<SpendItem>): Array<SpendDayRow> => {
  const rows = new Map<string, Types.Mutable<SpendDayRow>>()
  // The row of the previous item: a batch comes in runs of one key and day (one key: all of it),
  // and a run is summed without building and hashing the map key per item.
  let last: Types.Mutable<SpendDayRow> | undefined
  for (const item of items) {
    const isByok = item.isByok ? 1 : 0
    if (last !== undefined && item.keyHash === last.key_hash && isByok === last.is_byok && item.createdAt.startsWith(last.day)) {
      last.amount_nano += toNanoUsd(item.amountUsd)
      continue
    }
    const day = dayOf(item.createdAt)
    const id = `${item.keyHash}\u0000${day}\u0000${isByok}`
    let row = rows.get(id)
    if (row === undefined) {
      row = {
        key_hash: item.keyHash,
        day,
        is_byok: isByok,
        user_id: item.userId,
        workspace_id: item.workspaceId,
        amount_nano: toNanoUsd(item.amountUsd),
      }
      rows.set(id, row)
    } else row.amount_nano += toNanoUsd(item.amountUsd)
    last = row
  }
  return [...rows.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row)
}

const UPSERT_TAIL =
  "ON CONFLICT (key_hash, day, is_byok) DO UPDATE SET amount_nano = spend_daily.amount_nano + excluded.amount_nano"

/** The rows added through @effect/sql (Postgres, an in-memory SQLite), in the caller's transaction. */
export const addSpendWith = (sql: SqlClient.SqlClient, rows: ReadonlyArray<SpendDayRow>) =>
  rows.length === 0 ? Effect.void : Effect.asVoid(sql`INSERT INTO spend_daily ${sql.insert(rows)} ${sql.unsafe(UPSERT_TAIL)}`)

/** The rows added with a prepared statement on a SQLite connection, in the caller's transaction. */
export const spendAdderOn = (db: Database): ((rows: ReadonlyArray<SpendDayRow>) => void) => {
  const upsert = db.prepare<unknown, [string, string, number, string, string, number]>(
    `INSERT INTO spend_daily (key_hash, day, is_byok, user_id, workspace_id, amount_nano) VALUES (?, ?, ?, ?, ?, ?) ${UPSERT_TAIL}`,
  )
  return (rows) => {
    for (const r of rows) upsert.run(r.key_hash, r.day, r.is_byok, r.user_id, r.workspace_id, r.amount_nano)
  }
}
