/**
 * The front door's observer (docs/architecture.md, "A model request's path", stage 1): every
 * route's handler runs inside `observed`, which starts its `RequestTrace`, admits it under the
 * in-flight caps (or refuses it: busy, shutting down), turns a failure into the route's envelope,
 * and at the answer's end (the response, or a stream's last event) records the route's metrics,
 * the request line and the gateway's own trace, and gives the connection its idle timeout back.
 *
 * What it needs is one `FrontDoor`, made once at start by the server (src/http/server.ts); each
 * route's handler is made once when the route table is. Per request it allocates what it did as
 * a closure of the server: the trace and the answer, nothing more.
 */
import { ALLOWED_HEADERS, type OwnTracer } from "../broadcast/own-traces.js"
import type { Settings } from "../config/Config.js"
import { type ApiError, errorResponse, InternalError, ServiceUnavailable } from "../domain/errors.js"
import { logWriter } from "../lib/log.js"
import type { RequestLifecycle, Refusal } from "../pipeline/lifecycle.js"
import { RequestTrace, serverTiming, type TraceEnd } from "../pipeline/trace.js"
import type { GenerationStore } from "../services/GenerationStore.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { compressedJson, MIN_COMPRESSED_BYTES } from "./compress.js"
import { type Cors, type CorsAccess, corsAccessOf } from "./cors.js"
import { type GatewayMetrics, type RouteMetrics, requestIdOf } from "./metrics.js"
import type { makeRequestLogger } from "./request-log.js"

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
export type Handler = (req: Request) => Response | Promise<Response>
export type TracedHandler = (req: Request, trace: RequestTrace) => Response | Promise<Response>

/**
 * What handlers ask of the server a request came through: its client's address (per-address
 * caps) and its idle timeout (lifted while an authenticated request runs). `Bun.serve`'s server
 * is one; the test kit's in-process client (src/testing/) is another.
 */
export interface RequestContext {
  readonly requestIP: (req: Request) => { readonly address: string } | null
  readonly timeout: (req: Request, seconds: number) => void
}

/** The server's shared state as every route's observer reads it; `context` and `draining` change (bind, shutdown). */
export interface FrontDoor {
  readonly settings: Settings
  /** Undefined when GATEWAY_METRICS=off. */
  readonly metrics: GatewayMetrics | undefined
  readonly logRequest: ReturnType<typeof makeRequestLogger>
  /** Debug logging keeps request bodies for the request line. */
  readonly keepBodies: boolean
  /** The gateway's own traces: undefined unless OTEL_EXPORTER_OTLP_ENDPOINT is set (one check per request then). */
  readonly ownTraces: OwnTracer | undefined
  readonly lifecycle: RequestLifecycle
  readonly generations: GenerationStore
  readonly cors: Cors
  /** The server requests come through, bound before the first request. */
  context: RequestContext
  /** A graceful shutdown has begun: every request is refused. */
  draining: boolean
}

/** Early refusals close the connection: a body the client may still be sending is not read. */
export const closing = (res: Response): Response => {
  res.headers.set("connection", "close")
  return res
}

/** Marks a request authenticated: Bun's idle timeout is lifted for it until its answer ends (`traceEnd`). */
export const authenticatedOn = (front: FrontDoor) => {
  const idleTimeout = front.settings.idleTimeoutS
  return (req: Request, trace: RequestTrace | undefined) => {
    if (idleTimeout === 0 || trace === undefined) return
    front.context.timeout(req, 0)
    trace.lifted = req
  }
}

/** During a graceful shutdown, a request on a kept-alive connection is refused and the connection closed. */
const shuttingDown = (errorOf: (e: ApiError) => Response) =>
  closing(errorOf(new ServiceUnavailable({ message: "The gateway is shutting down; retry on another instance" })))

/** Over a cap on requests in flight: 503, retry in a second, and the connection closed. */
const busy = (settings: Settings, over: Refusal, errorOf: (e: ApiError) => Response) =>
  closing(
    errorOf(
      new ServiceUnavailable({
        message:
          over === "overall"
            ? `The gateway has ${settings.maxInFlight} requests in flight, its maximum; retry shortly`
            : `Your address has ${settings.maxInFlightPerIp} requests in flight, the maximum per client address; retry shortly`,
        retry_after: 1,
      }),
    ),
  )

