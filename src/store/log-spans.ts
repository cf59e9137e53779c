/**
 * Where a key's and a model's generations lie in the log's id order (`generation_log_spans`,
 * migration 28): what the log reads to page one key or one model newest first, in place of an
 * index on `generations (key_hash, id)` and one on `(model, id)`, which wrote an entry each per
 * generation. A span is written per commit, key (or model) and stretch of ids, so a commit of one
 * key and one model writes two rows whatever its size: the SQLite writer of 400-row commits read
 * 8.4-10.1 µs of CPU a row with the indexes and 6.2-7.4 with the spans, 491 bytes a row on disk
 * against 307 (docs/console.md, "What it costs a request").
 *
 * A span holds the first and last id of its rows (ids start with their creation second: the log's
 * order is time order) and how many there are. Its ids are at most `SPAN_WIDTH_S` seconds apart,
 * so every span that holds an id below a bound ends below that bound plus `SPAN_WIDTH_S`: the log
 * finds them all by the span's last id (src/services/generation-log.ts, `alongSpans`).
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { type GenerationEntry, idSecondOf } from "../domain/generations.js"

/** The most seconds between the first and last id of one span. */
export const SPAN_WIDTH_S = 120

/**
 * A key's spans are filed under the first 16 characters of its hash (64 bits): a third of the
 * hash's bytes in the table and its index. Two keys that shared them would share spans, which
 * costs the reads of their logs a little more and no wrong row (a read matches the whole hash).
 */
export const keySpanValue = (keyHash: string): string => keyHash.slice(0, 16)

/** A row of `generation_log_spans` (a type alias, so it is a record `sql.insert` takes). */
export type LogSpanRow = {
  /** "key" (`value` is `keySpanValue` of a key's hash) or "model". */
  readonly field: "key" | "model"
  readonly value: string
  readonly first_id: string
  readonly last_id: string
  readonly row_count: number
}

const spansOfField = (field: LogSpanRow["field"], byValue: Map<string, Array<string>>, out: Array<LogSpanRow>) => {
  for (const [value, ids] of byValue) {
    ids.sort()
    let first = ids[0] as string
    let firstSecond = idSecondOf(first)
    let count = 0
    let last = first
    for (const id of ids) {
      const second = idSecondOf(id)
      if (second - firstSecond > SPAN_WIDTH_S) {
        out.push({ field, value, first_id: first, last_id: last, row_count: count })
        first = id
        firstSecond = second
        count = 0
      }
      last = id
      count++
    }
    out.push({ field, value, first_id: first, last_id: last, row_count: count })
  }
}

/** The spans of one commit's generations, by key and by model. */
export const logSpansOf = (entries: ReadonlyArray<Pick<GenerationEntry, "id" | "keyHash" | "model">>): Array<LogSpanRow> => {
  const keys = new Map<string, Array<string>>()
  const models = new Map<string, Array<string>>()
  for (const e of entries) {
    const key = keySpanValue(e.keyHash)
    const k = keys.get(key)
    if (k === undefined) keys.set(key, [e.id])
    else k.push(e.id)
    const m = models.get(e.model)
    if (m === undefined) models.set(e.model, [e.id])
    else m.push(e.id)
  }
  const out: Array<LogSpanRow> = []
  spansOfField("key", keys, out)
  spansOfField("model", models, out)
  return out
}

const INSERT = "INSERT INTO generation_log_spans (field, value, first_id, last_id, row_count) VALUES ($field, $value, $first_id, $last_id, $row_count)"

/** The spans added with a prepared statement on a SQLite connection, in the caller's transaction. */
export const logSpanAdderOn = (db: Database): ((rows: ReadonlyArray<LogSpanRow>) => void) => {
  const insert = db.prepare<unknown, [Record<string, string | number>]>(INSERT)
  return (rows) => {
    for (const r of rows) insert.run(r)
  }
}

/** The spans added through @effect/sql (Postgres, and SQLite without the prepared writer). */
export const addLogSpansWith = (sql: SqlClient.SqlClient, rows: ReadonlyArray<LogSpanRow>) =>
  sql`INSERT INTO generation_log_spans ${sql.insert(rows as Array<LogSpanRow>)}`
