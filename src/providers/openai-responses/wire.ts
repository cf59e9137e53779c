/**
 * The Responses answer shapes the adapter reads (the response object and stream events), and
 * the mappings the JSON and stream paths share: usage, finish reason, failure.
 */
import { errorFromEvent } from "../errors"
import type { FinishReason, ProviderError } from "../types"
import { type Usage, reportedCount } from "../../domain/pricing"

export interface ResponsesUsage {
  readonly input_tokens?: number
  readonly input_tokens_details?: { readonly cached_tokens?: number } | null
  readonly output_tokens?: number
  readonly output_tokens_details?: { readonly reasoning_tokens?: number } | null
}

export interface ResponsesError {
  readonly code?: string | null
  readonly message?: string
}

export interface ResponsesOutputItem {
  readonly type?: string
  readonly call_id?: string
  readonly name?: string
  readonly arguments?: string
  readonly content?: ReadonlyArray<{ readonly type?: string; readonly text?: string; readonly refusal?: string }>
  readonly summary?: ReadonlyArray<{ readonly text?: string }>
}

export interface ResponsesObject {
  readonly status?: string
  readonly output?: ReadonlyArray<ResponsesOutputItem>
  readonly usage?: ResponsesUsage | null
  readonly error?: ResponsesError | null
  readonly incomplete_details?: { readonly reason?: string } | null
}

export interface ResponsesStreamEvent {
  readonly type?: string
  readonly delta?: string
  readonly output_index?: number
  readonly item?: ResponsesOutputItem
  readonly response?: ResponsesObject
  readonly code?: string | null
  readonly message?: string
}

/** Responses' input_tokens already include the cached ones, as our Usage wants. */
export const responsesUsage = (usage: ResponsesUsage): Usage => ({
  inputTokens: reportedCount(usage.input_tokens),
  cachedTokens: usage.input_tokens_details?.cached_tokens ?? 0,
  cacheWriteTokens: 0,
  outputTokens: reportedCount(usage.output_tokens),
  reasoningTokens: usage.output_tokens_details?.reasoning_tokens ?? 0,
})

export const responsesFinishReason = (response: ResponsesObject, calledTools: boolean): FinishReason => {
  if (response.status === "incomplete") {
    return response.incomplete_details?.reason === "content_filter" ? "content_filter" : "length"
  }
  if (response.status === "failed") return "error"
  return calledTools ? "tool_calls" : "stop"
}

export const responsesFailure = (error: ResponsesError | null | undefined): ProviderError =>
  errorFromEvent({
    message: error?.message ?? "openai-responses upstream reported a failed response",
    ...(typeof error?.code === "string" ? { code: error.code } : {}),
  })
