/**
 * What the vendor exporter tests share: a fixed batch (a real OTLP/HTTP JSON body made by the
 * OpenTelemetry SDK and serializer, and two generations: one with content, one in privacy mode),
 * a loopback receiver that records what arrives, and a reader for OTLP protobuf bodies written
 * independently of the production code, so the two are checked against each other.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api"
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { type Delivery, type GenerationView, type OutboundRequest, type TraceBatch, traceBatch } from "../../src/broadcast/exporter.js"
import { Either } from "effect"
import { REGISTERED_KINDS } from "../../src/broadcast/exporters/index.js"
import { decodeConfig, type DestinationRules } from "../../src/domain/destinations.js"

// ---- the fixed batch ----

export const CONTENT: GenerationView = {
  id: "gen_content_1",
  traceId: "0af7651916cd43dd8448eb211c80319c",
  spanId: "b7ad6b7169203331",
  traceName: "support-chat",
  spanName: "responses",
  generationName: "answer",
  parentSpanId: undefined,
  createdAt: "2026-11-26T05:30:00.123Z",
  startMs: Date.parse("2026-11-26T05:30:00.123Z"),
  endMs: Date.parse("2026-11-26T05:30:01.623Z"),
  model: "openai/gpt-4o-mini",
  upstreamModel: "gpt-4o-mini-2024-07-18",
  provider: "openai",
  status: "completed",
  finishReason: "stop",
  streamed: true,
  inputTokens: 12,
  outputTokens: 7,
  cachedTokens: 4,
  reasoningTokens: 0,
  cost: { total: 0.000021, input: 0.000009, output: 0.000012, cached: 0.000001 },
  sessionId: "sess-42",
  user: "user-7",
  input: [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Say hello" },
  ],
  output: "Hello!",
  metadata: { env: "test", team: "blue" },
}

/** Privacy mode: no content fields; also a failed generation under a caller's parent span, without cost or user. */
export const PRIVATE: GenerationView = {
  id: "gen_private_2",
  traceId: "5b8efff798038103d269b633813fc60c",
  spanId: "eee19b7ec3c1b174",
  traceName: "batch-job",
  spanName: "responses",
  generationName: "classify",
  parentSpanId: "00f067aa0ba902b7",
  createdAt: "2026-11-27T00:00:05.000Z",
  startMs: Date.parse("2026-11-27T00:00:05.000Z"),
  endMs: Date.parse("2026-11-27T00:00:05.250Z"),
  model: "anthropic/claude-haiku",
  upstreamModel: "claude-haiku-4",
  provider: "anthropic",
  status: "failed",
  finishReason: null,
  streamed: false,
  inputTokens: 30,
  outputTokens: 0,
  cachedTokens: 0,
  reasoningTokens: 0,
  sessionId: null,
  user: null,
  metadata: {},
  error: { status: 502, message: "upstream failed" },
}

export const ATTEMPT_SPAN = { [CONTENT.traceId]: "1111111111111111", [PRIVATE.traceId]: "2222222222222222" } as const

const genAi = (g: GenerationView) => ({
  "gen_ai.operation.name": "chat",
  "gen_ai.request.model": g.model,
  "gen_ai.response.model": g.upstreamModel,
  "gen_ai.provider.name": g.provider,
  "gen_ai.response.id": g.id,
  "gen_ai.usage.input_tokens": g.inputTokens,
  "gen_ai.usage.output_tokens": g.outputTokens,
  ...(g.sessionId === null ? {} : { "session.id": g.sessionId }),
  ...(g.user === null ? {} : { "user.id": g.user }),
  ...(g.finishReason === null ? {} : { "gen_ai.response.finish_reasons": [g.finishReason] }),
  ...(g.input === undefined ? {} : { "gen_ai.input.messages": JSON.stringify(g.input) }),
  ...(g.output === undefined ? {} : { "gen_ai.output.messages": JSON.stringify([{ role: "assistant", content: g.output }]) }),
  ...Object.fromEntries(Object.entries(g.metadata).map(([k, v]) => [`trace.metadata.${k}`, v])),
})

/** The OTLP JSON body of both generations: for each, a root span and one upstream attempt under it. */
const buildOtlp = (): Uint8Array => {
  const ids: Array<string> = []
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "gateway" }),
    idGenerator: {
      generateTraceId: () => ids.shift() ?? "",
      generateSpanId: () => ids.shift() ?? "",
    },
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  })
  const tracer = provider.getTracer("gateway.broadcast", "1.0.0")
  for (const g of [CONTENT, PRIVATE]) {
    const parent =
      g.parentSpanId === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, { traceId: g.traceId, spanId: g.parentSpanId, traceFlags: 1, isRemote: true })
    // The SDK asks for the span id first, then (for a root) the trace id.
    ids.push(g.spanId)
    if (g.parentSpanId === undefined) ids.push(g.traceId)
    const root = tracer.startSpan(g.traceName, { kind: SpanKind.SERVER, startTime: g.startMs, attributes: genAi(g) }, parent)
    if (g.error !== undefined) root.setStatus({ code: SpanStatusCode.ERROR, message: g.error.message })
    ids.push(ATTEMPT_SPAN[g.traceId as keyof typeof ATTEMPT_SPAN])
    const attempt = tracer.startSpan(
      `chat ${g.upstreamModel}`,
      { kind: SpanKind.CLIENT, startTime: g.startMs + 5, attributes: { "gen_ai.provider.name": g.provider, "gateway.attempt": 1 } },
      trace.setSpan(ROOT_CONTEXT, root),
    )
    attempt.end(g.endMs - 5)
    root.end(g.endMs)
  }
  const bytes = JsonTraceSerializer.serializeRequest(exporter.getFinishedSpans())
  if (bytes === undefined) throw new Error("fixture: the OTLP serializer wrote nothing")
  return bytes
}

