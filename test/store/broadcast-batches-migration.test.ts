/**
 * Migration 17 (the broadcast outbox by commit batch): 0014's pending and dead rows are carried
 * over, each as a batch of one generation with its content as it was sealed; delivered rows are
 * not (they only waited for the retention). The worker reads a carried-over content (one
 * generation's, not a list) as the batch's list.
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { contentsOf, type OutboxItems } from "../../src/broadcast/payload.js"
import { migrate } from "../../src/store/Store.js"
import { engine } from "../support/db.js"
import { schemaBefore, useDatabase } from "../support/migrations.js"

const run = useDatabase()

describe(`the broadcast_batches migration (${engine})`, () => {
  test("pending and dead rows become one-generation batches with their content, attempts and errors; delivered rows are not kept", async () => {
    const after = await run(
      Effect.gen(function* () {
        const sql = yield* schemaBefore(17)
        const row = (id: string, state: string, content: string | null, attempts: number, error: string | null) =>
          sql`INSERT INTO broadcast_deliveries (id, destination_id, generation_id, created_at, payload, content, state, attempts,
            next_attempt_at, claimed_until, last_error, finished_at)
            VALUES (${`${id}:d-1`}, 'd-1', ${id}, 1000, ${JSON.stringify({ id, model: "m" })}, ${content}, ${state}, ${attempts},
            2000, 0, ${error}, ${state === "pending" ? null : 3000})`
        yield* row("gen-a", "pending", "sealed-a", 2, "HTTP 500")
        yield* row("gen-b", "dead", null, 8, "HTTP 503")
        yield* row("gen-c", "delivered", null, 1, null)
        const ran = yield* migrate
        return {
          ran,
          batches: yield* sql<{ id: string; created_at: number; items: string }>`SELECT id, created_at, items FROM broadcast_batches ORDER BY id`,
          contents: yield* sql<{ batch_id: string; content: string }>`SELECT batch_id, content FROM broadcast_contents`,
          deliveries: yield* sql<Record<string, unknown>>`SELECT batch_id, destination_id, generations, dropped, state, attempts,
            next_attempt_at, last_error FROM broadcast_deliveries ORDER BY batch_id`,
        }
      }),
    )
    expect(after.ran).toContain("17_broadcast_batches")
    expect(after.batches.map((b) => [b.id, Number(b.created_at), JSON.parse(b.items) as OutboxItems])).toEqual([
      ["gen-a:d-1", 1000, { destinations: ["d-1"], generations: [{ payload: { id: "gen-a", model: "m" } as never, to: [0] }] }],
      ["gen-b:d-1", 1000, { destinations: ["d-1"], generations: [{ payload: { id: "gen-b", model: "m" } as never, to: [0] }] }],
    ])
    expect(after.contents).toEqual([{ batch_id: "gen-a:d-1", content: "sealed-a" }])
    expect(after.deliveries.map((d) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, typeof v === "bigint" ? Number(v) : v])))).toEqual([
      { batch_id: "gen-a:d-1", destination_id: "d-1", generations: 1, dropped: 0, state: "pending", attempts: 2, next_attempt_at: 2000, last_error: "HTTP 500" },
      { batch_id: "gen-b:d-1", destination_id: "d-1", generations: 1, dropped: 0, state: "dead", attempts: 8, next_attempt_at: 2000, last_error: "HTTP 503" },
    ])
  })

  test("a carried-over content is one generation's: read as a list of one; a batch's list is read as it is", () => {
    const one = { input: [{ role: "user", content: "hi" }], output: "hello", reasoning: null }
    expect(contentsOf(one)).toEqual([one])
    expect(contentsOf([one, null])).toEqual([one, null])
  })
})
