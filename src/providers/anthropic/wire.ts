/**
 * The Anthropic Messages answer shapes the adapter reads (JSON and stream events), and the
 * mappings both paths share: usage, stop reason, error.
 */
import { errorFromEvent } from "../errors"
import type { FinishReason, ProviderError } from "../types"
import { type Usage, reportedCount } from "../../domain/pricing"

export interface AnthropicUsage {
  readonly input_tokens?: number | null
  readonly output_tokens?: number | null
  readonly cache_read_input_tokens?: number | null
  readonly cache_creation_input_tokens?: number | null
}

export interface AnthropicErrorDetail {
  readonly type?: string
  readonly message?: string
}

export interface AnthropicContentBlock {
  readonly type?: string
  readonly id?: string
  readonly name?: string
  readonly text?: string
  readonly thinking?: string
  /** thinking: Anthropic's seal of its text; redacted_thinking: `data`, the withheld block itself. */
  readonly signature?: string
  readonly data?: string
  readonly input?: unknown
}

export interface AnthropicMessageObject {
  readonly type?: string
  readonly content?: ReadonlyArray<AnthropicContentBlock>
  readonly stop_reason?: string | null
  readonly usage?: AnthropicUsage
  readonly error?: AnthropicErrorDetail
}

export interface AnthropicStreamEvent {
  readonly type?: string
  readonly index?: number
  readonly message?: AnthropicMessageObject
  readonly content_block?: AnthropicContentBlock
  readonly delta?: {
    readonly type?: string
    readonly text?: string
    readonly partial_json?: string
    readonly thinking?: string
    readonly signature?: string
    readonly stop_reason?: string | null
  }
  readonly usage?: AnthropicUsage
  readonly error?: AnthropicErrorDetail
}

/** Cache reads and writes are billed input too: our inputTokens is the sum of all three. */
export const anthropicUsage = (usage: AnthropicUsage): Usage => {
  const cacheRead = usage.cache_read_input_tokens ?? 0
  const cacheWrite = usage.cache_creation_input_tokens ?? 0
  return {
    inputTokens: reportedCount(usage.input_tokens) + cacheRead + cacheWrite,
    cachedTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: reportedCount(usage.output_tokens),
    // Anthropic does not report thinking tokens apart from the rest of the output.
    reasoningTokens: 0,
  }
}

export const anthropicFinishReason = (reason: string | null | undefined): FinishReason => {
  switch (reason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "refusal":
      return "content_filter"
    default:
      return "stop"
  }
}

export const anthropicFailure = (error: AnthropicErrorDetail | undefined): ProviderError =>
  errorFromEvent({
    message: error?.message ?? "anthropic upstream reported an error",
    ...(error?.type === undefined ? {} : { code: error.type }),
  })
