/** Cost of a generation: usage × the price of the endpoint that served it (USD per million tokens). */
import type { Pricing } from "../config/file.js"
import type { Usage } from "../providers/types.js"

const PER_TOKEN = 1 / 1_000_000

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
  return Math.round(usd * 1e12) / 1e12
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
