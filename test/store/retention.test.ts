/**
 * Retention (docs/operations.md#retention): records older than `retention.generations_days` and
 * content older than `retention.content_days` are deleted in batches (the log's spans of the records
 * with them); younger ones stay, and so do the daily spend rollups. Rows are backdated through their ids and `created_at`, as the ledger
 * writes them.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newGenerationId } from "../../src/domain/generations.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { idBoundOf, Retention } from "../../src/services/Retention.js"
import { keySpanValue } from "../../src/store/log-spans.js"
import { generationEntry } from "../support/generations.js"
import { servicesRuntime } from "../support/services.js"

const DAY = 86_400_000
const CONTENT = { input: { prompt: "a stored prompt" }, output: { completion: "a stored answer", reasoning: null } }

/** `count` records (with content) created `daysAgo` days ago, under the key `keyHash`; their ids. */
const backdated = (daysAgo: number, count: number, keyHash: string) =>
  Effect.gen(function* () {
    const store = yield* GenerationStore
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) {
      const at = Date.now() - daysAgo * DAY - i * 1000
      const entry = generationEntry({ id: newGenerationId(at), createdAt: new Date(at).toISOString(), keyHash, content: CONTENT })
      store.recordSync(entry)
      ids.push(entry.id)
    }
    yield* store.flush
    return ids
  })

const counts = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const n = (rows: ReadonlyArray<{ n: unknown }>) => Number(rows[0]?.n)
  return {
    generations: n(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM generations`),
    contents: n(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM generation_content`),
    flagged: n(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM generations WHERE has_content = 1`),
    spendDays: n(yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM spend_daily`),
    keySpans: (yield* sql<{ value: string }>`SELECT value FROM generation_log_spans WHERE field = 'key'`).map((r) => r.value).sort(),
  }
})

describe("retention", () => {
  test("records past generations_days are deleted with their content in batches; younger ones and the spend rollups stay", async () => {
    const { runtime, dispose } = await servicesRuntime({ retention: { generationsMs: 30 * DAY, contentMs: undefined } })
    try {
      await runtime.runPromise(backdated(40, 7, "a".repeat(64)))
      const young = await runtime.runPromise(backdated(10, 3, "b".repeat(64)))
      const before = await runtime.runPromise(counts)
      expect(before.generations).toBe(10)
      // Batches of 2 rows: the seven old records take four.
      const swept = await runtime.runPromise(Effect.flatMap(Retention, (r) => r.sweep(2, 0)))
      expect(swept).toEqual({ generations: 7, contents: 7 })
      const after = await runtime.runPromise(counts)
      expect(after.generations).toBe(3)
      expect(after.contents).toBe(3)
      // The log's spans of the records gone go too (src/store/log-spans.ts); the young key's stay.
      expect(before.keySpans).toContain(keySpanValue("a".repeat(64)))
      expect(after.keySpans).not.toContain(keySpanValue("a".repeat(64)))
      expect(after.keySpans).toContain(keySpanValue("b".repeat(64)))
      // The daily rollups the limits and usage windows read are not touched.
      expect(after.spendDays).toBe(before.spendDays)
      const kept = await runtime.runPromise(Effect.flatMap(GenerationStore, (g) => Effect.forEach(young, (id) => g.get(id))))
      expect(kept.every((g) => g._tag === "Some")).toBe(true)
      // A second pass finds nothing.
      expect(await runtime.runPromise(Effect.flatMap(Retention, (r) => r.sweep(2, 0)))).toEqual({ generations: 0, contents: 0 })
    } finally {
      await dispose()
    }
  })

  test("content past content_days is deleted and its record says it has none; the record stays", async () => {
    const { runtime, dispose } = await servicesRuntime({ retention: { generationsMs: undefined, contentMs: 7 * DAY } })
    try {
      const old = await runtime.runPromise(backdated(8, 4, "c".repeat(64)))
      await runtime.runPromise(backdated(1, 2, "d".repeat(64)))
      const swept = await runtime.runPromise(Effect.flatMap(Retention, (r) => r.sweep(3, 0)))
      expect(swept).toEqual({ generations: 0, contents: 4 })
      const after = await runtime.runPromise(counts)
      expect(after).toMatchObject({ generations: 6, contents: 2, flagged: 2 })
      const store = await runtime.runPromise(GenerationStore)
      const record = await runtime.runPromise(store.get(old[0] as string))
      expect(record._tag === "Some" && record.value.hasContent).toBe(false)
      expect((await runtime.runPromise(store.getContent(old[0] as string)))._tag).toBe("None")
    } finally {
      await dispose()
    }
  })

  test("without retention settings nothing is deleted (kept forever, the default)", async () => {
    const { runtime, dispose } = await servicesRuntime()
    try {
      await runtime.runPromise(backdated(3650, 3, "e".repeat(64)))
      expect(await runtime.runPromise(Effect.flatMap(Retention, (r) => r.sweep()))).toEqual({ generations: 0, contents: 0 })
      expect((await runtime.runPromise(counts)).generations).toBe(3)
    } finally {
      await dispose()
    }
  })

  test("a record's age is read from its id: ids of an earlier second sort before the bound, of that second after it", () => {
    const at = Date.UTC(2026, 0, 1)
    expect(newGenerationId(at - 1000) < idBoundOf(at)).toBe(true)
    expect(newGenerationId(at) < idBoundOf(at)).toBe(false)
    expect(newGenerationId(at + 999) < idBoundOf(at)).toBe(false)
  })
})
