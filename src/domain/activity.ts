/**
 * Usage read from the daily rollup (src/store/usage-rollup.ts): `GET /v1/activity` in the API
 * family's shape (the official SDK's `analytics.getUserActivity`), `GET /v1/activity/summary`
 * (the console's charts: totals per day, by model, provider and key, errors by status and
 * latency percentiles), and the generation log's keyset-paginated listing (`GET /v1/generations`).
 */
import { Schema } from "effect"
import { Generation, idBoundAt } from "./generations.js"
import { isCalendarDate } from "./timestamps.js"
import { charsAtMost } from "./schema-rules.js"

const DAY = /^\d{4}-\d{2}-\d{2}$/
const validDay = (s: string) => DAY.test(s) && isCalendarDate(Number(s.slice(0, 4)), Number(s.slice(5, 7)), Number(s.slice(8, 10)))

/** A UTC day as `YYYY-MM-DD`. */
export const Day = Schema.String.pipe(Schema.filter(validDay, { message: () => "must be a UTC date as YYYY-MM-DD" }))

const Id = (what: string) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => `must be a non-empty ${what}` }),
    charsAtMost(256, `must be at most 256 characters`),
  )

export const ActivityParams = Schema.Struct({
  /** One UTC day of the last 30 completed days; all 30 when absent. */
  date: Schema.optional(Day),
  api_key_hash: Schema.optional(Id("key hash")),
  user_id: Schema.optional(Id("user id")),
  workspace_id: Schema.optional(Id("workspace id")),
  group_by: Schema.optional(Schema.Literal("workspace").annotations({ message: () => 'must be "workspace"' })),
})
export type ActivityParams = typeof ActivityParams.Type

export const ActivityItem = Schema.Struct({
  date: Schema.String,
  model: Schema.String,
  model_permaslug: Schema.String,
  /** The (model, provider) endpoint: `<model>:<provider>`. */
  endpoint_id: Schema.String,
  provider_name: Schema.String,
  /** USD drawn from credits. */
  usage: Schema.Number,
  /** USD spent through the user's own provider keys. */
  byok_usage_inference: Schema.Number,
  requests: Schema.Int,
  prompt_tokens: Schema.Int,
  completion_tokens: Schema.Int,
  reasoning_tokens: Schema.Int,
  /** Only with `group_by=workspace`. */
  workspace_id: Schema.optional(Schema.String),
})
export type ActivityItem = typeof ActivityItem.Type

export const ActivityResponse = Schema.Struct({ data: Schema.Array(ActivityItem) })

/** Longest range the summary reads (days): bounds its rows whatever the caller asks. */
export const SUMMARY_MAX_DAYS = 366
/** Rows of each ranked table (by model, by key). */
export const SUMMARY_TOP = 50

export const SummaryParams = Schema.Struct({
  /** First UTC day, inclusive; default: 29 days before `to`. */
  from: Schema.optional(Day),
  /** Last UTC day, inclusive; default: today. */
  to: Schema.optional(Day),
  workspace_id: Schema.optional(Id("workspace id")),
  api_key_hash: Schema.optional(Id("key hash")),
  model: Schema.optional(Id("model id")),
})
export type SummaryParams = typeof SummaryParams.Type

const Totals = {
  requests: Schema.Int,
  usage: Schema.Number,
  byok_usage: Schema.Number,
  prompt_tokens: Schema.Int,
  completion_tokens: Schema.Int,
  reasoning_tokens: Schema.Int,
  errors: Schema.Int,
}