export const BATCH: TraceBatch = traceBatch(buildOtlp(), [CONTENT, PRIVATE])

// ---- a loopback receiver ----

export interface Received {
  readonly method: string
  /** Path and query as the receiver saw them. */
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: Headers
  readonly body: Uint8Array
  /** The URL the exporter built (before it was pointed at the loopback receiver). */
  readonly intendedUrl: string
}

/** Sends every request of `delivery` to a loopback Bun.serve at the same path and query; what arrived, in order. */
export const deliverToLoopback = async (delivery: Delivery): Promise<Array<Received>> => {
  if (!("requests" in delivery)) throw new Error(`expected requests, got unsupported: ${delivery.unsupported}`)
  const received: Array<Omit<Received, "intendedUrl">> = []
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url)
      received.push({
        method: req.method,
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: new Uint8Array(await req.arrayBuffer()),
      })
      return new Response(null, { status: 202 })
    },
  })
  try {
    for (const r of delivery.requests) {
      const u = new URL(r.url)
      const res = await fetch(`http://127.0.0.1:${server.port}${u.pathname}${u.search}`, {
        method: r.method,
        headers: r.headers,
        body: typeof r.body === "string" ? r.body : new Uint8Array(r.body),
      })
      if (res.status !== 202) throw new Error(`loopback answered ${res.status}`)
    }
  } finally {
    server.stop(true)
  }
  return received.map((r, i) => ({ ...r, intendedUrl: (delivery.requests[i] as OutboundRequest).url }))
}

export const json = (r: Received): any => JSON.parse(new TextDecoder().decode(r.body))

// ---- OTLP, normalised for comparison ----

export interface NormalSpan {
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  name: string
  kind: number
  start: string
  end: string
  attributes: Record<string, unknown>
  status: { code: number; message: string }
}
export interface NormalTrace {
  resourceSpans: Array<{
    resource: Record<string, unknown>
    scopeSpans: Array<{ scope: { name: string; version: string }; spans: Array<NormalSpan> }>
  }>
}

const jsonValue = (v: any): unknown => {
  if (v === undefined) return undefined
  if ("stringValue" in v) return v.stringValue
  if ("boolValue" in v) return v.boolValue
  if ("intValue" in v) return Number(v.intValue)
  if ("doubleValue" in v) return v.doubleValue
  if ("arrayValue" in v) return (v.arrayValue.values ?? []).map(jsonValue)
  if ("kvlistValue" in v) return jsonAttributes(v.kvlistValue.values)
  throw new Error(`unexpected AnyValue ${JSON.stringify(v)}`)
}
const jsonAttributes = (kvs: any[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, jsonValue(kv.value)]))

/** An OTLP JSON request, normalised. */
export const normalJson = (otlp: any): NormalTrace => ({
  resourceSpans: (otlp.resourceSpans ?? []).map((rs: any) => ({
    resource: jsonAttributes(rs.resource?.attributes),
    scopeSpans: (rs.scopeSpans ?? []).map((ss: any) => ({
      scope: { name: ss.scope?.name ?? "", version: ss.scope?.version ?? "" },
      spans: (ss.spans ?? []).map((s: any) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId === "" ? undefined : s.parentSpanId,
        name: s.name,
        kind: s.kind ?? 0,
        start: String(s.startTimeUnixNano),
        end: String(s.endTimeUnixNano),
        attributes: jsonAttributes(s.attributes),
        status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
      })),
    })),
  })),
})

/** Minimal protobuf reader: varint, fixed64/32 and length-delimited fields of the OTLP trace messages. */
class Reader {
  pos = 0
  constructor(readonly buf: Uint8Array) {}
  done = () => this.pos >= this.buf.length
  varint(): bigint {
    let result = 0n
    let shift = 0n
    for (;;) {
      const b = this.buf[this.pos++] as number
      result |= BigInt(b & 0x7f) << shift
      if ((b & 0x80) === 0) return result
      shift += 7n
    }
  }
  bytes(): Uint8Array {
    const n = Number(this.varint())
    const out = this.buf.subarray(this.pos, this.pos + n)
    this.pos += n
    return out
  }
  fixed64(): bigint {
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).getBigUint64(0, true)
    this.pos += 8
    return v
  }
  /** Each field as [number, wire type, raw value]. */
  *fields(): Generator<[number, number, bigint | Uint8Array]> {
    while (!this.done()) {
      const tag = Number(this.varint())
      const [field, wire] = [tag >> 3, tag & 7]
      if (wire === 0) yield [field, wire, this.varint()]
      else if (wire === 1) yield [field, wire, this.fixed64()]
      else if (wire === 2) yield [field, wire, this.bytes()]
      else if (wire === 5) {
        const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 4).getUint32(0, true)
        this.pos += 4
        yield [field, wire, BigInt(v)]
      } else throw new Error(`wire type ${wire}`)
    }
  }
}

