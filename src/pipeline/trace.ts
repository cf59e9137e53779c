/**
 * `RequestTrace` is what one request carries from the server's front door through the data-plane
 * route: its request id, the time spent waiting on the upstream, the provider, and for a stream the
 * call that ends it. The pipeline writes it; the front door gives it its end (`TraceEnd`), where a
 * finished trace becomes metrics, a `Server-Timing` header and one log line (src/http/metrics.ts,
 * src/http/request-log.ts).
 */
import type { AttemptTiming } from "../broadcast/own-traces.js"

/** Ends a trace: the server records it (metrics, log line) once the response is complete. */
export type TraceEnd = (trace: RequestTrace, status: number) => void

/**
 * Milliseconds with two decimals, as `toFixed(2)` writes them (~25 ns against ~100 ns, Bun 1.4.5);
 * a value exactly halfway in binary may round the other way, which a duration does not mind.
 * Negative, huge or not-finite values go to `toFixed`.
 */
export const twoDecimals = (ms: number): string => {
  if (!(ms >= 0 && ms < 1e9)) return ms.toFixed(2)
  const hundredths = Math.round(ms * 100)
  const whole = Math.floor(hundredths / 100)
  const fraction = hundredths - whole * 100
  return `${whole}.${fraction < 10 ? "0" : ""}${fraction}`
}

/** The `Server-Timing` value: the gateway's own time to the head, and the upstream's when there was one. */
export const serverTiming = (trace: RequestTrace, headMs: number): string =>
  trace.provider === undefined
    ? `gw;dur=${twoDecimals(headMs)}`
    : `gw;dur=${twoDecimals(headMs - trace.upstreamMs)}, upstream;dur=${twoDecimals(trace.upstreamMs)}`

/** What one request carries through the server and the data-plane route. */
export class RequestTrace {
  /** performance.now() when the request arrived. */
  readonly startedAt = performance.now()
  /** Milliseconds spent waiting on the upstream (its head, and a JSON body). */
  upstreamMs = 0
  /** Milliseconds from the start of the upstream call to its first token, when one came. */
  firstTokenMs: number | undefined = undefined
  /** performance.now() when the last upstream attempt began. */
  upstreamStartedAt = 0
  provider: string | undefined = undefined
  model: string | undefined = undefined
  generationId: string | undefined = undefined
  /** The response is a stream: the route calls `endStream` when its last byte is queued. */
  streaming = false
  /** The request body, kept only when debug logging is on. */
  body: string | undefined = undefined
  /** Milliseconds to the response head (set when the head is handed to Bun). */
  headMs = 0
  /** How a stream ended: completed, incomplete, failed, cancelled. */
  outcome: string | undefined = undefined
  /** The handler put `x-request-id` and `Server-Timing` on its response itself (see `head`). */
  headed = false
  /** A JSON answer's length in characters, when its handler said it (`head`): a short one is not read again to be compressed. */
  jsonChars: number | undefined = undefined
  /** The request whose idle timeout is lifted until its answer ends (the server sets it back). */
  lifted: Request | undefined = undefined
  /** Where the server's in-flight count holds this request (`InFlight`). */
  inFlightRequest: Request | undefined = undefined
  address: string | undefined = undefined
  /** Only while the gateway exports its own traces (src/broadcast/own-traces.ts): each upstream attempt, the allowed headers, the caller's traceparent. */
  attemptLog: Array<AttemptTiming> | undefined = undefined
  spanHeaders: Record<string, string> | undefined = undefined
  traceparent: string | undefined = undefined
  private ended = false

  constructor(
    readonly id: string,
    readonly method: string,
    readonly route: string,
    readonly keepBody: boolean,
    private readonly onEnd: TraceEnd,
  ) {}

  /**
   * `x-request-id` and `Server-Timing` for a response the handler builds now: set at
   * construction, the server need not touch the response's headers after (~1 µs per answer).
   */
  head(headers: Record<string, string>, jsonChars?: number): Record<string, string> {
    this.headed = true
    this.jsonChars = jsonChars
    headers["x-request-id"] = this.id
    headers["server-timing"] = serverTiming(this, performance.now() - this.startedAt)
    return headers
  }

  /** An upstream attempt begins: the provider and model it is for. */
  attempt(provider: string, model: string): void {
    this.provider = provider
    this.model = model
    this.upstreamStartedAt = performance.now()
    this.attemptLog?.push({ provider, model, startMs: Date.now(), endMs: undefined })
  }

  /** The attempt's upstream answered (or failed): its wait counts as upstream time. */
  answered(): void {
    this.upstreamMs += performance.now() - this.upstreamStartedAt
    const last = this.attemptLog?.[this.attemptLog.length - 1]
    if (last !== undefined) last.endMs = Date.now()
  }

  markFirstToken(): void {
    this.firstTokenMs ??= performance.now() - this.upstreamStartedAt
  }

  /** Called once by the route when a streamed response has ended (any way). */
  endStream(outcome: string): void {
    this.outcome = outcome
    this.end(200)
  }

  end(status: number): void {
    if (this.ended) return
    this.ended = true
    this.onEnd(this, status)
  }
}
