import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The broadcast outbox by commit batch, for broadcast's cost per request: 0014 wrote, per generation and
 * destination, a row of ~1.5 KB (the payload and the sealed content again for each destination,
 * two indexes), and the worker claimed and updated each of them: ~50 µs of SQLite per generation
 * with three destinations, a third of a request. Now the ledger's transaction writes one
 * `broadcast_batches` row for the generations it commits that some destination wants (their
 * payloads and which destinations want each), their content sealed once in `broadcast_contents`,
 * and one small `broadcast_deliveries` row per destination that wants any of them: its lease,
 * attempts and state cover its generations of that batch (`generations` counts them; the first
 * `dropped` of them are skipped: the cap per destination took them). The content is deleted once
 * every delivery of its batch is delivered; a batch goes when its last delivery row does.
 * 0014's pending and dead rows are carried over, each as a batch of one generation (its content
 * stays as it was sealed: one generation's, not a list; the worker reads both).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE broadcast_batches (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    items TEXT NOT NULL
  )`
  // A row of its own: clearing it on delivery deletes a row instead of rewriting the batch's.
  yield* sql`CREATE TABLE broadcast_contents (
    batch_id TEXT PRIMARY KEY,
    content TEXT NOT NULL
  )`
  yield* sql`DROP INDEX broadcast_deliveries_due`
  yield* sql`DROP INDEX broadcast_deliveries_destination`
  yield* sql`ALTER TABLE broadcast_deliveries RENAME TO broadcast_deliveries_0014`
  yield* sql`CREATE TABLE broadcast_deliveries (
    batch_id TEXT NOT NULL,
    destination_id TEXT NOT NULL,
    generations INTEGER NOT NULL,
    dropped INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    finished_at BIGINT,
    PRIMARY KEY (batch_id, destination_id)
  )`
  yield* sql`CREATE INDEX broadcast_deliveries_due ON broadcast_deliveries (state, next_attempt_at)`
  yield* sql`CREATE INDEX broadcast_deliveries_destination ON broadcast_deliveries (destination_id, state, created_at)`
  // Destination ids are generated (letters, digits, dashes): safe inside a JSON string as they are.
  yield* sql`INSERT INTO broadcast_batches (id, created_at, items)
    SELECT id, created_at, '{"destinations":["' || destination_id || '"],"generations":[{"payload":' || payload || ',"to":[0]}]}'
    FROM broadcast_deliveries_0014 WHERE state IN ('pending', 'dead')`
  yield* sql`INSERT INTO broadcast_contents (batch_id, content)
    SELECT id, content FROM broadcast_deliveries_0014 WHERE state IN ('pending', 'dead') AND content IS NOT NULL`
  yield* sql`INSERT INTO broadcast_deliveries (batch_id, destination_id, generations, created_at, state, attempts, next_attempt_at,
      claimed_until, last_error, finished_at)
    SELECT id, destination_id, 1, created_at, state, attempts, next_attempt_at, 0, last_error, finished_at
    FROM broadcast_deliveries_0014 WHERE state IN ('pending', 'dead')`
  yield* sql`DROP TABLE broadcast_deliveries_0014`
})
