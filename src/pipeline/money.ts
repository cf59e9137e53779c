/**
 * Money, after the stages: the input estimate, the prompt's true token bound and the worst case
 * over the plan's candidates, worked out on the request as the stages left it (the body text
 * while no stage past the preset rewrote it, else the request as sent on). Spend.ts holds the
 * worst case against the key and the credits (the reservation) when the key has a limit.
 */
import { estimateTokens, type PartAllowance, worstCaseCost } from "../domain/pricing.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { RoutePlan } from "../routing/Router.js"
import { inputBound, outputBound, promptTokenBound } from "./bounds.js"

export interface Money {
  /** Prompt tokens estimated (characters ÷ 4), charged for calls cut without usage. */
  readonly estimatedInputTokens: number
  /** A true upper bound of the prompt's tokens: reserved, and the most input ever charged. */
  readonly promptBound: number
  /** The most the request can cost: the bound plus the output bound at the dearest candidate's price. */
  readonly worstCase: number
  /** Every candidate is BYOK (a failover may land on one that is not, so only then). */
  readonly allByok: boolean
}

/**
 * `presetInstructions`: a preset's system prompt, input the body did not carry ("" when none).
 * `text`: what the caller sent (the body), or the request as the stages rewrote it.
 */
export const moneyOf = (text: string, request: ResponsesRequest, presetInstructions: string, plan: RoutePlan, parts: PartAllowance): Money => {
  const estimatedInputTokens = estimateTokens(text.length + presetInstructions.length)
  const promptBound = promptTokenBound(text, request, presetInstructions, parts)
  let worstCase = 0
  for (const e of plan.candidates) {
    worstCase = Math.max(worstCase, worstCaseCost(e.pricing, inputBound(promptBound, e), outputBound(request, e).total))
  }
  const candidates = plan.candidates
  return { estimatedInputTokens, promptBound, worstCase, allByok: candidates.length > 0 && candidates.every((e) => e.isByok) }
}