export const UsageSummary = Schema.Struct({
  data: Schema.Struct({
    from: Schema.String,
    to: Schema.String,
    totals: Schema.Struct(Totals),
    /** Every day of the range, oldest first (zeros on a day without requests). */
    days: Schema.Array(Schema.Struct({ date: Schema.String, ...Totals })),
    by_model: Schema.Array(Schema.Struct({ model: Schema.String, ...Totals })),
    by_provider: Schema.Array(
      Schema.Struct({
        provider_name: Schema.String,
        ...Totals,
        /** Time to the first token, from the rollup's histogram (a bucket's upper bound); null without samples. */
        latency_p50_ms: Schema.NullOr(Schema.Number),
        latency_p99_ms: Schema.NullOr(Schema.Number),
        latency_avg_ms: Schema.NullOr(Schema.Number),
      }),
    ),
    by_key: Schema.Array(Schema.Struct({ api_key_hash: Schema.String, name: Schema.NullOr(Schema.String), ...Totals })),
    errors_by_status: Schema.Array(Schema.Struct({ status: Schema.Int, count: Schema.Int })),
  }),
})
export type UsageSummary = typeof UsageSummary.Type

// ---- the generation log ----

export const LOG_PAGE_DEFAULT = 50
export const LOG_PAGE_MAX = 100

const GENERATION_ID = /^gen-\d{10}-[A-Za-z0-9]{1,40}$/

const Iso = Schema.String.pipe(
  // The day checked as one (Date.parse rolls 2026-02-30 over to March 2).
  Schema.filter((s) => /^\d{4}-\d{2}-\d{2}(T[\d:.]+Z?)?$/.test(s) && !Number.isNaN(Date.parse(s)) && validDay(s.slice(0, 10)), {
    message: () => "must be an ISO 8601 time or date in UTC",
  }),
)

export const LogParams = Schema.Struct({
  /** Page size, 1 to 100; default 50. */
  limit: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^\d{1,3}$/, { message: () => `must be an integer from 1 to ${LOG_PAGE_MAX}` }),
      Schema.compose(Schema.NumberFromString),
      Schema.between(1, LOG_PAGE_MAX, { message: () => `must be an integer from 1 to ${LOG_PAGE_MAX}` }),
    ),
  ),
  /** The previous page's `next_cursor`: the page starts after that generation (newest first). */
  cursor: Schema.optional(Schema.String.pipe(Schema.pattern(GENERATION_ID, { message: () => "must be a next_cursor from a previous page" }))),
  /** Created at or after. */
  from: Schema.optional(Iso),
  /** Created before. */
  to: Schema.optional(Iso),
  model: Schema.optional(Id("model id")),
  provider: Schema.optional(Id("provider id")),
  api_key_hash: Schema.optional(Id("key hash")),
  workspace_id: Schema.optional(Id("workspace id")),
  status: Schema.optional(
    Schema.Literal("completed", "incomplete", "failed", "cancelled").annotations({
      // Override: a union of literals otherwise reports its first member only (`Expected "completed"`).
      message: () => ({ message: "must be one of completed, incomplete, failed, cancelled", override: true }),
    }),
  ),
  session_id: Schema.optional(Id("session id")),
  /** USD, at least. */
  min_cost: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^\d{1,9}(\.\d{1,9})?$/, { message: () => "must be a non-negative number of USD" }),
      Schema.compose(Schema.NumberFromString),
    ),
  ),
})
export type LogParams = typeof LogParams.Type

export const GenerationLog = Schema.Struct({
  data: Schema.Array(Generation),
  /** Pass as `cursor` for the next page; null on the last one. */
  next_cursor: Schema.NullOr(Schema.String),
})
export type GenerationLog = typeof GenerationLog.Type

/** A time parameter (a day or a time) as the ISO 8601 UTC text `created_at` holds. */
export const isoOf = (time: string): string => new Date(Date.parse(time.length === 10 ? `${time}T00:00:00Z` : time)).toISOString()

/**
 * The log's `to` as the time its range ends before: a time as given, a day through its end (the
 * next day's start), as `from` and `to` days are inclusive on the activity routes.
 */
export const endOf = (to: string): string => (to.length === 10 ? new Date(Date.parse(isoOf(to)) + 86_400_000).toISOString() : isoOf(to))

/** The smallest generation id of a time plus `slackS` seconds (ids start with the Unix second: `gen-<s>-…`, src/domain/generations.ts). */
export const idBoundOf = (time: string, slackS = 0): string => idBoundAt(Math.floor(Date.parse(isoOf(time)) / 1000) + slackS)
