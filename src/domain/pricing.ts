/** Cost of a generation: usage × the price of the endpoint that served it (USD per million tokens). */
import { Schema } from "effect"

/**
 * The dearest price taken, in USD (a million tokens, or a request): 400 times today's dearest. Past
 * it a request's cost leaves the ledger's nano-dollar range: `prompt: 1e308` made every answer
 * cost $0 (not finite), and `request: 1e15` a record Postgres could not write (its spend lost).
 */
export const MAX_PRICE_USD = 100_000

export const PriceUsd = Schema.Number.pipe(
  Schema.nonNegative({ message: () => "must be a number ≥ 0" }),
  Schema.lessThanOrEqualTo(MAX_PRICE_USD, { message: () => `must be at most ${MAX_PRICE_USD} (USD)` }),
)

/** USD per million tokens; `request` is USD per request. */
export const Pricing = Schema.Struct({
  prompt: PriceUsd,
  completion: PriceUsd,
  cached_prompt: Schema.optional(PriceUsd),
  cache_write: Schema.optional(PriceUsd),
  request: Schema.optional(PriceUsd),
})
export type Pricing = typeof Pricing.Type

/** Tokens one answer used, as every upstream reports them once normalized. */
export interface Usage {
  readonly inputTokens: number
  /** Of inputTokens, how many were read from the provider's prompt cache. */
  readonly cachedTokens: number
  /** Tokens written to the prompt cache (Anthropic), included in inputTokens. */
  readonly cacheWriteTokens: number
  readonly outputTokens: number
  /** Of outputTokens, how many were reasoning. */
  readonly reasoningTokens: number
}

const PER_TOKEN = 1 / 1_000_000

/** Money is stored and compared as integers of this unit: nano-dollars (1e-9 USD), exact in a JS number up to ~$9M. */
export const NANO_PER_USD = 1_000_000_000

/** USD → nano-dollars: the one place money is rounded (a generation's cost, a hold, a limit, a grant). */
export const toNanoUsd = (usd: number): number => (Number.isFinite(usd) ? Math.round(usd * NANO_PER_USD) : 0)

/** Nano-dollars → USD for the API: the double nearest the exact decimal (50000000 → 0.05). */
export const fromNanoUsd = (nano: number | bigint | string): number => Number(nano) / NANO_PER_USD

export const costOf = (pricing: Pricing, usage: Usage): number => {
  const cached = Math.min(usage.cachedTokens, usage.inputTokens)
  const written = Math.min(usage.cacheWriteTokens, usage.inputTokens - cached)
  const plain = usage.inputTokens - cached - written
  const usd =
    plain * pricing.prompt * PER_TOKEN +
    cached * (pricing.cached_prompt ?? pricing.prompt) * PER_TOKEN +
    written * (pricing.cache_write ?? pricing.prompt) * PER_TOKEN +
    usage.outputTokens * pricing.completion * PER_TOKEN +
    (pricing.request ?? 0)
  // Rounded to whole nano-dollars once, here: the record, the answer and the ledger agree exactly.
  return fromNanoUsd(toNanoUsd(usd))
}

/** The worst case of a request before it runs: every input token uncached, every output token used. */
export const worstCaseCost = (pricing: Pricing, inputTokens: number, maxOutputTokens: number): number =>
  costOf(pricing, {
    inputTokens,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: maxOutputTokens,
    reasoningTokens: 0,
  }) +
  // A cache write may cost more than a plain prompt token.
  Math.max(0, ((pricing.cache_write ?? pricing.prompt) - pricing.prompt) * inputTokens * PER_TOKEN)

/** A cheap estimate of prompt tokens from the request's characters (≈4 per token), rounded up. */
export const estimateTokens = (chars: number) => Math.max(1, Math.ceil(chars / 4))

/** How image and file parts count in a prompt's tokens: a fixed allowance each, whatever their bytes. */
export interface PartAllowance {
  /** Tokens counted for one image part, whatever its size. */
  readonly maxTokensPerImage: number
  /** Tokens counted for one file part, whatever its size. */
  readonly maxTokensPerFile: number
}

/**
 * A main count (input or output tokens) as an upstream reported it: one it left out or sent as
 * null is no count (NaN), so `isValidUsage` refuses the usage and the gateway charges its
 * estimate. Read as 0, an answer without them cost nothing.
 */
export const reportedCount = (n: number | null | undefined): number => n ?? Number.NaN

/** A count an upstream may report: a non-negative whole number (1e12 passes here, the caps below bound it). */
const isCount = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0

/**
 * One count an upstream reported (embeddings' tokens, rerank's search units), or undefined when
 * it is none: missing, null, a string, negative or fractional. Undefined is charged as estimated;
 * taken as sent, a count of -1e9 credited the key a million dollars.
 */
export const countOf = (n: unknown): number | undefined => (isCount(n) ? n : undefined)

/**
 * Whether every count of an upstream's usage is a real count; one that is negative, fractional,
 * non-finite or not a number at all makes the whole usage untrustworthy (treated as missing).
 */
export const isValidUsage = (u: Usage): boolean =>
  isCount(u.inputTokens) && isCount(u.cachedTokens) && isCount(u.cacheWriteTokens) && isCount(u.outputTokens) && isCount(u.reasoningTokens)

/**
 * Usage bounded by what the request may use: input by its reservation's input bound, output by the
 * output bound sent upstream. The same object when within both (the honest case allocates nothing).
 */
export const capUsage = (u: Usage, maxInput: number, maxOutput: number): Usage => {
  if (u.inputTokens <= maxInput && u.outputTokens <= maxOutput && u.reasoningTokens <= u.outputTokens) return u
  const inputTokens = Math.min(u.inputTokens, maxInput)
  const outputTokens = Math.min(u.outputTokens, maxOutput)
  return {
    inputTokens,
    cachedTokens: Math.min(u.cachedTokens, inputTokens),
    cacheWriteTokens: Math.min(u.cacheWriteTokens, inputTokens),
    outputTokens,
    reasoningTokens: Math.min(u.reasoningTokens, outputTokens),
  }
}
