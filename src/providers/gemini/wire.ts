/**
 * The Gemini `generateContent` answer shapes the adapter reads (a JSON answer and each streamed
 * chunk are the same `GenerateContentResponse`), the mappings both paths share (usage, finish
 * reason), and Google's error bodies (`{error: {code, message, status, details}}`), which the
 * Gemini API and Vertex AI both send.
 */
import { errorDetailOf, errorFromStatus, isContextLengthError, retryAfterSeconds } from "../errors"
import type { HeaderReader } from "../http1"
import { type FinishReason, ProviderError, type ProviderErrorKind } from "../types"
import { type Usage, reportedCount } from "../../domain/pricing"

export interface GeminiPart {
  readonly text?: string
  /** The text is a thought summary (asked for with `thinkingConfig.includeThoughts`). */
  readonly thought?: boolean
  readonly thoughtSignature?: string
  readonly functionCall?: { readonly name?: string; readonly args?: unknown; readonly id?: string }
}

export interface GeminiUsage {
  readonly promptTokenCount?: number
  readonly candidatesTokenCount?: number
  readonly thoughtsTokenCount?: number
  readonly cachedContentTokenCount?: number
  readonly toolUsePromptTokenCount?: number
}

export interface GoogleErrorBody {
  readonly code?: number
  readonly message?: string
  readonly status?: string
  /** Anthropic's error type, when Vertex passes on an Anthropic model's error. */
  readonly type?: string
  readonly details?: ReadonlyArray<{ readonly "@type"?: string; readonly reason?: string; readonly retryDelay?: string }>
}

export interface GeminiResponse {
  readonly candidates?: ReadonlyArray<{
    readonly content?: { readonly parts?: ReadonlyArray<GeminiPart> }
    readonly finishReason?: string
  }>
  readonly promptFeedback?: { readonly blockReason?: string }
  readonly usageMetadata?: GeminiUsage
  readonly error?: GoogleErrorBody
}

/** Thoughts are billed as output: our outputTokens counts them, reasoningTokens says how many. */
export const geminiUsage = (usage: GeminiUsage): Usage => {
  const thoughts = usage.thoughtsTokenCount ?? 0
  return {
    // The prompt count includes the cached part; prompts written by tool use are billed as input too.
    // Proto3's JSON leaves out a zero count: an answer of no tokens has no candidatesTokenCount, but
    // a prompt is never empty, so a prompt count left out (or null) is no count (`reportedCount`).
    inputTokens: reportedCount(usage.promptTokenCount) + (usage.toolUsePromptTokenCount ?? 0),
    cachedTokens: usage.cachedContentTokenCount ?? 0,
    cacheWriteTokens: 0,
    outputTokens: (usage.candidatesTokenCount ?? 0) + thoughts,
    reasoningTokens: thoughts,
  }
}

/** Gemini says STOP after function calls too: the caller's reason is then tool_calls. */
export const geminiFinishReason = (reason: string | undefined, calledTools: boolean): FinishReason => {
  switch (reason) {
    case "MAX_TOKENS":
      return "length"
    case "SAFETY":
    case "RECITATION":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
      return "content_filter"
    case "MALFORMED_FUNCTION_CALL":
    case "UNEXPECTED_TOOL_CALL":
      return "error"
    default:
      return calledTools ? "tool_calls" : "stop"
  }
}

const STATUS_KINDS: Record<string, ProviderErrorKind> = {
  RESOURCE_EXHAUSTED: "rate_limited",
  UNAVAILABLE: "overloaded",
  INVALID_ARGUMENT: "bad_request",
  FAILED_PRECONDITION: "bad_request",
  NOT_FOUND: "bad_request",
  UNAUTHENTICATED: "auth",
  PERMISSION_DENIED: "auth",
  DEADLINE_EXCEEDED: "timeout",
}

/** Google words a prompt over the model's limit this way, not as the OpenAI/Anthropic phrases. */
const GOOGLE_TOO_LONG = /exceeds the maximum number of tokens/i

const googleErrorOf = (text: string): GoogleErrorBody | undefined => {
  try {
    const parsed = JSON.parse(text) as { error?: unknown } | Array<{ error?: unknown }>
    // The streaming method answers a failure as a one-element array.
    const root = Array.isArray(parsed) ? parsed[0] : parsed
    const error = root?.error
    return typeof error === "object" && error !== null ? (error as GoogleErrorBody) : undefined
  } catch {
    return undefined
  }
}

/** `RetryInfo.retryDelay` ("30s", "1.5s") in whole seconds, rounded up. */
const retryDelayOf = (error: GoogleErrorBody): number | undefined => {
  for (const detail of error.details ?? []) {
    const delay = detail.retryDelay
    if (typeof delay !== "string") continue
    const seconds = Number(delay.endsWith("s") ? delay.slice(0, -1) : delay)
    if (Number.isFinite(seconds)) return Math.max(0, Math.ceil(seconds))
  }
  return undefined
}

/**
 * A non-2xx answer of Google's APIs. Beyond the status: a bad key is a 400 there
 * (`API_KEY_INVALID`), an overloaded model a 503 `UNAVAILABLE`, and the wait before a retry
 * may come as `RetryInfo` in the body rather than a `Retry-After` header.
 */
export const googleStatusError = (status: number, text: string, fallback: string, headers: HeaderReader): ProviderError => {
  const error = googleErrorOf(text)
  if (error === undefined) return errorFromStatus(status, errorDetailOf(text, fallback), headers)
  const message = typeof error.message === "string" && error.message.length > 0 ? error.message : fallback
  const keyRefused = (error.details ?? []).some((d) => d.reason === "API_KEY_INVALID")
  if (keyRefused || status === 401 || status === 403) return new ProviderError("auth", message, status)
  if (status === 429 || error.status === "RESOURCE_EXHAUSTED") {
    return new ProviderError("rate_limited", message, status, retryAfterSeconds(headers) ?? retryDelayOf(error))
  }
  if (status === 503 || error.status === "UNAVAILABLE") return new ProviderError("overloaded", message, status)
  if (status === 400 && (GOOGLE_TOO_LONG.test(message) || isContextLengthError({ message }))) {
    return new ProviderError("context_length", message, status)
  }
  const code = error.status ?? error.type
  return errorFromStatus(status, { message, ...(code === undefined ? {} : { code }) }, headers)
}

/** An error inside a stream (after the first byte), by its status name. */
export const googleEventError = (error: GoogleErrorBody): ProviderError => {
  const message = error.message ?? "the upstream reported an error mid-stream"
  const kind = (error.status === undefined ? undefined : STATUS_KINDS[error.status]) ?? "server"
  return new ProviderError(kind === "bad_request" && GOOGLE_TOO_LONG.test(message) ? "context_length" : kind, message)
}
