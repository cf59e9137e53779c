/**
 * The Chat Completions answer shapes the adapter reads (JSON and stream chunks), and the
 * mappings both paths share: usage and finish reason.
 */
import { errorFromEvent } from "../errors"
import type { FinishReason, ProviderError } from "../types"
import { type Usage, reportedCount } from "../../domain/pricing"

export interface ChatUsage {
  readonly prompt_tokens?: number
  readonly completion_tokens?: number
  readonly prompt_tokens_details?: { readonly cached_tokens?: number } | null
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number } | null
}

export interface ChatToolCallDelta {
  readonly index?: number
  readonly id?: string
  readonly function?: { readonly name?: string; readonly arguments?: string }
}

export interface ChatErrorBody {
  readonly message?: string
  readonly code?: string | number | null
  readonly type?: string
}

/**
 * An error object of a Chat answer (a 200's body, a stream's chunk) as its kind: by its code, else
 * its type; a status sent as the code (Azure's "429") reads as that status.
 */
export const chatError = (error: ChatErrorBody, fallback: string): ProviderError => {
  const code = error.code ?? error.type
  return errorFromEvent({ message: error.message ?? fallback, ...(code === undefined || code === null ? {} : { code: String(code) }) })
}

export interface ChatChunk {
  readonly choices?: ReadonlyArray<{
    readonly delta?: {
      readonly content?: string | null
      readonly reasoning?: string | null
      readonly reasoning_content?: string | null
      readonly tool_calls?: ReadonlyArray<ChatToolCallDelta> | null
    }
    readonly finish_reason?: string | null
  }>
  readonly usage?: ChatUsage | null
  readonly error?: ChatErrorBody
}

export interface ChatCompletion {
  readonly choices?: ReadonlyArray<{
    readonly message?: {
      readonly content?: string | null
      readonly reasoning?: string | null
      readonly reasoning_content?: string | null
      readonly refusal?: string | null
      readonly tool_calls?: ReadonlyArray<{ readonly id?: string; readonly function?: { readonly name?: string; readonly arguments?: string } }> | null
    }
    readonly finish_reason?: string | null
  }>
  readonly usage?: ChatUsage | null
  readonly error?: ChatErrorBody
}

/** OpenAI's prompt_tokens already include the cached ones, as our Usage wants. */
export const chatUsage = (usage: ChatUsage): Usage => ({
  inputTokens: reportedCount(usage.prompt_tokens),
  cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
  cacheWriteTokens: 0,
  outputTokens: reportedCount(usage.completion_tokens),
  reasoningTokens: usage.completion_tokens_details?.reasoning_tokens ?? 0,
})

export const chatFinishReason = (reason: string): FinishReason => {
  switch (reason) {
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool_calls"
    case "content_filter":
      return "content_filter"
    case "error":
      return "error"
    default:
      return "stop"
  }
}
