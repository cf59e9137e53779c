/** Operations on the outbox that need no worker: the API's and the CLI's redelivery of dead rows. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Puts a destination's dead deliveries back in the queue, due now; how many. */
export const requeueDead = (destinationId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: string }>`UPDATE broadcast_deliveries SET state = 'pending', attempts = 0, next_attempt_at = ${Date.now()},
      claimed_until = 0, finished_at = NULL, last_error = NULL
      WHERE destination_id = ${destinationId} AND state = 'dead' RETURNING id`.pipe(
      Effect.map((rows) => rows.length),
      Effect.orDie,
    ),
  )
