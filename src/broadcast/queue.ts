/** Operations on the outbox that need no worker: the API's and the CLI's redelivery of dead rows, and deletions. */
import { now as clockNow } from "../clock.js"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Puts a destination's dead deliveries back in the queue, due now; how many generations they hold. */
export const requeueDead = (destinationId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ generations: number }>`UPDATE broadcast_deliveries SET state = 'pending', attempts = 0, next_attempt_at = ${clockNow()},
      claimed_until = 0, finished_at = NULL, last_error = NULL
      WHERE destination_id = ${destinationId} AND state = 'dead' RETURNING generations`.pipe(
      Effect.map((rows) => rows.reduce((n, r) => n + Number(r.generations), 0)),
      Effect.orDie,
    ),
  )

/**
 * Deletes a destination's delivery rows (those of `batchIds`, or all of them) and the outbox
 * batches no other destination's row needs any more. Run it inside a transaction when it must
 * commit with something else (the destination's own deletion).
 */
export const deleteDeliveries = (destinationId: string, batchIds?: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const which = batchIds === undefined ? sql`` : sql`AND batch_id IN ${sql.in(batchIds)}`
    const theirs = sql`SELECT batch_id FROM broadcast_deliveries WHERE destination_id = ${destinationId} ${which}`
    return Effect.all([
      sql`DELETE FROM broadcast_contents WHERE batch_id IN (${theirs})
        AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_contents.batch_id AND d.destination_id <> ${destinationId})`,
      sql`DELETE FROM broadcast_batches WHERE id IN (${theirs})
        AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_batches.id AND d.destination_id <> ${destinationId})`,
      sql`DELETE FROM broadcast_deliveries WHERE destination_id = ${destinationId} ${which}`,
    ]).pipe(Effect.asVoid, Effect.orDie)
  })