/** The end of a request's trace on `route`: its metrics, its log line, its own span, and the connection's idle timeout back. */
const traceEnd = (front: FrontDoor, routeMetrics: RouteMetrics | undefined): TraceEnd => {
  const { metrics, logRequest, ownTraces, lifecycle } = front
  const idleTimeout = front.settings.idleTimeoutS
  return (trace, status) => {
    const totalMs = performance.now() - trace.startedAt
    if (metrics !== undefined && routeMetrics !== undefined) {
      routeMetrics.record(status, totalMs / 1000)
      if (trace.streaming) metrics.streamsEnded++
      if (trace.provider !== undefined) {
        metrics.upstream.of(trace.provider).observe(trace.upstreamMs / 1000)
        metrics.overhead.observe(((trace.streaming ? trace.headMs : totalMs) - trace.upstreamMs) / 1000)
        if (trace.firstTokenMs !== undefined) metrics.timeToFirstToken.of(trace.provider).observe(trace.firstTokenMs / 1000)
      }
    }
    logRequest?.(trace, status, totalMs)
    ownTraces?.record({
      method: trace.method,
      route: trace.route,
      requestId: trace.id,
      status,
      startMs: performance.timeOrigin + trace.startedAt,
      endMs: performance.timeOrigin + trace.startedAt + totalMs,
      headers: trace.spanHeaders,
      traceparent: trace.traceparent,
      attempts: trace.attemptLog,
      provider: trace.provider,
      model: trace.model,
      generationId: trace.generationId,
      firstTokenMs: trace.firstTokenMs,
      streaming: trace.streaming,
      outcome: trace.outcome,
    })
    // The answer ends (a JSON body is handed over, a stream is closing): idle connections are bounded again.
    if (trace.lifted !== undefined) {
      front.context.timeout(trace.lifted, idleTimeout)
      trace.lifted = undefined
    }
    lifecycle.leave(trace)
  }
}

/**
 * A handler measured and logged as `route`: the trace ends with the response, or with the
 * stream's last event. Its own refusals (busy, shutting down, a failure) are in `errorOf`'s envelope.
 */
export const observed = (
  front: FrontDoor,
  route: string,
  method: string,
  handler: TracedHandler,
  errorOf: (e: ApiError) => Response = errorResponse,
  access: CorsAccess = corsAccessOf(route, method, false),
): Handler => {
  const { metrics, settings, keepBodies, ownTraces, lifecycle, generations, cors } = front
  const routeMetrics = metrics?.route(route, method)
  const finish = traceEnd(front, routeMetrics)
  return async (req) => {
    if (front.draining) return shuttingDown(errorOf)
    const trace = new RequestTrace(requestIdOf(req.headers), method, route, keepBodies, finish)
    if (ownTraces !== undefined) {
      trace.attemptLog = []
      trace.spanHeaders = {}
      for (const name of ALLOWED_HEADERS) {
        const value = req.headers.get(name)
        if (value !== null) trace.spanHeaders[name] = value
      }
      trace.traceparent = req.headers.get("traceparent") ?? undefined
    }
    const over = lifecycle.enter(req, trace)
    if (over !== undefined) {
      routeMetrics?.record(503, 0)
      return busy(settings, over, errorOf)
    }
    let res: Response
    try {
      res = await handler(req, trace)
    } catch (e) {
      trace.streaming = false
      if (req.signal.aborted) {
        // The client went away (e.g. before its body arrived): not a server error (499, as nginx logs it).
        res = new Response(null, { status: 499 })
      } else if (isStoreUnavailable(e)) {
        // The database unreachable: the contract's 503 with Retry-After (logged once per outage by the ledger).
        generations.unavailable("answering a request", e)
        res = errorOf(new ServiceUnavailable({ message: "The gateway's database is unreachable; try again shortly", retry_after: 5 }))
      } else {
        if (settings.logLevel !== "none") {
          logWriter.write(JSON.stringify({ time: new Date().toISOString(), level: "error", msg: "unhandled failure", request_id: trace.id, error: String(e) }))
        }
        res = errorOf(new InternalError({ message: "Internal server error" }))
      }
    }
    const headMs = performance.now() - trace.startedAt
    trace.headMs = headMs
    if (!trace.headed) {
      try {
        res.headers.set("x-request-id", trace.id)
        res.headers.set("server-timing", serverTiming(trace, headMs))
      } catch {
        // A response with immutable headers goes out without them.
      }
    }
    // Browsers and compressing clients only: one header read each for every other request.
    if (!trace.streaming) {
      const accept = req.headers.get("accept-encoding")
      // A model answer its handler measured as short goes as it is: not read again (~4 µs) to learn its size.
      if (accept !== null && (trace.jsonChars === undefined || trace.jsonChars >= MIN_COMPRESSED_BYTES)) {
        const compressed = compressedJson(res, accept)
        res = compressed instanceof Promise ? await compressed : compressed
      }
    }
    const origin = req.headers.get("origin")
    if (origin !== null) cors.apply(res, origin, access)
    if (!trace.streaming) trace.end(res.status)
    else if (metrics !== undefined) metrics.streamsStarted++
    return res
  }
}
