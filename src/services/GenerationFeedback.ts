/**
 * Feedback on a generation (`POST /generation/feedback`, docs/api.md): kept as rows beside the
 * ledger, any number per generation, for the operator to read (who sent it, with which key,
 * the category and the comment). Nothing in routing reads them.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"
import type { FeedbackCategory } from "../domain/generations.js"

export interface Feedback {
  readonly generationId: string
  readonly userId: string
  readonly keyHash: string
  readonly category: FeedbackCategory
  readonly comment: string | undefined
}

export class GenerationFeedback extends Effect.Service<GenerationFeedback>()("GenerationFeedback", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const submit = (f: Feedback) =>
      Effect.gen(function* () {
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        yield* sql`INSERT INTO generation_feedback (id, generation_id, user_id, key_hash, category, comment, created_at)
          VALUES (${crypto.randomUUID()}, ${f.generationId}, ${f.userId}, ${f.keyHash}, ${f.category}, ${f.comment ?? null}, ${now})`
      }).pipe(Effect.orDie)

    /** The feedback on a generation, oldest first. */
    const of = (generationId: string) =>
      sql<{ category: string; comment: string | null; user_id: string; key_hash: string; created_at: string }>`SELECT
          category, comment, user_id, key_hash, created_at FROM generation_feedback WHERE generation_id = ${generationId}
          ORDER BY created_at, id`.pipe(Effect.orDie)

    return { submit, of } as const
  }),
}) {}
