/**
 * Anthropic's error envelope, `{type: "error", error: {type, message}}`, for every error of the
 * Messages endpoints (before the stream: the body; after its first byte: an `error` event). The
 * contract's `error.metadata` rides along inside `error`, routing metadata beside it.
 */
import type { ApiError } from "../../domain/errors.js"
import type { StreamFailure } from "../format.js"

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "timeout_error"
  | "api_error"
  | "overloaded_error"

/** Anthropic's error type of an HTTP status (docs/messages.md): the statuses it has no name for are api_error (5xx) or invalid_request_error (4xx). */
export const errorTypeOf = (status: number): AnthropicErrorType => {
  switch (status) {
    case 400:
      return "invalid_request_error"
    case 401:
      return "authentication_error"
    case 402:
      return "billing_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 408:
    case 524:
      return "timeout_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 529:
      return "overloaded_error"
    default:
      return status >= 500 ? "api_error" : "invalid_request_error"
  }
}

export interface MessagesErrorBody {
  readonly type: "error"
  readonly error: { readonly type: AnthropicErrorType; readonly message: string; readonly metadata?: Record<string, unknown> }
  readonly service_metadata?: Record<string, unknown> | null
  readonly openrouter_metadata?: Record<string, unknown> | null
}

export const messagesErrorOf = (e: ApiError): MessagesErrorBody => {
  const error =
    e.metadata === undefined
      ? { type: errorTypeOf(e.status), message: e.message }
      : { type: errorTypeOf(e.status), message: e.message, metadata: e.metadata }
  const body: { -readonly [K in keyof MessagesErrorBody]: MessagesErrorBody[K] } = { type: "error", error }
  if (e.service_metadata !== undefined) body.service_metadata = e.service_metadata
  if (e.openrouter_metadata !== undefined) body.openrouter_metadata = e.openrouter_metadata
  return body
}

/** The body of an error answer of /v1/messages. */
export const messagesErrorBody = (e: ApiError): string => JSON.stringify(messagesErrorOf(e))

/** Anthropic's error type of a failure after the first byte (its code, as the route names it). */
export const streamErrorTypeOf = (code: string): AnthropicErrorType => {
  switch (code) {
    case "rate_limit_exceeded":
      return "rate_limit_error"
    case "timeout":
    case "upstream_timeout":
      return "timeout_error"
    case "overloaded":
    case "server_shutting_down":
      return "overloaded_error"
    case "invalid_request":
      return "invalid_request_error"
    default:
      return "api_error"
  }
}

/** The `error` event's payload of a failure after the first byte. */
export const streamErrorJson = (failure: StreamFailure): string =>
  JSON.stringify({ type: "error", error: { type: streamErrorTypeOf(failure.code), message: failure.message } })
