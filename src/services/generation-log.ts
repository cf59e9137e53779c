/**
 * The generation log's pages (GET /v1/generations, the console's Logs page), newest first: keyset
 * on the id (ids start with their creation second, so id order is time order and a time range is
 * an id range), no OFFSET: the hundredth page costs what the first does. Filters that match often
 * ride the primary key; a session's page its index; one key's or one model's page its spans
 * (src/store/log-spans.ts). docs/console.md, "How it stays fast".
 */
import type { SqlClient } from "@effect/sql"
import type { Fragment } from "@effect/sql/Statement"
import { Effect } from "effect"
import { endOf, idBoundOf, isoOf, LOG_PAGE_DEFAULT, type LogParams } from "../domain/activity.js"
import { idBoundAt, idSecondOf } from "../domain/generations.js"
import { toNanoUsd } from "../domain/pricing.js"
import { fromRow, type GenerationRow } from "../store/ledger.js"
import { keySpanValue, SPAN_WIDTH_S } from "../store/log-spans.js"
import type { StoredGeneration } from "./GenerationStore.js"

/** Longest a request's id may be made after its creation time (its pre-model stages), as the log's time range reads it. */
const ID_SLACK_S = 3600
/** Spans read at a time along one key's or model's log (`alongSpans`). */
const SPANS_PER_READ = 200
/** The most rows of the key the spans of one round hold (the rounds double up to it), and the rounds a page takes. */
const SPAN_ROWS_MAX = 20_000
const SPAN_ROUNDS = 12

/**
 * Rows of one key's (or model's) log below `upper` and at or above `lower`, newest first, at
 * most `want`: read along its spans (src/store/log-spans.ts), so a page reads the stretches of
 * ids that hold the key's rows and not the others between them. Each round takes the spans
 * that reach below the bound from above it (at most the spans' width above: `reachingBelow`)
 * and, newest first, the spans ending below it until they hold twice what is wanted (more each
 * round: filters beside the key may pass few rows). At or above the last one's end every row of
 * the key is in a span taken, so those rows are final and the next round starts there. `next`:
 * where to go on when the rounds ran out first.
 */
const alongSpans = (
  sql: SqlClient.SqlClient,
  span: { readonly field: "key" | "model"; readonly value: string },
  where: ReadonlyArray<Fragment>,
  upper: string | undefined,
  lower: string | undefined,
  want: number,
) =>
  Effect.gen(function* () {
    type Span = { first_id: string; last_id: string; row_count: number | string }
    const ofSpan = [sql`field = ${span.field}`, sql`value = ${span.value}`]
    const reachingBelow = (bound: string) =>
      sql<Span>`SELECT first_id, last_id, row_count FROM generation_log_spans WHERE ${sql.and([
        ...ofSpan,
        sql`last_id >= ${bound}`,
        sql`last_id < ${idBoundAt(idSecondOf(bound) + SPAN_WIDTH_S + 1)}`,
        sql`first_id < ${bound}`,
      ])}`
    const endingBelow = (bound: string | undefined) =>
      sql<Span>`SELECT first_id, last_id, row_count FROM generation_log_spans WHERE ${sql.and([
        ...ofSpan,
        ...(bound === undefined ? [] : [sql`last_id < ${bound}`]),
        ...(lower === undefined ? [] : [sql`last_id >= ${lower}`]),
      ])} ORDER BY last_id DESC LIMIT ${SPANS_PER_READ}`
    const found: Array<GenerationRow> = []
    let bound = upper
    let target = 2 * want
    for (let round = 0; round < SPAN_ROUNDS; round++) {
      const reaching = bound === undefined ? [] : yield* reachingBelow(bound)
      const below = yield* endingBelow(bound)
      let rows = 0
      for (const s of reaching) rows += Number(s.row_count)
      let taken = 0
      while (taken < below.length && (taken === 0 || rows < target)) rows += Number(below[taken++]?.row_count ?? 0)
      // Every span not taken ends below the last one taken: at or above its end, nothing is missed.
      const floor = taken === below.length && below.length < SPANS_PER_READ ? undefined : below[taken - 1]?.last_id
      const spans = [...reaching, ...below.slice(0, taken)]
      if (spans.length === 0) return { rows: found, next: undefined }
      const got = yield* sql<GenerationRow>`SELECT * FROM generations WHERE ${sql.and([
        sql.or(spans.map((s) => sql`id BETWEEN ${s.first_id} AND ${s.last_id}`)),
        ...where,
        ...(bound === undefined ? [] : [sql`id < ${bound}`]),
        ...(floor === undefined ? [] : [sql`id >= ${floor}`]),
      ])} ORDER BY id DESC LIMIT ${want - found.length}`
      found.push(...got)
      if (found.length >= want || floor === undefined) return { rows: found, next: undefined }
      bound = floor
      target = Math.min(2 * target, SPAN_ROWS_MAX)
    }
    return { rows: found, next: bound }
  })

/**
 * One page of the log: `parts`, the conditions of what the caller may see and asked for (its key,
 * model, workspace), to which the page's own are added; `key`, the one key among them, if any.
 * Without a key, model or session, a page reads at most `limit + 1` rows through the primary key.
 */
export const makeLogPage =
  (sql: SqlClient.SqlClient) =>
  (parts: Array<Fragment>, key: string | undefined, params: LogParams) =>
  Effect.gen(function* () {
    const limit = params.limit ?? LOG_PAGE_DEFAULT
    // The id's second is the request's, taken after its pre-model stages: the id bounds the
    // range through the index (an hour's slack above), the creation time decides it.
    const lower = params.from === undefined ? undefined : idBoundOf(params.from)
    const end = params.to === undefined ? undefined : endOf(params.to)
    const below = end === undefined ? undefined : idBoundOf(end, ID_SLACK_S)
    // Rows below the cursor or the range's end, whichever is lower.
    const upper = params.cursor !== undefined && (below === undefined || params.cursor < below) ? params.cursor : below
    if (lower !== undefined) parts.push(sql`id >= ${lower}`)
    if (params.from !== undefined) parts.push(sql`created_at >= ${isoOf(params.from)}`)
    if (end !== undefined) parts.push(sql`created_at < ${end}`)
    if (params.provider !== undefined) parts.push(sql`provider_name = ${params.provider}`)
    if (params.status !== undefined) parts.push(sql`status = ${params.status}`)
    if (params.session_id !== undefined) parts.push(sql`session_id = ${params.session_id}`)
    if (params.min_cost !== undefined) parts.push(sql`total_cost_nano >= ${toNanoUsd(params.min_cost)}`)
    const span =
      params.session_id !== undefined
        ? undefined
        : key !== undefined
          ? { field: "key" as const, value: keySpanValue(key) }
          : params.model !== undefined
            ? { field: "model" as const, value: params.model }
            : undefined
    const { rows, next } =
      span !== undefined
        ? yield* alongSpans(sql, span, parts, upper, lower, limit + 1)
        : {
            rows: yield* sql<GenerationRow>`SELECT * FROM generations WHERE ${sql.and([
              ...parts,
              ...(upper === undefined ? [] : [sql`id < ${upper}`]),
            ])} ORDER BY id DESC LIMIT ${limit + 1}`,
            next: undefined,
          }
    const page: Array<StoredGeneration> = rows.slice(0, limit).map(fromRow)
    return { page, next: rows.length > limit ? (page[page.length - 1]?.id ?? null) : (next ?? null) }
  }).pipe(Effect.orDie)
