/** Wire shapes of API keys, per the contract and wire-compat. */
import { Schema } from "effect"
import { NANO_PER_USD } from "./pricing.js"
import { ZonedTimestamp } from "./timestamps.js"
import { charsAtMost, showable } from "./schema-rules.js"

export const LimitReset = Schema.Literal("daily", "weekly", "monthly")
export type LimitReset = typeof LimitReset.Type

/** `limit_reset` as a request sends it; the message overrides the union's, which names its first member only. */
const LimitResetInput = Schema.NullOr(LimitReset).annotations({
  message: () => ({ message: "must be one of daily, weekly, monthly, or null", override: true }),
})

/** The largest amount a limit may be: money is counted in nano-dollars, exact in a JS number below 2^53 (~$9M). */
export const MAX_LIMIT_USD = 9_000_000

export const Usd = Schema.Number.pipe(
  Schema.finite({ message: () => "must be a finite number" }),
  Schema.nonNegative({ message: () => "must be ≥ 0 (USD)" }),
  // Stored in nano-dollars: a smaller positive limit would be rounded to 0, a key that can spend nothing.
  Schema.filter((usd) => usd === 0 || usd >= 1 / NANO_PER_USD, {
    message: () => "a positive limit must be at least 0.000000001 (a nano-dollar), or 0",
  }),
  Schema.lessThanOrEqualTo(MAX_LIMIT_USD, { message: () => `must be at most ${MAX_LIMIT_USD} (USD; money is counted in nano-dollars)` }),
)

/** The longest rate-limit interval: a day (a longer window is a spending limit's job). */
const MAX_RATE_INTERVAL_MS = 86_400_000
const INTERVAL_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `10s`, `1m`, `1h`, `500ms`, `1d` → milliseconds; undefined when the text is no such interval. */
export const intervalMs = (text: string): number | undefined => {
  const match = /^([1-9][0-9]{0,8})(ms|s|m|h|d)$/.exec(text)
  if (match === null) return undefined
  return Number(match[1]) * (INTERVAL_UNITS[match[2] as string] as number)
}

/** Milliseconds → the shortest exact interval text (`10000` → `10s`). */
export const intervalText = (ms: number): string => {
  for (const unit of ["d", "h", "m", "s"] as const) {
    const size = INTERVAL_UNITS[unit] as number
    if (ms % size === 0) return `${ms / size}${unit}`
  }
  return `${ms}ms`
}

/** A request rate limit: at most `requests` in any `interval` (GCRA: a burst of `requests`, then one per interval / requests). */
export const RateLimit = Schema.Struct({
  requests: Schema.Int.pipe(
    Schema.greaterThanOrEqualTo(1, { message: () => "must be an integer ≥ 1" }),
    Schema.lessThanOrEqualTo(1_000_000, { message: () => "must be at most 1000000" }),
  ),
  interval: Schema.String.pipe(
    Schema.filter((text) => {
      const ms = intervalMs(text)
      return ms !== undefined && ms >= 1_000 && ms <= MAX_RATE_INTERVAL_MS
    }, { message: () => "must be a duration from 1s to 1d, like 10s, 1m, 1h or 1d" }),
  ),
})
export type RateLimit = typeof RateLimit.Type

export const KeyName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  charsAtMost(256),
  showable,
)

/** Spend in USD: all time, the UTC day, the Monday-start week, the calendar month; BYOK apart. */
const usageFields = {
  usage: Schema.Number,
  usage_daily: Schema.Number,
  usage_weekly: Schema.Number,
  usage_monthly: Schema.Number,
  byok_usage: Schema.Number,
  byok_usage_daily: Schema.Number,
  byok_usage_weekly: Schema.Number,
  byok_usage_monthly: Schema.Number,
}

export const ApiKey = Schema.Struct({
  hash: Schema.String,
  name: Schema.String,
  label: Schema.String,
  disabled: Schema.Boolean,
  limit: Schema.NullOr(Schema.Number),
  limit_remaining: Schema.NullOr(Schema.Number),
  limit_reset: Schema.NullOr(LimitReset),
  include_byok_in_limit: Schema.Boolean,
  ...usageFields,
  created_at: Schema.String,
  updated_at: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  creator_user_id: Schema.NullOr(Schema.String),
  workspace_id: Schema.String,
  external_user: Schema.NullOr(Schema.String),
  /** Numeric id (workspaces' `io_logging_api_key_ids` refer to it). */
  id: Schema.Int,
  is_management_key: Schema.Boolean,
  /** The key's own request rate limit (null: none; a workspace default may still apply). */
  rate_limit: Schema.NullOr(RateLimit),
})
export type ApiKey = typeof ApiKey.Type

