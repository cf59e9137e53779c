/**
 * How many output tokens an endpoint may produce for a request. One function decides both what
 * is sent upstream and what is reserved, so a request can never spend past its reservation.
 */
import type { ResponsesRequest } from "../../domain/responses.js"
import { thinkingBudget } from "../../providers/anthropic/request.js"
import type { Endpoint } from "../../services/Catalog.js"
import { reasoningConfig } from "./normalize.js"

/** Output tokens asked for when neither the request nor the endpoint bounds them. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096

export interface OutputBound {
  /** The answer's limit, sent upstream as the request's max output tokens. */
  readonly answer: number
  /** The answer plus what the upstream may spend thinking on top of it (Anthropic's budget). */
  readonly total: number
}

export const outputBound = (request: ResponsesRequest, endpoint: Endpoint): OutputBound => {
  const answer = request.max_output_tokens ?? endpoint.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS
  const reasoning = request.reasoning == null ? undefined : reasoningConfig(request.reasoning)
  const thinking = endpoint.provider.kind === "anthropic" ? (thinkingBudget(reasoning) ?? 0) : 0
  return { answer, total: answer + thinking }
}
