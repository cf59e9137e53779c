/**
 * The Bedrock Converse answer shapes the adapter reads (JSON and stream events), and the mappings
 * both paths share: usage, stop reason, and AWS's error types.
 */
import type { HeaderReader } from "../http1"
import { errorDetailOf, errorFromStatus, isContextLengthError, retryAfterSeconds } from "../errors"
import { ProviderError, type FinishReason, type ProviderErrorKind } from "../types"
import { type Usage, reportedCount } from "../../domain/pricing"

export interface BedrockUsage {
  readonly inputTokens?: number
  readonly outputTokens?: number
  readonly cacheReadInputTokens?: number
  readonly cacheWriteInputTokens?: number
}

export interface BedrockToolUse {
  readonly toolUseId?: string
  readonly name?: string
  readonly input?: unknown
}

export interface BedrockContentBlock {
  readonly text?: string
  readonly toolUse?: BedrockToolUse
  readonly reasoningContent?: { readonly reasoningText?: { readonly text?: string; readonly signature?: string } }
}

export interface ConverseResponse {
  readonly output?: { readonly message?: { readonly content?: ReadonlyArray<BedrockContentBlock> } }
  readonly stopReason?: string
  readonly usage?: BedrockUsage
}

/** The payload of one ConverseStream event (its `:event-type` header names which). */
export interface ConverseStreamEvent {
  readonly contentBlockIndex?: number
  readonly start?: { readonly toolUse?: { readonly toolUseId?: string; readonly name?: string } }
  readonly delta?: {
    readonly text?: string
    readonly toolUse?: { readonly input?: string }
    readonly reasoningContent?: { readonly text?: string; readonly signature?: string }
  }
  readonly stopReason?: string
  readonly usage?: BedrockUsage
  readonly message?: string
}

/** Cache reads and writes are billed input too (as on Anthropic): our inputTokens is the sum of all three. */
export const bedrockUsage = (usage: BedrockUsage): Usage => {
  const cacheRead = usage.cacheReadInputTokens ?? 0
  const cacheWrite = usage.cacheWriteInputTokens ?? 0
  return {
    inputTokens: reportedCount(usage.inputTokens) + cacheRead + cacheWrite,
    cachedTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: reportedCount(usage.outputTokens),
    // Converse does not report reasoning tokens apart from the rest of the output.
    reasoningTokens: 0,
  }
}

export const bedrockFinishReason = (reason: string | undefined): FinishReason => {
  switch (reason) {
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "tool_use":
      return "tool_calls"
    case "guardrail_intervened":
    case "content_filtered":
      return "content_filter"
    default:
      return "stop"
  }
}

/**
 * AWS's error types (the `x-amzn-errortype` header before the first byte, the `:exception-type`
 * of an exception frame after it), lower-cased first letter or not, as the kind of failure.
 */
const EXCEPTION_KINDS: Record<string, ProviderErrorKind> = {
  throttlingexception: "rate_limited",
  servicequotaexceededexception: "rate_limited",
  modelnotreadyexception: "overloaded",
  serviceunavailableexception: "overloaded",
  validationexception: "bad_request",
  resourcenotfoundexception: "bad_request",
  modelerrorexception: "server",
  modelstreamerrorexception: "server",
  internalserverexception: "server",
  modeltimeoutexception: "timeout",
  accessdeniedexception: "auth",
  unrecognizedclientexception: "auth",
  expiredtokenexception: "auth",
  invalidsignatureexception: "auth",
  incompletesignatureexception: "auth",
}

/** `ThrottlingException:http://internal.amazon.com/coral/…` → "throttlingexception". */
const exceptionName = (type: string | null | undefined): string | undefined => {
  if (type == null || type === "") return undefined
  const colon = type.indexOf(":")
  return (colon === -1 ? type : type.slice(0, colon)).toLowerCase()
}

const kindOf = (name: string | undefined, fallback: ProviderErrorKind): ProviderErrorKind =>
  (name === undefined ? undefined : EXCEPTION_KINDS[name]) ?? fallback

/** A refusal for a prompt that does not fit: the next candidate may take it. */
const fits = (kind: ProviderErrorKind, message: string): ProviderErrorKind =>
  kind === "bad_request" && (isContextLengthError({ message }) || /input is too long/i.test(message)) ? "context_length" : kind

/**
 * The error for a non-2xx answer: AWS's error type first, its status otherwise, read as every
 * other kind reads it (504 a timeout, 529 overloaded, 424 the model's failure), but 503, which
 * Bedrock answers for ServiceUnavailable, overloaded.
 */
export const bedrockErrorFromStatus = (status: number, bodyText: string, headers: HeaderReader): ProviderError => {
  const detail = errorDetailOf(bodyText, `bedrock upstream answered ${status}`)
  const statusKind: ProviderErrorKind = status === 503 ? "overloaded" : errorFromStatus(status, detail, headers).kind
  const kind = fits(kindOf(exceptionName(headers.get("x-amzn-errortype")), statusKind), detail.message)
  return new ProviderError(kind, detail.message, status, kind === "rate_limited" ? retryAfterSeconds(headers) : undefined)
}

/** The error of an exception frame inside a stream. */
export const bedrockStreamFailure = (exceptionType: string | undefined, message: string): ProviderError => {
  const kind = fits(kindOf(exceptionName(exceptionType), "server"), message)
  return new ProviderError(kind, message)
}

/** Bedrock's public runtime host for a region. */
export const defaultBedrockBaseUrl = (region: string): string => `https://bedrock-runtime.${region}.amazonaws.com`

/**
 * The path of an operation on a model: the model id (or ARN) is one path segment, so `:` and `/`
 * are percent-encoded as AWS's own SDKs send them; the signature is computed over these bytes.
 */
export const modelPath = (modelId: string, operation: "converse" | "converse-stream" | "invoke"): string =>
  `/model/${encodeURIComponent(modelId)}/${operation}`
