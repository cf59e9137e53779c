/**
 * How an upstream failure becomes a `ProviderError`: from the HTTP status and error body before
 * the first byte, from an error event's code inside a stream, and from a failed connection.
 */
import type { HeaderReader } from "./http1"
import { ProviderError, type ProviderErrorKind } from "./types"

/** What the OpenAI and Anthropic error bodies have in common: `{error: {message, type, code}}`. */
export interface UpstreamErrorDetail {
  readonly message: string
  readonly code?: string
}

const CONTEXT_LENGTH = /context[ _-]?length|maximum context|context window|too many tokens|prompt is too long/i

/** Whether an error says the prompt does not fit the model. */
export const isContextLengthError = (detail: UpstreamErrorDetail): boolean =>
  detail.code === "context_length_exceeded" || CONTEXT_LENGTH.test(detail.message)

const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined

/** An HTML page's title (a proxy's error page), at most 200 characters of it. */
const HTML_TITLE = /<title[^>]*>([^<]{0,200})<\/title>/i

/** Reads `{error: {message, code|type}}` (or `{error: "text"}`, or `{message}`) from an error body's text. */
export const errorDetailOf = (bodyText: string, fallback: string): UpstreamErrorDetail => {
  let parsed: unknown
  try {
    parsed = JSON.parse(bodyText)
  } catch {
    const text = bodyText.trim()
    // A proxy's HTML page: its title says what happened; its markup is no message.
    if (text.startsWith("<")) {
      const title = HTML_TITLE.exec(text)?.[1]?.trim()
      return { message: title === undefined || title === "" ? fallback : `${fallback}: ${title}` }
    }
    return { message: text.length > 0 ? text.slice(0, 500) : fallback }
  }
  const root = asRecord(parsed)
  const error = root?.["error"]
  if (typeof error === "string") return { message: error }
  const detail = asRecord(error) ?? root
  const message = detail?.["message"]
  const code = detail?.["code"] ?? detail?.["type"]
  return {
    message: typeof message === "string" && message.length > 0 ? message : fallback,
    ...(typeof code === "string" ? { code } : {}),
  }
}

/** Seconds from a `Retry-After` header (delta-seconds or an HTTP date), or `retry-after-ms`. */
export const retryAfterSeconds = (headers: HeaderReader): number | undefined => {
  const value = headers.get("retry-after")
  if (value !== null) {
    const seconds = Number(value)
    if (Number.isFinite(seconds) && value.trim() !== "") return Math.max(0, Math.ceil(seconds))
    const date = Date.parse(value)
    if (!Number.isNaN(date)) return Math.max(0, Math.ceil((date - Date.now()) / 1000))
  }
  const ms = Number(headers.get("retry-after-ms") ?? Number.NaN)
  return Number.isFinite(ms) ? Math.max(0, Math.ceil(ms / 1000)) : undefined
}

const BAD_REQUEST_STATUSES = new Set([400, 404, 409, 413, 422])

/**
 * A 2xx body that is not an answer of its format (`null`, an array, an object without the answer's
 * parts): a failure of the upstream (502, and the next endpoint is tried), not an empty answer
 * charged as completed.
 */
export const notAnAnswer = (wire: string, what: string): ProviderError =>
  new ProviderError("server", `${wire} upstream sent a body that is not an answer: ${what}`)

/** Whether a parsed body is a JSON object (not null, an array or a scalar). */
export const isJsonObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The error for a non-2xx upstream answer. */
export const errorFromStatus = (status: number, detail: UpstreamErrorDetail, headers: HeaderReader): ProviderError => {
  const message = detail.message
  if (status === 529 || detail.code === "overloaded_error") return new ProviderError("overloaded", message, status)
  if (BAD_REQUEST_STATUSES.has(status)) {
    return new ProviderError(isContextLengthError(detail) ? "context_length" : "bad_request", message, status)
  }
  if (status === 401 || status === 403) return new ProviderError("auth", message, status)
  if (status === 429) return new ProviderError("rate_limited", message, status, retryAfterSeconds(headers))
  if (status === 408 || status === 504) return new ProviderError("timeout", message, status)
  // Any other status (5xx, or an unexpected 4xx such as 402) is the upstream's problem: try another.
  return new ProviderError("server", message, status)
}

const CODE_KINDS: Record<string, ProviderErrorKind> = {
  overloaded_error: "overloaded",
  rate_limit_error: "rate_limited",
  rate_limit_exceeded: "rate_limited",
  insufficient_quota: "rate_limited",
  authentication_error: "auth",
  permission_error: "auth",
  invalid_api_key: "auth",
  invalid_request_error: "bad_request",
  invalid_prompt: "bad_request",
  not_found_error: "bad_request",
  request_too_large: "bad_request",
  context_length_exceeded: "context_length",
  timeout_error: "timeout",
}

const NO_HEADERS: HeaderReader = { get: () => null }

/** An error object's code as a kind: a named code, or an HTTP status sent as the code (Azure's "429" under a 200), read as `errorFromStatus` reads it. */
const kindOfCode = (detail: UpstreamErrorDetail): ProviderErrorKind | undefined => {
  const code = detail.code
  if (code === undefined) return undefined
  return CODE_KINDS[code] ?? (/^[1-5][0-9]{2}$/.test(code) ? errorFromStatus(Number(code), detail, NO_HEADERS).kind : undefined)
}

/** The error for an error event inside a stream (after the first byte), from its code or type. */
export const errorFromEvent = (detail: UpstreamErrorDetail): ProviderError => {
  const kind = kindOfCode(detail) ?? "server"
  // Only a request-shaped failure can be a context-length one ("too many tokens" in a 429 is a rate).
  const fits = (kind === "bad_request" || kind === "server") && isContextLengthError(detail)
  return new ProviderError(fits ? "context_length" : kind, detail.message)
}
