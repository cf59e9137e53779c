/**
 * The gateway's own traces (docs/broadcast.md): with `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, one span per HTTP request, with a child per
 * upstream attempt, exported through @effect/opentelemetry's tracer and the OpenTelemetry SDK
 * (BasicTracerProvider, BatchSpanProcessor, OTLP/HTTP JSON exporter; the standard `OTEL_*` variables
 * apply: headers, timeout, service name). Unset, nothing is built and the server's one check
 * per request is all it costs. Spans are made when a request ends, from the timings its
 * RequestTrace already keeps: nothing per chunk. Attributes are an allowlist: the route
 * pattern (never the path's ids), the status, the model and provider, timings, and a few
 * request headers (ALLOWED_HEADERS: no keys, no vendor auth, no collector headers); never
 * prompt text or SQL. An incoming `traceparent` is ignored unless `tracing.trust_traceparent`.
 */
import { context as otelContext, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Tracer, trace as otelTrace } from "@opentelemetry/api"
import { Context, Effect, Layer } from "effect"

/** Request headers that may go into spans (as `http.request.header.<name>`). */
export const ALLOWED_HEADERS: ReadonlyArray<string> = ["user-agent", "content-type", "content-length", "x-request-id", "accept"]

/** One upstream attempt, as the request's trace kept it (epoch ms). */
export interface AttemptTiming {
  readonly provider: string
  readonly model: string
  readonly startMs: number
  endMs: number | undefined
}

/** What a finished request hands the tracer. */
export interface FinishedRequest {
  readonly method: string
  readonly route: string
  readonly requestId: string
  readonly status: number
  /** Epoch ms. */
  readonly startMs: number
  readonly endMs: number
  readonly headers: Readonly<Record<string, string>> | undefined
  readonly traceparent: string | undefined
  readonly attempts: ReadonlyArray<AttemptTiming> | undefined
  readonly provider: string | undefined
  readonly model: string | undefined
  readonly generationId: string | undefined
  readonly firstTokenMs: number | undefined
  readonly streaming: boolean
  readonly outcome: string | undefined
}

export interface OwnTracer {
  readonly record: (request: FinishedRequest) => void
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The parent context of an incoming W3C `traceparent`, when trusted and well-formed. */
const parentOf = (traceparent: string | undefined) => {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent.trim().toLowerCase())
  if (m === null || m[1] === "0".repeat(32) || m[2] === "0".repeat(16)) return ROOT_CONTEXT
  return otelTrace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: Number.parseInt(m[3] as string, 16),
    isRemote: true,
  })
}

/** Spans of one finished request on `tracer`. */
export const recordOn =
  (tracer: Tracer, trustTraceparent: boolean) =>
  (r: FinishedRequest): void => {
    const parent = trustTraceparent ? parentOf(r.traceparent) : ROOT_CONTEXT
    const attributes: Record<string, string | number | boolean> = {
      "http.request.method": r.method,
      "http.route": r.route,
      "http.response.status_code": r.status,
      "gateway.request_id": r.requestId,
    }
    if (r.generationId !== undefined) attributes["gen_ai.response.id"] = r.generationId
    if (r.model !== undefined) attributes["gen_ai.request.model"] = r.model
    if (r.provider !== undefined) attributes["gen_ai.provider.name"] = r.provider
    if (r.streaming) attributes["gateway.streaming"] = true
    if (r.outcome !== undefined) attributes["gateway.outcome"] = r.outcome
    if (r.firstTokenMs !== undefined) attributes["gateway.time_to_first_token_ms"] = r.firstTokenMs
    for (const [name, value] of Object.entries(r.headers ?? {})) attributes[`http.request.header.${name}`] = value
    const span = tracer.startSpan(`${r.method} ${r.route}`, { kind: SpanKind.SERVER, startTime: r.startMs, attributes }, parent)
    if (r.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
    const inside = otelTrace.setSpan(otelContext.active(), span)
    for (const [i, a] of (r.attempts ?? []).entries()) {
      const child = tracer.startSpan(
        `upstream ${a.provider}`,
        {
          kind: SpanKind.CLIENT,
          startTime: a.startMs,
          attributes: { "gen_ai.provider.name": a.provider, "gen_ai.request.model": a.model, "gateway.attempt.index": i },
        },
        inside,
      )
      child.end(a.endMs ?? r.endMs)
    }
    span.end(r.endMs)
  }

/** Whether the environment asks for the gateway's own traces. */
export const tracingRequested = (env: Readonly<Record<string, string | undefined>> = process.env): boolean =>
  (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "") !== "" && env.OTEL_SDK_DISABLED !== "true"

export class OwnTraces extends Context.Tag("OwnTraces")<OwnTraces, OwnTracer | undefined>() {
  /**
   * The tracer when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, else undefined. The provider (and its
   * batch of spans) is flushed and shut down with the layer.
   */
  static readonly layer = (trustTraceparent: boolean) =>
    Layer.unwrapScoped(
      Effect.gen(function* () {
        if (!tracingRequested()) return Layer.succeed(OwnTraces, undefined)
        // Loaded only when tracing is on: the SDK and the exporter take ~1 s to import on a busy machine (every CLI command paid it).
        const [OtelResource, OtelTracers, { OTLPTraceExporter }, { BasicTracerProvider, BatchSpanProcessor }] = yield* Effect.promise(() =>
          Promise.all([
            import("@effect/opentelemetry/Resource"),
            import("@effect/opentelemetry/Tracer"),
            import("@opentelemetry/exporter-trace-otlp-http"),
            import("@opentelemetry/sdk-trace-base"),
          ]),
        )
        // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES apply; the service is "gateway" otherwise.
        const resource = OtelResource.layerFromEnv({ "service.name": process.env.OTEL_SERVICE_NAME ?? "gateway" })
        // The SDK's provider (BatchSpanProcessor over the OTLP/HTTP exporter), flushed and shut down with the layer.
        const provider = Layer.scoped(
          OtelTracers.OtelTracerProvider,
          Effect.flatMap(OtelResource.Resource, (r) =>
            Effect.acquireRelease(
              Effect.sync(() => new BasicTracerProvider({ resource: r, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] })),
              (p) => Effect.promise(() => p.shutdown().catch(() => undefined)),
            ),
          ),
        ).pipe(Layer.provideMerge(resource))
        const ctx = yield* Layer.build(OtelTracers.layerTracer.pipe(Layer.provide(provider)))
        const tracer = Context.get(ctx, OtelTracers.OtelTracer)
        return Layer.succeed(OwnTraces, { record: recordOn(tracer, trustTraceparent) })
      }),
    )
}
