/**
 * Retention (docs/operations.md#retention): generation records older than
 * `retention.generations_days` and stored content older than `retention.content_days` are deleted
 * by a background job, in batches of 200 rows with a pause between, so the ledger writer
 * waits at most one batch (SQLite statements run one at a time on the event loop; on Postgres a
 * batch locks only the old rows it deletes). The daily spend rollups (`spend_daily`) are kept:
 * limits, credits and usage windows read them, not the records. Off (kept forever) by default.
 *
 * A record's age is read from its id (`gen-<unix seconds>-…`, src/domain/generations.ts), so a
 * batch is a range of the primary key: no index for the job, no cost per ledger row.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schedule } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { idBoundAt } from "../domain/generations.js"

/**
 * Rows per statement. SQLite runs a batch on the event loop: 500 records with 4 KB of content each
 * took ~17 ms a batch (content and records), so 200 (~7 ms); Postgres runs it off the process.
 */
export const RETENTION_BATCH = 200
/** Between two batches: the ledger writer and requests get the database (and the event loop). */
const PAUSE_MS = 20
/** How often the job looks for rows past their time. */
const EVERY_MS = 10 * 60_000
/** The first sweep, after start-up's own work. */
const FIRST_AFTER_MS = 30_000

/** The smallest id of a generation created at or after `ms`: older ids sort before it. */
export const idBoundOf = (ms: number) => idBoundAt(Math.floor(ms / 1000))

export interface SweepResult {
  readonly generations: number
  readonly contents: number
}

export class Retention extends Effect.Service<Retention>()("Retention", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const { generationsMs, contentMs } = (yield* GatewayConfig).retention
    // A record's content goes with it at the latest.
    const contentKeptMs = contentMs === undefined ? generationsMs : generationsMs === undefined ? contentMs : Math.min(contentMs, generationsMs)

    /** One batch of content older than `bound`: deleted, its records marked as without content. Rows deleted. */
    const contentBatch = (bound: string, limit: number) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const gone = yield* sql<{ generation_id: string }>`DELETE FROM generation_content WHERE generation_id IN (
            SELECT generation_id FROM generation_content WHERE generation_id >= 'gen-' AND generation_id < ${bound}
            ORDER BY generation_id LIMIT ${limit}) RETURNING generation_id`
          if (gone.length > 0) {
            yield* sql`UPDATE generations SET has_content = 0 WHERE ${sql.in("id", gone.map((r) => r.generation_id))}`
          }
          return gone.length
        }),
      )

    /** One batch of records older than `bound` (and, to be sure, created before `beforeIso`). Rows deleted. */
    const generationBatch = (bound: string, beforeIso: string, limit: number) =>
      Effect.map(
        sql<{ id: string }>`DELETE FROM generations WHERE id IN (
          SELECT id FROM generations WHERE id >= 'gen-' AND id < ${bound} AND created_at < ${beforeIso}
          ORDER BY id LIMIT ${limit}) RETURNING id`,
        (rows) => rows.length,
      )

    /** One batch of the log's spans (src/store/log-spans.ts) that end before `bound`. Rows deleted. */
    const spanBatch = (bound: string, limit: number) =>
      Effect.map(
        sql<{ last_id: string }>`DELETE FROM generation_log_spans WHERE last_id IN (
          SELECT last_id FROM generation_log_spans WHERE last_id < ${bound} ORDER BY last_id LIMIT ${limit}) RETURNING last_id`,
        (rows) => rows.length,
      )

    /** Runs `batch` until one deletes fewer than `limit` rows, pausing between; the rows deleted in all. */
    const drain = (batch: Effect.Effect<number, unknown>, limit: number, pauseMs: number) =>
      Effect.iterate(
        { total: 0, last: limit },
        {
          while: (s) => s.last >= limit,
          body: (s) => Effect.map(Effect.zipLeft(batch, Effect.sleep(pauseMs)), (n) => ({ total: s.total + n, last: n })),
        },
      ).pipe(Effect.map((s) => s.total))

    /** One pass: everything past its time at `now`, in batches of `limit` rows. */
    const sweep = (limit: number = RETENTION_BATCH, pauseMs: number = PAUSE_MS) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const contents =
          contentKeptMs === undefined ? 0 : yield* drain(contentBatch(idBoundOf(now - contentKeptMs), limit), limit, pauseMs)
        if (generationsMs === undefined) return { generations: 0, contents } satisfies SweepResult
        const bound = idBoundOf(now - generationsMs)
        const generations = yield* drain(generationBatch(bound, new Date(now - generationsMs).toISOString(), limit), limit, pauseMs)
        // The spans of the records gone: a span that ends after the bound stays (its older rows are simply not found).
        yield* drain(spanBatch(bound, limit), limit, pauseMs)
        return { generations, contents } satisfies SweepResult
      }).pipe(Effect.orDie)

    if (contentKeptMs !== undefined) {
      yield* sweep().pipe(
        Effect.tap((r) => (r.generations + r.contents > 0 ? Effect.logInfo(`retention: deleted ${r.generations} generation records and ${r.contents} stored contents`) : Effect.void)),
        Effect.catchAllCause((cause) => Effect.logWarning("retention: a sweep failed; trying again at the next one", cause)),
        Effect.repeat(Schedule.spaced(EVERY_MS)),
        Effect.delay(FIRST_AFTER_MS),
        Effect.forkScoped,
      )
    }

    return { sweep } as const
  }),
}) {}
