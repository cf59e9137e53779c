/**
 * The delivery worker's statements of every pass (is anything due, claim, read the batches, mark
 * a send delivered), on both engines: through @effect/sql (Postgres, and an in-memory SQLite),
 * or, for a SQLite file, as prepared statements on a connection of the worker's own, as the
 * ledger writer and the spend statements do (src/store/ledger.ts, spend-sqlite.ts). Measured
 * (bench/scratch, a 1,000-row table): an UPDATE through @effect/sql cost 120-320 µs of CPU, a
 * SELECT 37-62 µs, the prepared UPDATE 8-18 µs; the drained worker's delivered updates took
 * ~14 µs per generation (wall) through @effect/sql, ~4 µs here (the three statements, one commit).
 * The rarer statements (failures, caps, retention) stay on @effect/sql (row-outcomes.ts, maintenance.ts).
 */
import type { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { type Context, Effect } from "effect"
import type { MainConnection } from "../store/sqlite-client.js"
import { PAYLOAD_COLUMNS, type PayloadRow } from "./payload.js"

/** A delivery row as a claim returns it: one destination's share of one outbox batch. */
export interface ClaimedRow {
  readonly batch_id: string
  readonly destination_id: string
  /** How many of the batch's generations the destination gets. */
  readonly generations: number
  /** How many before them it wanted but the cap dropped. */
  readonly dropped: number
  readonly attempts: number
  readonly created_at: number
}

/** An outbox batch as stored: its items (JSON) and its sealed content, if any is left. */
export interface BatchRow {
  readonly id: string
  readonly items: string
  readonly content: string | null
}

export interface DeliveryQueue {
  /** Whether any row is due (a read: an idle queue costs no write; on SQLite an UPDATE takes the write lock even when it changes nothing). */
  readonly anyDue: (now: number) => Promise<boolean>
  /** Leases up to `limit` due rows until `until`, none of the `excluded` destinations'. */
  readonly claim: (now: number, until: number, excluded: ReadonlyArray<string>, limit: number) => Promise<ReadonlyArray<ClaimedRow>>
  readonly batches: (ids: ReadonlyArray<string>) => Promise<ReadonlyArray<BatchRow>>
  /** The `generations` rows of these ids (the payload's record part). */
  readonly records: (ids: ReadonlyArray<string>) => Promise<ReadonlyArray<PayloadRow>>
  /** A destination's rows of `batchIds` delivered; the content goes once every destination of its batch has it. */
  readonly delivered: (destinationId: string, batchIds: ReadonlyArray<string>, now: number) => Promise<void>
  readonly close: () => void
}

type Run = <A>(effect: Effect.Effect<A>) => Promise<A>

/** Through @effect/sql: Postgres (`FOR UPDATE SKIP LOCKED`: two processes never claim the same row) and an in-memory SQLite. */
export const sqlDeliveryQueue = (sql: SqlClient.SqlClient, run: Run): DeliveryQueue => {
  const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  return {
    anyDue: (now) =>
      run(
        sql<{ batch_id: string }>`SELECT batch_id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
          AND claimed_until < ${now} LIMIT 1`.pipe(Effect.orDie),
      ).then((rows) => rows.length > 0),
    claim: (now, until, excluded, limit) => {
      const skip = excluded.length === 0 ? sql`` : sql`AND destination_id NOT IN ${sql.in(excluded)}`
      const due = isPg
        ? sql`SELECT batch_id, destination_id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
            AND claimed_until < ${now} ${skip} ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED`
        : sql`SELECT batch_id, destination_id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
            AND claimed_until < ${now} ${skip} ORDER BY next_attempt_at LIMIT ${limit}`
      return run(
        sql<ClaimedRow>`UPDATE broadcast_deliveries SET claimed_until = ${until}
          WHERE (batch_id, destination_id) IN (${due}) AND state = 'pending' AND claimed_until < ${now}
          RETURNING batch_id, destination_id, generations, dropped, attempts, created_at`.pipe(Effect.orDie),
      )
    },
    batches: (ids) =>
      run(
        sql<BatchRow>`SELECT b.id, b.items, c.content FROM broadcast_batches b
          LEFT JOIN broadcast_contents c ON c.batch_id = b.id WHERE b.id IN ${sql.in(ids)}`.pipe(Effect.orDie),
      ),
    records: async (ids) => {
      const out: Array<PayloadRow> = []
      // Within Postgres's limit of bound parameters per statement.
      for (let i = 0; i < ids.length; i += 1000) {
        out.push(
          ...(await run(
            sql<PayloadRow>`SELECT ${sql.literal(PAYLOAD_COLUMNS.join(", "))} FROM generations WHERE id IN ${sql.in(ids.slice(i, i + 1000))}`.pipe(
              Effect.orDie,
            ),
          )),
        )
      }
      return out
    },
    delivered: (destinationId, batchIds, now) =>
      run(
        Effect.gen(function* () {
          yield* sql`UPDATE broadcast_deliveries SET state = 'delivered', claimed_until = 0, finished_at = ${now}, last_error = NULL
            WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(batchIds)}`
          yield* sql`DELETE FROM broadcast_contents WHERE batch_id IN ${sql.in(batchIds)}
            AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_contents.batch_id AND d.state <> 'delivered')`
          yield* sql`UPDATE observability_destinations SET last_success_at = ${new Date(now).toISOString()} WHERE id = ${destinationId}`
        }).pipe(Effect.orDie),
      ),
    close: () => undefined,
  }
}

/** Runs a write on another connection of the file where it cannot break a main-connection transaction. */
export type Beside = <A>(write: () => A) => Promise<A>

/** On the main connection's thread: at once when no transaction is open there, else inside its permit. */
export const besideMain =
  (sql: SqlClient.SqlClient, main: Context.Tag.Service<MainConnection>, run: Run): Beside =>
  <A>(write: () => A): Promise<A> => {
    if (!main.idle()) return run(sql.withTransaction(Effect.sync(write)).pipe(Effect.orDie))
    try {
      return Promise.resolve(write())
    } catch (e) {
      return Promise.reject(e)
    }
  }

/**
 * A SQLite file: prepared statements on a connection of the worker's own (lists bound as one JSON
 * array through `json_each`, so each statement is prepared once). Its writes go through `beside`:
 * a commit between a read and a write of a transaction on the main connection would fail that
 * write (src/store/sqlite-client.ts); from the delivery Worker, through the gate (src/store/sqlite-gate.ts).
 */
export const sqliteDeliveryQueue = (filename: string, beside: Beside): DeliveryQueue => {
  const db = new Database(filename, { readwrite: true, create: false, strict: true })
  try {
    db.run("PRAGMA busy_timeout = 5000")
    db.run("PRAGMA synchronous = NORMAL")
    const anyDue = db.query<{ batch_id: string }, [number, number]>(
      `SELECT batch_id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ?1 AND claimed_until < ?2 LIMIT 1`,
    )
    const claim = db.query<ClaimedRow, [number, number, string, number]>(
      `UPDATE broadcast_deliveries SET claimed_until = ?1
        WHERE (batch_id, destination_id) IN (
          SELECT batch_id, destination_id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ?2
            AND claimed_until < ?2 AND destination_id NOT IN (SELECT value FROM json_each(?3))
            ORDER BY next_attempt_at LIMIT ?4)
        AND state = 'pending' AND claimed_until < ?2
        RETURNING batch_id, destination_id, generations, dropped, attempts, created_at`,
    )
    const batches = db.query<BatchRow, [string]>(
      `SELECT b.id, b.items, c.content FROM broadcast_batches b LEFT JOIN broadcast_contents c ON c.batch_id = b.id
        WHERE b.id IN (SELECT value FROM json_each(?1))`,
    )
    const records = db.query<PayloadRow, [string]>(
      `SELECT ${PAYLOAD_COLUMNS.join(", ")} FROM generations WHERE id IN (SELECT value FROM json_each(?1))`,
    )
    const markDelivered = db.query<unknown, [number, string, string]>(
      `UPDATE broadcast_deliveries SET state = 'delivered', claimed_until = 0, finished_at = ?1, last_error = NULL
        WHERE destination_id = ?2 AND batch_id IN (SELECT value FROM json_each(?3))`,
    )
    const dropContents = db.query<unknown, [string]>(
      `DELETE FROM broadcast_contents WHERE batch_id IN (SELECT value FROM json_each(?1))
        AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_contents.batch_id AND d.state <> 'delivered')`,
    )
    const noteSuccess = db.query<unknown, [string, string]>(`UPDATE observability_destinations SET last_success_at = ?1 WHERE id = ?2`)
    // One commit for the three.
    const delivered = db.transaction((destinationId: string, ids: string, now: number) => {
      markDelivered.run(now, destinationId, ids)
      dropContents.run(ids)
      noteSuccess.run(new Date(now).toISOString(), destinationId)
    })
    return {
      anyDue: (now) => {
        try {
          return Promise.resolve(anyDue.get(now, now) !== null)
        } catch (e) {
          return Promise.reject(e)
        }
      },
      claim: (now, until, excluded, limit) => beside(() => claim.all(until, now, JSON.stringify(excluded), limit)),
      batches: (ids) => {
        try {
          return Promise.resolve(batches.all(JSON.stringify(ids)))
        } catch (e) {
          return Promise.reject(e)
        }
      },
      records: (ids) => {
        try {
          return Promise.resolve(records.all(JSON.stringify(ids)))
        } catch (e) {
          return Promise.reject(e)
        }
      },
      delivered: (destinationId, batchIds, now) => beside(() => delivered.immediate(destinationId, JSON.stringify(batchIds), now)),
      close: () => db.close(),
    }
  } catch (e) {
    db.close()
    throw e
  }
}