const text = (b: Uint8Array) => new TextDecoder().decode(b)
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex")

const pbValue = (buf: Uint8Array): unknown => {
  for (const [f, w, v] of new Reader(buf).fields()) {
    if (f === 1) return text(v as Uint8Array)
    if (f === 2) return v === 1n
    if (f === 3) return Number(BigInt.asIntN(64, v as bigint))
    if (f === 4 && w === 1) return new Float64Array(new BigUint64Array([v as bigint]).buffer)[0]
    if (f === 5) return [...new Reader(v as Uint8Array).fields()].map(([, , item]) => pbValue(item as Uint8Array))
    if (f === 6) return pbAttributes([...new Reader(v as Uint8Array).fields()].map(([, , kv]) => kv as Uint8Array))
    if (f === 7) return v
  }
  return undefined
}
const pbAttributes = (kvs: Array<Uint8Array>) => {
  const out: Record<string, unknown> = {}
  for (const kv of kvs) {
    let key = ""
    let value: unknown
    for (const [f, , v] of new Reader(kv).fields()) {
      if (f === 1) key = text(v as Uint8Array)
      if (f === 2) value = pbValue(v as Uint8Array)
    }
    out[key] = value
  }
  return out
}

const pbSpan = (buf: Uint8Array): NormalSpan => {
  const span: NormalSpan = {
    traceId: "",
    spanId: "",
    parentSpanId: undefined,
    name: "",
    kind: 0,
    start: "0",
    end: "0",
    attributes: {},
    status: { code: 0, message: "" },
  }
  const attributes: Array<Uint8Array> = []
  for (const [f, , v] of new Reader(buf).fields()) {
    if (f === 1) span.traceId = hex(v as Uint8Array)
    else if (f === 2) span.spanId = hex(v as Uint8Array)
    else if (f === 4) span.parentSpanId = (v as Uint8Array).length === 0 ? undefined : hex(v as Uint8Array)
    else if (f === 5) span.name = text(v as Uint8Array)
    else if (f === 6) span.kind = Number(v)
    else if (f === 7) span.start = String(v)
    else if (f === 8) span.end = String(v)
    else if (f === 9) attributes.push(v as Uint8Array)
    else if (f === 15) {
      for (const [sf, , sv] of new Reader(v as Uint8Array).fields()) {
        if (sf === 2) span.status.message = text(sv as Uint8Array)
        if (sf === 3) span.status.code = Number(sv)
      }
    }
  }
  span.attributes = pbAttributes(attributes)
  return span
}

/** An OTLP protobuf `ExportTraceServiceRequest`, normalised like `normalJson`. */
export const normalProtobuf = (body: Uint8Array): NormalTrace => ({
  resourceSpans: [...new Reader(body).fields()].map(([, , rs]) => {
    const out: NormalTrace["resourceSpans"][number] = { resource: {}, scopeSpans: [] }
    for (const [f, , v] of new Reader(rs as Uint8Array).fields()) {
      if (f === 1) {
        out.resource = pbAttributes(
          [...new Reader(v as Uint8Array).fields()].filter(([rf]) => rf === 1).map(([, , kv]) => kv as Uint8Array),
        )
      } else if (f === 2) {
        const scope = { name: "", version: "" }
        const spans: Array<NormalSpan> = []
        for (const [sf, , sv] of new Reader(v as Uint8Array).fields()) {
          if (sf === 1) {
            for (const [nf, , nv] of new Reader(sv as Uint8Array).fields()) {
              if (nf === 1) scope.name = text(nv as Uint8Array)
              if (nf === 2) scope.version = text(nv as Uint8Array)
            }
          } else if (sf === 2) spans.push(pbSpan(sv as Uint8Array))
        }
        out.scopeSpans.push({ scope, spans })
      }
    }
    return out
  }),
})

export const allSpans = (t: NormalTrace): Array<NormalSpan> => t.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans))

/** A destination kind of the registry, by its type. */
export const kindOf = (type: string): DestinationRules => {
  const kind = REGISTERED_KINDS.get(type)
  if (kind === undefined) throw new Error(`no ${type} kind in the registry`)
  return kind
}

/** The message of a kind's config refusal; throws when the config is accepted. */
export const refusal = (type: string, config: unknown): string => {
  const decoded = decodeConfig(kindOf(type), config)
  if (Either.isRight(decoded)) throw new Error(`expected ${type} config to be refused`)
  return decoded.left.message
}

