/**
 * What becomes of claimed delivery rows once a send has an outcome: retried later with backoff,
 * dead after their last attempt (or at once when they cannot be sent), handed back unsent (the
 * breaker open, the pass out of time), or deleted (their destination gone, or its filters refuse
 * every generation). The common outcome, delivered, is the queue's prepared statement
 * (src/broadcast/deliveries.ts); these rarer ones go through @effect/sql.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { now as clockNow } from "../clock.js"
import type { ClaimedRow } from "./deliveries.js"
import { count, type EngineState, generationsIn } from "./engine-state.js"
import { deleteDeliveries } from "./queue.js"
import { backoffMs, type SendResult } from "./send.js"

/** The destination's rows of `batchIds` dead with `error`: never tried again. */
export const markDead = ({ deps: { sql, run } }: EngineState, destinationId: string, batchIds: ReadonlyArray<string>, error: string) =>
  batchIds.length === 0
    ? Promise.resolve()
    : run(
        sql`UPDATE broadcast_deliveries SET state = 'dead', claimed_until = 0, finished_at = ${clockNow()},
          last_error = ${error} WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(batchIds)}`.pipe(Effect.asVoid, Effect.orDie),
      )

/** The destination's last error, as its API shows it. */
export const noteError = ({ deps: { sql, run } }: EngineState, destinationId: string, error: string) =>
  run(
    sql`UPDATE observability_destinations SET last_error = ${error}, last_error_at = ${new Date().toISOString()} WHERE id = ${destinationId}`.pipe(
      Effect.asVoid,
      Effect.orDie,
    ),
  )

/** A failed send: each row retried later, or dead after its last attempt. */
export const markFailed = async (
  state: EngineState,
  destinationId: string,
  rows: ReadonlyArray<ClaimedRow>,
  result: Extract<SendResult, { ok: false }>,
  kind: string,
) => {
  const { sql, run, settings } = state.deps
  const now = clockNow()
  const dead: Array<ClaimedRow> = []
  const retry = new Map<number, Array<ClaimedRow>>()
  for (const row of rows) {
    const attempts = Number(row.attempts) + 1
    if (attempts >= settings.maxAttempts) dead.push(row)
    else {
      const at = now + backoffMs(settings.retryBaseMs, attempts, result.retryAfterMs)
      const group = retry.get(at) ?? []
      group.push(row)
      retry.set(at, group)
    }
  }
  await run(
    Effect.gen(function* () {
      for (const [at, group] of retry) {
        yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, next_attempt_at = ${at}, claimed_until = 0,
          last_error = ${result.error} WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(group.map((r) => r.batch_id))}`
      }
      if (dead.length > 0) {
        yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, state = 'dead', claimed_until = 0,
          finished_at = ${now}, last_error = ${result.error}
          WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(dead.map((r) => r.batch_id))}`
      }
    }).pipe(Effect.orDie),
  )
  count(state, kind, "failed", generationsIn(rows) - generationsIn(dead))
  count(state, kind, "dead", generationsIn(dead))
}

/** The claim of these rows handed back unsent: due again at `at`, no attempt counted. */
export const release = ({ deps: { sql, run } }: EngineState, destinationId: string, batchIds: ReadonlyArray<string>, at: number) =>
  batchIds.length === 0
    ? Promise.resolve()
    : run(
        sql`UPDATE broadcast_deliveries SET claimed_until = 0, next_attempt_at = ${at}
          WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(batchIds)}`.pipe(Effect.asVoid, Effect.orDie),
      )

/** The destination's rows of `batchIds` deleted (and the batches no row needs any more). */
export const forget = ({ deps: { sql, run } }: EngineState, destinationId: string, batchIds: ReadonlyArray<string>) =>
  batchIds.length === 0 ? Promise.resolve() : run(deleteDeliveries(destinationId, batchIds).pipe(Effect.provideService(SqlClient.SqlClient, sql)))
