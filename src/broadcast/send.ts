/**
 * One send's HTTP requests through the safe outbound fetcher (src/outbound/fetch.ts), and the
 * retry policy of a failed one: the first retry within `retry_base_ms`, doubling, `Retry-After`
 * honoured, at most 30 minutes (docs/broadcast.md).
 */
import { now as clockNow } from "../clock.js"
import { OutboundError, safeFetch } from "../outbound/fetch.js"
import type { OutboundRequest } from "./exporter.js"

/** A send's result: `retryAfterMs` from the receiver's `Retry-After`. */
export type SendResult =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly status: number; readonly error: string; readonly retryAfterMs?: number }

/** The answer of `/test`: the status class and a short reason, never the receiver's body. */
export interface TestResult {
  readonly ok: boolean
  readonly status: number
  readonly message: string
}

const MAX_RESPONSE_BYTES = 64 * 1024
const MAX_BACKOFF_MS = 30 * 60_000

const statusClass = (status: number) =>
  status >= 500 ? "server error" : status === 429 ? "rate limited" : status >= 400 ? "client error" : "unexpected status"

/** `Retry-After` as milliseconds: seconds, or an HTTP date. */
export const retryAfterMs = (value: string | null, now = clockNow()): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** The delay before attempt `attempts + 1`: base, doubling, at least what the receiver asked. */
export const backoffMs = (baseMs: number, attempts: number, retryAfter: number | undefined): number =>
  Math.min(MAX_BACKOFF_MS, Math.max(baseMs * 2 ** Math.max(0, attempts - 1), retryAfter ?? 0))

/** Sends one exporter's requests in order; the first failure ends it. */
export const sendAll = async (
  requests: ReadonlyArray<OutboundRequest>,
  timeoutMs: number,
  allowPrivateAddresses: boolean,
): Promise<SendResult> => {
  let status = 0
  for (const r of requests) {
    try {
      const response = await safeFetch(r.url, r, { allowPrivateAddresses, timeoutMs, maxResponseBytes: MAX_RESPONSE_BYTES })
      status = response.status
      if (status < 200 || status >= 300) {
        const after = retryAfterMs(response.headers.get("retry-after"))
        return {
          ok: false,
          status,
          error: `the receiver answered HTTP ${status} (${statusClass(status)})`,
          ...(after === undefined ? {} : { retryAfterMs: after }),
        }
      }
    } catch (e) {
      const message = e instanceof OutboundError ? e.message : `the request failed (${String(e)})`
      return { ok: false, status: 0, error: message }
    }
  }
  return { ok: true, status }
}
