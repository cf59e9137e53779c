/** How an upstream failure reaches the caller: the contract's status, and whether to try the next endpoint. */
import {
  type ApiError,
  BadGateway,
  BadRequest,
  Overloaded,
  RateLimited,
  Unprocessable,
  UpstreamTimeout,
} from "../domain/errors.js"
import { ProviderError, type ProviderErrorKind } from "../providers/types.js"

/** Failures before the first byte that move to the next candidate: nothing has reached the client yet (docs/routing.md). */
const RETRYABLE: ReadonlySet<ProviderErrorKind> = new Set([
  "rate_limited",
  "overloaded",
  "timeout",
  "server",
  "connection",
  "context_length",
])

export const isRetryable = (e: ProviderError) => RETRYABLE.has(e.kind)

export const asProviderError = (e: unknown): ProviderError =>
  e instanceof ProviderError ? e : new ProviderError("connection", e instanceof Error ? e.message : String(e))

export const apiErrorOf = (e: ProviderError, provider: string): ApiError => {
  switch (e.kind) {
    case "bad_request":
      return e.upstreamStatus === 422
        ? new Unprocessable({ message: `Provider ${provider}: ${e.message}` })
        : new BadRequest({ message: `Provider ${provider}: ${e.message}` })
    case "context_length":
      return new BadRequest({ message: `Provider ${provider}: the input is longer than the model's context: ${e.message}` })
    case "auth":
      return new BadGateway({
        message: `Provider ${provider} refused the gateway's credentials (a gateway configuration problem, not yours)`,
      })
    case "rate_limited":
      return new RateLimited({
        message: `Provider ${provider} is rate limiting requests: ${e.message}`,
        retry_after: e.retryAfterSeconds ?? 1,
      })
    case "overloaded":
      return new Overloaded({ message: `Provider ${provider} is temporarily overloaded: ${e.message}` })
    case "timeout":
      return new UpstreamTimeout({ message: `Provider ${provider} timed out` })
    case "server":
    case "connection":
      return new BadGateway({ message: `Provider ${provider} failed: ${e.message}` })
  }
}

/** The `error.code` string of `response.failed` after the stream started. */
export const failureCodeOf = (e: ProviderError): string => {
  switch (e.kind) {
    case "rate_limited":
      return "rate_limit_exceeded"
    case "timeout":
      return "upstream_timeout"
    case "overloaded":
      return "overloaded"
    case "bad_request":
    case "context_length":
      return "invalid_request"
    default:
      return "server_error"
  }
}