export const KeyData = Schema.Struct({ data: ApiKey })

export const CreateKeyPayload = Schema.Struct({
  name: KeyName,
  limit: Schema.optional(Schema.NullOr(Usd)),
  limit_reset: Schema.optional(LimitResetInput),
  include_byok_in_limit: Schema.optional(Schema.Boolean),
  expires_at: Schema.optional(Schema.NullOr(ZonedTimestamp)),
  workspace_id: Schema.optional(Schema.String),
  /** Our extension: create a management key (only a management key can). */
  is_management_key: Schema.optional(Schema.Boolean),
  rate_limit: Schema.optional(Schema.NullOr(RateLimit)),
})
export type CreateKeyPayload = typeof CreateKeyPayload.Type

export const CreatedKey = Schema.Struct({ data: ApiKey, key: Schema.String })

export const UpdateKeyPayload = Schema.Struct({
  name: Schema.optional(KeyName),
  disabled: Schema.optional(Schema.Boolean),
  include_byok_in_limit: Schema.optional(Schema.Boolean),
  limit: Schema.optional(Schema.NullOr(Usd)),
  limit_reset: Schema.optional(LimitResetInput),
  rate_limit: Schema.optional(Schema.NullOr(RateLimit)),
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type UpdateKeyPayload = typeof UpdateKeyPayload.Type

export const KeyList = Schema.Struct({ data: Schema.Array(ApiKey) })

export const ListKeysParams = Schema.Struct({
  offset: Schema.optional(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "must be an integer" }),
      Schema.nonNegative({ message: () => "must be ≥ 0" }),
    ),
  ),
  include_disabled: Schema.optional(Schema.BooleanFromString.annotations({ message: () => ({ message: "must be true or false", override: true }) })),
  /** Only the keys of this workspace (one the caller can use; else 404). */
  workspace_id: Schema.optional(Schema.String),
})

export const Deleted = Schema.Struct({ deleted: Schema.Literal(true) })

export const CurrentKey = Schema.Struct({
  data: Schema.Struct({
    label: Schema.String,
    limit: Schema.NullOr(Schema.Number),
    limit_remaining: Schema.NullOr(Schema.Number),
    limit_reset: Schema.NullOr(LimitReset),
    include_byok_in_limit: Schema.Boolean,
    ...usageFields,
    is_management_key: Schema.Boolean,
    is_provisioning_key: Schema.Boolean,
    is_free_tier: Schema.Boolean,
    creator_user_id: Schema.NullOr(Schema.String),
    workspace_id: Schema.String,
    expires_at: Schema.NullOr(Schema.String),
    rate_limit: Schema.Struct({ requests: Schema.Int, interval: Schema.String, note: Schema.String }),
    /** Regions the key may be served from: the gateway has one, `global`. */
    allowed_data_regions: Schema.Array(Schema.Literal("global", "europe", "us")),
    /** -1 in each: the gateway sets no daily cap on free models and does not count them. */
    free_model_daily_requests: Schema.Struct({ limit: Schema.Int, remaining: Schema.Int, used: Schema.Int }),
    /** The gateway has no organizations. */
    organization_id: Schema.Null,
  }),
})

export const Credits = Schema.Struct({
  data: Schema.Struct({ total_credits: Schema.Number, total_usage: Schema.Number }),
})

/** A generated secret: the prefix and 64 lower-case hex digits (KeyStore.newSecret). */
const GENERATED_SECRET = /^sk-gw-v1-[0-9a-f]{64}$/
/** Any other secret (a GATEWAY_MANAGEMENT_KEY): 1-256 visible ASCII characters. */
const OTHER_SECRET = /^[\x21-\x7e]{1,256}$/

/**
 * Whether a bearer secret can be a key at all: one that cannot is refused without a store lookup.
 * With the gateway's prefix it must be a generated secret; without, a custom one.
 */
export const keyShaped = (secret: string): boolean =>
  secret.startsWith("sk-gw-v1-") ? GENERATED_SECRET.test(secret) : OTHER_SECRET.test(secret)

/** Whether a key with this `expires_at` (as the client wrote it, offset included: compared as a time) has expired at `nowMs`. */
export const hasExpired = (expiresAt: string | null, nowMs: number): boolean => expiresAt !== null && Date.parse(expiresAt) <= nowMs
