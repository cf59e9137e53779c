/**
 * The log's spans (src/store/log-spans.ts): a commit's generations as stretches of ids per key
 * and per model, none wider than SPAN_WIDTH_S; and migration 28, which makes them for the rows
 * already written and drops the two per-row log indexes they replace.
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { idBoundAt, idSecondOf, newGenerationId } from "../../src/domain/generations.js"
import { toRow } from "../../src/store/ledger.js"
import { keySpanValue, type LogSpanRow, logSpansOf, SPAN_WIDTH_S } from "../../src/store/log-spans.js"
import { migrate } from "../../src/store/Store.js"
import { engine } from "../support/db.js"
import { generationEntry } from "../support/generations.js"
import { schemaBefore, useDatabase } from "../support/migrations.js"

const T0 = 1_790_000_000
const idAt = (second: number) => newGenerationId(second * 1000 + 7)

/** Whether every id of `key` (or model) lies in one span of it, and every span is within the width. */
const covered = (spans: ReadonlyArray<LogSpanRow>, field: LogSpanRow["field"], value: string, ids: ReadonlyArray<string>) =>
  ids.every((id) => spans.some((s) => s.field === field && s.value === value && s.first_id <= id && id <= s.last_id))

describe("logSpansOf", () => {
  test("one span per key and per model for ids within the width, split where they spread wider", () => {
    const near = [T0, T0 + 5, T0 + SPAN_WIDTH_S].map(idAt)
    const far = idAt(T0 + SPAN_WIDTH_S + 1)
    const entries = [
      ...near.map((id) => ({ id, keyHash: "a", model: "m/one" })),
      { id: far, keyHash: "a", model: "m/two" },
      { id: idAt(T0 + 2), keyHash: "b", model: "m/one" },
    ]
    const spans = logSpansOf(entries)
    const sorted = (field: LogSpanRow["field"], value: string) =>
      spans.filter((s) => s.field === field && s.value === value).map((s) => [s.first_id, s.last_id, s.row_count])
    expect(sorted("key", "a")).toEqual([
      [near[0], near[2], 3],
      [far, far, 1],
    ])
    expect(sorted("key", "b")).toEqual([[entries[4]?.id, entries[4]?.id, 1]])
    expect(sorted("model", "m/one")).toEqual([[near[0], near[2], 4]])
    expect(sorted("model", "m/two")).toEqual([[far, far, 1]])
    for (const s of spans) expect(idSecondOf(s.last_id) - idSecondOf(s.first_id)).toBeLessThanOrEqual(SPAN_WIDTH_S)
  })

  test("a key's spans are filed under the first 16 characters of its hash", () => {
    const hash = "0123456789abcdef".repeat(4)
    expect(logSpansOf([{ id: idAt(T0), keyHash: hash, model: "m" }]).find((s) => s.field === "key")?.value).toBe("0123456789abcdef")
  })

  test("an id's second, and the least id of a second", () => {
    expect(idSecondOf(idAt(T0))).toBe(T0)
    expect(idSecondOf("not-an-id")).toBe(0)
    expect(idAt(T0 + 1) < idBoundAt(T0 + 2)).toBe(true)
    expect(idAt(T0 + 2) > idBoundAt(T0 + 2)).toBe(true)
  })
})

const run = useDatabase()

describe(`the generation_log_spans migration (${engine})`, () => {
  test("the rows already written get spans that cover each of them, and the per-row log indexes go", async () => {
    const after = await run(
      Effect.gen(function* () {
        const sql = yield* schemaBefore(28)
        // Two keys and two models, over an hour: some rows seconds apart, some minutes.
        const entries = Array.from({ length: 40 }, (_, i) =>
          generationEntry({
            id: idAt(T0 + i * (i % 3 === 0 ? 97 : 11)),
            keyHash: i % 2 === 0 ? "a".repeat(64) : "b".repeat(64),
            model: i % 5 === 0 ? "demo/byok" : "demo/echo",
          }),
        )
        for (const e of entries) yield* sql`INSERT INTO generations ${sql.insert(toRow(e))}`
        const ran = yield* migrate
        const spans = yield* sql<LogSpanRow>`SELECT field, value, first_id, last_id, row_count FROM generation_log_spans`
        const indexes = yield* sql.onDialectOrElse({
          pg: () => sql<{ name: string }>`SELECT indexname AS name FROM pg_indexes WHERE tablename = 'generations'`,
          orElse: () => sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'generations'`,
        })
        return { ran, entries, spans: spans.map((s) => ({ ...s, row_count: Number(s.row_count) })), indexes: indexes.map((r) => r.name) }
      }),
    )
    expect(after.ran).toContain("28_generation_log_spans")
    for (const hash of ["a".repeat(64), "b".repeat(64)]) {
      const ids = after.entries.filter((e) => e.keyHash === hash).map((e) => e.id)
      const value = keySpanValue(hash)
      expect(covered(after.spans, "key", value, ids)).toBe(true)
      expect(after.spans.filter((s) => s.field === "key" && s.value === value).reduce((n, s) => n + s.row_count, 0)).toBe(ids.length)
    }
    for (const value of ["demo/byok", "demo/echo"]) {
      const ids = after.entries.filter((e) => e.model === value).map((e) => e.id)
      expect(covered(after.spans, "model", value, ids)).toBe(true)
    }
    for (const s of after.spans) expect(idSecondOf(s.last_id) - idSecondOf(s.first_id)).toBeLessThanOrEqual(SPAN_WIDTH_S)
    expect(after.indexes).not.toContain("generations_key_id")
    expect(after.indexes).not.toContain("generations_model_id")
    expect(after.indexes).toContain("generations_session_id")
  }, 30_000)
})
