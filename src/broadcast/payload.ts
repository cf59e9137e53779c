/**
 * What broadcast sends: the outbox batch's payloads (each generation as broadcast
 * sees it, written at commit), the view destinations get (privacy mode and the three broadcast_*
 * switches applied), and one OTLP/HTTP JSON trace per generation, serialized by
 * @opentelemetry/otlp-transformer. GenAI semantic conventions v1.37 (`gen_ai.provider.name`,
 * `gen_ai.input.messages` / `gen_ai.output.messages` as JSON strings of role-and-parts messages).
 * Ids derive from the generation id (a redelivery is the same trace), or come from the request's
 * `trace` object when they are valid hex of the right length (else hashed; the original is kept
 * as `trace.original.<key>`).
 */
import { createHash } from "node:crypto"
import { type HrTime, type Link, SpanKind, SpanStatusCode } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base"
import type { AttemptRecord, ContentMessage, EndpointPrices, GenerationEntry } from "../domain/generations.js"
import { fromNanoUsd } from "../domain/pricing.js"
import { otelResources, otlpTransformer } from "./otel-sdk.js"
import type { GenerationView } from "./exporter.js"
import type { FilterSubject } from "./filters.js"

/** The GenAI semantic conventions these spans follow. */
export const GEN_AI_SEMCONV_VERSION = "1.37.0"
export const SERVICE_NAME = "gateway"

/** A generation as broadcast sees it: its record, and what the request path added (no prompt or completion). */
export interface DeliveryPayload {
  readonly id: string
  readonly keyHash: string
  /** The key's owner. */
  readonly ownerId: string
  readonly workspaceId: string
  readonly model: string
  readonly provider: string
  readonly upstreamModel: string
  readonly createdAt: string
  readonly generationTimeMs: number
  readonly latencyMs: number | null
  readonly streamed: boolean
  readonly status: string
  readonly finishReason: string | null
  readonly sessionId: string | null
  /** The request's `user`. */
  readonly user: string | null
  readonly inputTokens: number
  readonly cachedTokens: number
  readonly cacheWriteTokens: number
  readonly outputTokens: number
  readonly reasoningTokens: number
  readonly totalCost: number
  readonly isByok: boolean
  readonly error: { readonly status: number; readonly message: string } | null
  /** The request's `trace` object, as given. */
  readonly trace: Readonly<Record<string, unknown>> | null
  readonly attempts: ReadonlyArray<AttemptRecord>
  /** Request parameters (`gen_ai.request.*`). */
  readonly params: Readonly<Record<string, number | string | boolean>>
  readonly strategy: string | null
  readonly plugins: ReadonlyArray<string>
  readonly pricing: EndpointPrices | null
}

/**
 * What the outbox keeps of a generation beyond its record (the worker reads the rest from the
 * `generations` row committed in the same transaction): ~200 bytes of JSON instead of ~730.
 * Batches written before it hold the whole `DeliveryPayload`, which the worker takes as it is.
 */
export type OutboxExtras = Pick<DeliveryPayload, "id" | "user" | "trace" | "attempts" | "params" | "strategy" | "plugins" | "pricing">

/** The columns of a `generations` row the payload takes. */
export const PAYLOAD_COLUMNS = [
  "id", "key_hash", "user_id", "workspace_id", "model", "provider_name", "upstream_model", "created_at",
  "generation_time_ms", "latency_ms", "streamed", "status", "finish_reason", "session_id", "input_tokens",
  "cached_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens", "total_cost_nano", "is_byok", "error",
] as const
export type PayloadRow = Readonly<Record<(typeof PAYLOAD_COLUMNS)[number], string | number | null>>

/** A stored generation whose record is read from its row (not a whole payload from before the extras). */
export const needsRecord = (stored: OutboxExtras | DeliveryPayload): boolean => !("model" in stored)

/** The payload of a generation from its `generations` row and the extras the outbox kept. */
export const payloadFrom = (row: PayloadRow, extras: OutboxExtras): DeliveryPayload => {
  const error = row.error === null ? null : (JSON.parse(String(row.error)) as { status: number; message: string })
  const text = (v: string | number | null) => (v === null ? null : String(v))
  return {
    ...extras,
    keyHash: String(row.key_hash),
    ownerId: String(row.user_id),
    workspaceId: String(row.workspace_id),
    model: String(row.model),
    provider: String(row.provider_name),
    upstreamModel: String(row.upstream_model),
    createdAt: String(row.created_at),
    generationTimeMs: Number(row.generation_time_ms),
    latencyMs: row.latency_ms === null ? null : Number(row.latency_ms),
    streamed: Number(row.streamed) === 1,
    status: String(row.status),
    finishReason: text(row.finish_reason),
    sessionId: text(row.session_id),
    inputTokens: Number(row.input_tokens),
    cachedTokens: Number(row.cached_tokens),
    cacheWriteTokens: Number(row.cache_write_tokens),
    outputTokens: Number(row.output_tokens),
    reasoningTokens: Number(row.reasoning_tokens),
    totalCost: fromNanoUsd(row.total_cost_nano ?? 0),
    isByok: Number(row.is_byok) === 1,
    error: error === null ? null : { status: error.status, message: error.message },
  }
}

/** The prompt and completion (sealed in the outbox). */
export interface DeliveryContent {
  readonly input: ReadonlyArray<ContentMessage>
  readonly output: string | null
  readonly reasoning: string | null
}

/**
 * A `broadcast_batches` row's `items` (JSON): the generations of one ledger batch that some
 * destination wants (their extras), each with the indexes in `destinations` of the ones that
 * want it. Its `content` is the sealed JSON of a list aligned with `generations` (null where no
 * destination outside privacy mode wants it).
 */
export interface OutboxItems {
  readonly destinations: ReadonlyArray<string>
  readonly generations: ReadonlyArray<{ readonly payload: OutboxExtras | DeliveryPayload; readonly to: ReadonlyArray<number> }>
}

/**
 * How the outbox stores a batch's items and content JSON: zstd (level 1), base64, after a marker
 * (text, so one column type holds it on both engines). The JSON of a batch is one ledger batch's
 * generations with the same keys over and over: ~52 KB of items for 200 generations packs to ~3.3 KB
 * in ~16 µs. Measured (bench-broadcast's gateway, request thread profiled without the Worker):
 * the outbox's rows were +2.5 µs a generation of SQLite statements (their overflow pages, written
 * to the WAL and checkpointed); packed, ~0.1 µs of compression. Rows written before hold plain JSON.
 */
const PACKED = "z1:"
export const packJson = (json: string): string => `${PACKED}${Bun.zstdCompressSync(json, { level: 1 }).toString("base64")}`
export const unpackJson = (stored: string): string =>
  stored.startsWith(PACKED) ? Bun.zstdDecompressSync(Buffer.from(stored.slice(PACKED.length), "base64")).toString("utf8") : stored

/** A batch's opened content: a list; a row carried over from migration 0014 holds one generation's. */
export const contentsOf = (opened: unknown): ReadonlyArray<DeliveryContent | null> =>
  Array.isArray(opened) ? (opened as Array<DeliveryContent | null>) : [opened as DeliveryContent]

const PARAMS = [
  ["temperature", "temperature"],
  ["top_p", "top_p"],
  ["top_k", "top_k"],
  ["max_output_tokens", "max_tokens"],
  ["frequency_penalty", "frequency_penalty"],
  ["presence_penalty", "presence_penalty"],
] as const

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** What the outbox keeps of a generation beyond its record (built once per generation at commit). */
export const extrasOf = (e: GenerationEntry): OutboxExtras => {
  const request = e.broadcast?.request
  const params: Record<string, number | string | boolean> = {}
  if (request !== undefined) {
    for (const [field, name] of PARAMS) {
      const v = request[field]
      if (typeof v === "number") params[name] = v
    }
    params.stream = request.stream
  }
  return {
    id: e.id,
    user: request?.user ?? null,
    trace: isRecord(request?.trace) ? request.trace : null,
    attempts: e.broadcast?.attempts ?? [],
    params,
    strategy: e.broadcast?.strategy ?? null,
    plugins: (request?.plugins ?? []).map((p) => p.id),
    pricing: e.broadcast?.pricing ?? null,
  }
}

/** The prompt and completion, from the request path's references (or the stored content). */
export const contentOf = (e: GenerationEntry): DeliveryContent | undefined => {
  if (e.broadcast !== undefined) {
    const input = e.broadcast.input()
    return {
      input: "messages" in input ? input.messages : [{ role: "user", content: input.prompt }],
      output: e.broadcast.completion,
      reasoning: e.broadcast.reasoning,
    }
  }
  if (e.content != null) {
    const input = e.content.input
    return {
      input: "messages" in input ? input.messages : [{ role: "user", content: input.prompt }],
      output: e.content.output.completion,
      reasoning: e.content.output.reasoning,
    }
  }
  return undefined
}

/** What a rule can test, for one generation. */
export const subjectOf = (p: DeliveryPayload, content: DeliveryContent | undefined, keyName: string | null): FilterSubject => ({
  model: p.model,
  provider: p.provider,
  session_id: p.sessionId,
  user_id: p.user,
  api_key_name: keyName,
  finish_reason: p.finishReason,
  input: content === undefined ? null : content.input.map((m) => m.content).join("\n"),
  output: content?.output ?? null,
  total_cost: p.totalCost,
  total_tokens: p.inputTokens + p.outputTokens,
  prompt_tokens: p.inputTokens,
  completion_tokens: p.outputTokens,
})

// ---- ids ----

const HEX32 = /^[0-9a-f]{32}$/
const HEX16 = /^[0-9a-f]{16}$/
const hashHex = (text: string, length: number) => createHash("sha256").update(text).digest("hex").slice(0, length)
/** 64 hex from the generation id: its trace id, root span id and first attempt's span id, one hash for the three. */
const idsOf = (generationId: string) => createHash("sha256").update(`generation:${generationId}`).digest("hex")
const validId = (value: unknown, pattern: RegExp, zeros: string): string | undefined => {
  if (typeof value !== "string") return undefined
  const lower = value.toLowerCase()
  return pattern.test(lower) && lower !== zeros ? lower : undefined
}

/** The destination's switches that shape a view. */
export interface ViewOptions {
  readonly privacyMode: boolean
  readonly cost: boolean
  readonly identity: boolean
  readonly requestContext: boolean
}

const SHAPING_KEYS = new Set(["trace_id", "trace_name", "span_name", "generation_name", "parent_span_id"])

/** Everything one trace needs: the flat view (exporters), and what only the spans carry. */
export interface TraceItem {
  readonly view: GenerationView
  readonly payload: DeliveryPayload
  readonly options: ViewOptions
  readonly keyName: string | null
  /** Attributes of the original `trace` ids that were not valid hex (hashed instead). */
  readonly originals: Readonly<Record<string, string>>
  /** The generation's derived ids (`idsOf`). */
  readonly ids: string
  /** About what its spans weigh in an OTLP JSON body, in bytes (batches stay under `batch_max_bytes`). */
  readonly bytes: number
  /** Its spans' OTLP JSON, written on first use (src/broadcast/payload.ts `otlpOf`). */
  spansJson: string | undefined
}

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined)

export const costBreakdown = (p: DeliveryPayload) => {
  const prices = p.pricing
  if (prices === null) return { total: p.totalCost, input: 0, output: 0, cached: 0 }
  const cached = Math.min(p.cachedTokens, p.inputTokens)
  const written = Math.min(p.cacheWriteTokens, p.inputTokens - cached)
  const plain = p.inputTokens - cached - written
  const perToken = 1e-6
  return {
    total: p.totalCost,
    input: plain * prices.prompt * perToken + written * (prices.cache_write ?? prices.prompt) * perToken,
    output: p.outputTokens * prices.completion * perToken,
    cached: cached * (prices.cached_prompt ?? prices.prompt) * perToken,
  }
}

/** One generation as a destination with `options` sees it. */
export const traceItemOf = (
  payload: DeliveryPayload,
  content: DeliveryContent | undefined,
  options: ViewOptions,
  keyName: string | null,
): TraceItem => {
  const trace = payload.trace ?? {}
  const ids = idsOf(payload.id)
  const originals: Record<string, string> = {}
  const givenTrace = trace.trace_id
  let traceId = validId(givenTrace, HEX32, "0".repeat(32))
  if (traceId === undefined) {
    if (givenTrace !== undefined && givenTrace !== null) {
      originals["trace.original.trace_id"] = String(givenTrace)
      traceId = hashHex(`trace:${String(givenTrace)}`, 32)
    } else traceId = ids.slice(0, 32)
  }
  const givenParent = trace.parent_span_id
  let parentSpanId = validId(givenParent, HEX16, "0".repeat(16))
  if (parentSpanId === undefined && givenParent !== undefined && givenParent !== null) {
    originals["trace.original.parent_span_id"] = String(givenParent)
    parentSpanId = hashHex(`span:${String(givenParent)}`, 16)
  }
  const metadata: Record<string, string> = {}
  for (const [key, value] of Object.entries(trace)) {
    if (SHAPING_KEYS.has(key) || value === undefined) continue
    metadata[key] = typeof value === "string" ? value : JSON.stringify(value)
  }
  const startMs = Date.parse(payload.createdAt)
  const defaultName = `chat ${payload.model}`
  const withContent = !options.privacyMode && content !== undefined
  const view: GenerationView = {
    id: payload.id,
    traceId,
    spanId: ids.slice(32, 48),
    traceName: str(trace.trace_name) ?? defaultName,
    spanName: str(trace.span_name) ?? str(trace.trace_name) ?? defaultName,
    generationName: str(trace.generation_name) ?? defaultName,
    parentSpanId,
    createdAt: payload.createdAt,
    startMs,
    endMs: startMs + payload.generationTimeMs,
    model: payload.model,
    upstreamModel: payload.upstreamModel,
    provider: payload.provider,
    status: payload.status,
    finishReason: payload.finishReason,
    streamed: payload.streamed,
    inputTokens: payload.inputTokens,
    outputTokens: payload.outputTokens,
    cachedTokens: payload.cachedTokens,
    reasoningTokens: payload.reasoningTokens,
    ...(options.cost ? { cost: costBreakdown(payload) } : {}),
    sessionId: payload.sessionId,
    user: payload.user,
    ...(withContent
      ? {
          input: content.input,
          ...(content.output === null ? {} : { output: content.output }),
          ...(content.reasoning === null ? {} : { reasoning: content.reasoning }),
        }
      : {}),
    metadata,
    // The error's text can quote the prompt: privacy mode keeps only its status.
    ...(payload.error === null
      ? {}
      : { error: options.privacyMode ? { status: payload.error.status, message: `HTTP ${payload.error.status}` } : payload.error }),
  }
  return { view, payload, options, keyName, originals, ids, bytes: bytesOf(withContent ? content : undefined), spansJson: undefined }
}

/** A generation's spans with every switch on and no content: ~3.4 KB of OTLP JSON. */
const SPANS_BYTES = 4_000

/**
 * About what a generation's spans weigh: its content's characters, twice (JSON escapes, up to three
 * UTF-8 bytes a character), over the spans without content. An estimate, not a serialization.
 */
const bytesOf = (content: DeliveryContent | undefined): number => {
  if (content === undefined) return SPANS_BYTES
  let chars = (content.output?.length ?? 0) + (content.reasoning?.length ?? 0)
  for (const m of content.input) chars += m.content.length + m.role.length
  return SPANS_BYTES + 2 * chars
}

// ---- spans ----

const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)]
const duration = (fromMs: number, toMs: number): HrTime => hrTime(Math.max(0, toMs - fromMs))
/** The spans' resource for the official serializer, made on first use (its package is loaded then: otel-sdk.ts). */
let resource: Resource | undefined
const resourceOnce = (): Resource => {
  resource ??= otelResources().resourceFromAttributes({ "service.name": SERVICE_NAME })
  return resource
}
const scope = { name: "gateway.broadcast", version: GEN_AI_SEMCONV_VERSION, schemaUrl: `https://opentelemetry.io/schemas/${GEN_AI_SEMCONV_VERSION}` }
const NO_LINKS: Array<Link> = []
const NO_EVENTS: Array<TimedEvent> = []

type Attributes = Record<string, string | number | boolean | Array<string>>

/** One span as both encodings take it: the official serializer's `ReadableSpan` (`span`) and this file's JSON writer. */
interface SpanData {
  readonly name: string
  readonly kind: SpanKind
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly startMs: number
  readonly endMs: number
  readonly attributes: Attributes
  readonly error: string | undefined
}

const span = (args: SpanData): ReadableSpan => ({
  name: args.name,
  kind: args.kind,
  spanContext: () => ({ traceId: args.traceId, spanId: args.spanId, traceFlags: 1 }),
  parentSpanContext: args.parentSpanId === undefined ? undefined : { traceId: args.traceId, spanId: args.parentSpanId, traceFlags: 1 },
  startTime: hrTime(args.startMs),
  endTime: hrTime(args.endMs),
  duration: duration(args.startMs, args.endMs),
  status: args.error === undefined ? { code: SpanStatusCode.OK } : { code: SpanStatusCode.ERROR, message: args.error },
  attributes: args.attributes,
  links: NO_LINKS,
  events: NO_EVENTS,
  ended: true,
  resource: resourceOnce(),
  instrumentationScope: scope,
  droppedAttributesCount: 0,
  droppedEventsCount: 0,
  droppedLinksCount: 0,
})

const messagesJson = (input: ReadonlyArray<ContentMessage>) =>
  JSON.stringify(input.map((m) => ({ role: m.role, parts: [{ type: "text", content: m.content }] })))

const outputJson = (view: GenerationView) => {
  const parts: Array<{ type: string; content: string }> = []
  if (view.reasoning !== undefined) parts.push({ type: "reasoning", content: view.reasoning })
  if (view.output !== undefined) parts.push({ type: "text", content: view.output })
  return JSON.stringify([{ role: "assistant", parts, finish_reason: view.finishReason ?? "stop" }])
}

/** The root span's attributes: always the GenAI basics; content unless privacy mode; each switch's group when on. */
export const rootAttributes = (item: TraceItem): Attributes => {
  const { view, payload, options } = item
  const a: Attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": view.model,
    "gen_ai.response.model": view.upstreamModel,
    "gen_ai.provider.name": view.provider,
    "gen_ai.response.id": view.id,
    "gen_ai.response.finish_reasons": view.finishReason === null ? [] : [view.finishReason],
    "gen_ai.usage.input_tokens": view.inputTokens,
    "gen_ai.usage.output_tokens": view.outputTokens,
    "gen_ai.usage.cache_read.input_tokens": view.cachedTokens,
    "gen_ai.usage.reasoning.output_tokens": view.reasoningTokens,
    "gateway.generation.status": view.status,
    "gateway.generation.streamed": view.streamed,
    "gateway.generation.duration_ms": view.endMs - view.startMs,
    "trace.name": view.traceName,
    "generation.name": view.generationName,
  }
  if (payload.latencyMs !== null) a["gateway.generation.time_to_first_token_ms"] = payload.latencyMs
  if (view.sessionId !== null) a["session.id"] = view.sessionId
  if (view.user !== null) a["user.id"] = view.user
  if (view.error !== undefined) {
    a["error.type"] = String(view.error.status)
    if (!options.privacyMode) a["gateway.error.message"] = view.error.message
  }
  if (view.input !== undefined) a["gen_ai.input.messages"] = messagesJson(view.input)
  if (view.output !== undefined || view.reasoning !== undefined) a["gen_ai.output.messages"] = outputJson(view)
  for (const [key, value] of Object.entries(view.metadata)) a[`trace.metadata.${key}`] = value
  Object.assign(a, item.originals)
  if (options.cost && view.cost !== undefined) {
    a["gateway.cost.total_usd"] = view.cost.total
    a["gateway.cost.input_usd"] = view.cost.input
    a["gateway.cost.output_usd"] = view.cost.output
    a["gateway.cost.cached_usd"] = view.cost.cached
    a["gateway.cost.is_byok"] = payload.isByok
    const prices = payload.pricing
    if (prices !== null) {
      a["gateway.price.prompt_per_mtok_usd"] = prices.prompt
      a["gateway.price.completion_per_mtok_usd"] = prices.completion
      if (prices.cached_prompt !== undefined) a["gateway.price.cached_prompt_per_mtok_usd"] = prices.cached_prompt
      if (prices.cache_write !== undefined) a["gateway.price.cache_write_per_mtok_usd"] = prices.cache_write
      if (prices.request !== undefined) a["gateway.price.request_usd"] = prices.request
    }
  }
  if (options.identity) {
    if (item.keyName !== null) a["gateway.api_key.name"] = item.keyName
    a["gateway.api_key.hash_prefix"] = payload.keyHash.slice(0, 8)
    a["gateway.workspace.id"] = payload.workspaceId
    a["gateway.api_key.user_id"] = payload.ownerId
  }
  if (options.requestContext) {
    for (const [name, value] of Object.entries(payload.params)) a[`gen_ai.request.${name}`] = value
    a["gateway.routing.attempts"] = payload.attempts.length
    if (payload.strategy !== null) a["gateway.routing.strategy"] = payload.strategy
    if (payload.plugins.length > 0) a["gateway.plugins"] = [...payload.plugins]
  }
  return a
}

/** The spans of one generation: the request's root span and one child per upstream attempt. */
const spanDataOf = (item: TraceItem): Array<SpanData> => {
  const { view, payload } = item
  const spans: Array<SpanData> = [
    {
      name: view.spanName,
      kind: SpanKind.SERVER,
      traceId: view.traceId,
      spanId: view.spanId,
      parentSpanId: view.parentSpanId,
      startMs: view.startMs,
      endMs: view.endMs,
      attributes: rootAttributes(item),
      error: view.error === undefined ? undefined : `HTTP ${view.error.status}`,
    },
  ]
  // Attempts carry no timings of their own: the failed ones are instants at the start, the last spans the answer.
  const attempts = payload.attempts.length > 0 ? payload.attempts : [{ model: view.model, provider: view.provider, status: view.error?.status ?? 200 }]
  attempts.forEach((attempt, i) => {
    const last = i === attempts.length - 1
    spans.push({
      name: `chat ${attempt.model}`,
      kind: SpanKind.CLIENT,
      traceId: view.traceId,
      spanId: i === 0 ? item.ids.slice(48, 64) : hashHex(`span:${view.id}:attempt:${i}`, 16),
      parentSpanId: view.spanId,
      startMs: view.startMs,
      endMs: last ? view.endMs : view.startMs,
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": attempt.model,
        "gen_ai.provider.name": attempt.provider,
        "gateway.attempt.index": i,
        "http.response.status_code": attempt.status,
        ...(last ? { "gen_ai.response.model": view.upstreamModel, "gen_ai.response.id": view.id } : {}),
      },
      error: attempt.status >= 400 ? `HTTP ${attempt.status}` : undefined,
    })
  })
  return spans
}

/** The spans of one generation as OpenTelemetry's SDK has them (its serializers' input). */
export const spansOf = (item: TraceItem): Array<ReadableSpan> => spanDataOf(item).map(span)

// ---- OTLP/HTTP JSON, written here ----
//
// The bytes @opentelemetry/otlp-transformer's JsonTraceSerializer writes for `spansOf` (one
// resource, one scope; a test decodes both and compares them field by field), without building
// SDK spans and the serializer's intermediate objects. Measured (CPU time, a batch of 100
// generations with content, one attempt each, every switch on): ~28 µs a generation through the
// serializer, ~17 µs writing each span's JSON by string concatenation, ~14.5 → ~12 µs (median of
// 20 runs of 2,000 generations, ~3.5 KB each) as plain objects in the serializer's key order given
// to the native JSON.stringify, which writes the same bytes (the test compares them).

const RESOURCE_JSON = `{"attributes":[{"key":"service.name","value":{"stringValue":${JSON.stringify(SERVICE_NAME)}}}],"droppedAttributesCount":0}`
const SCOPE_JSON = JSON.stringify({ name: scope.name, version: scope.version })
const SCHEMA_URL_JSON = JSON.stringify(scope.schemaUrl)
const NANOS_PER_S = 1_000_000_000n

/** Epoch ms as the serializer writes an HrTime: nanoseconds, a decimal string. */
const nanos = (ms: number): string => {
  if (Number.isInteger(ms) && ms > 0) return `${ms}000000`
  const [s, ns] = hrTime(ms)
  return (BigInt(s) * NANOS_PER_S + BigInt(ns)).toString()
}

/** An attribute value as OTLP's AnyValue: integers as intValue, other numbers as doubleValue. */
const anyValue = (v: string | number | boolean | ReadonlyArray<string>): unknown => {
  if (typeof v === "string") return { stringValue: v }
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: v } : { doubleValue: v }
  if (typeof v === "boolean") return { boolValue: v }
  return { arrayValue: { values: v.map((s) => ({ stringValue: s })) } }
}

/** A span as the serializer writes it, its keys in its order: JSON.stringify writes the same bytes. */
const spanObject = (d: SpanData): unknown => {
  const attributes: Array<{ key: string; value: unknown }> = []
  for (const key in d.attributes) attributes.push({ key, value: anyValue(d.attributes[key] as string) })
  // kind: the SDK's SpanKind + 1 (OTLP's numbering); flags: the trace flags (sampled) and "has is_remote" (0x100), not remote.
  return {
    traceId: d.traceId,
    spanId: d.spanId,
    parentSpanId: d.parentSpanId,
    name: d.name,
    kind: d.kind + 1,
    startTimeUnixNano: nanos(d.startMs),
    endTimeUnixNano: nanos(d.endMs),
    attributes,
    droppedAttributesCount: 0,
    events: [],
    droppedEventsCount: 0,
    status: d.error === undefined ? { code: SpanStatusCode.OK } : { code: SpanStatusCode.ERROR, message: d.error },
    links: [],
    droppedLinksCount: 0,
    flags: 257,
  }
}

const encoder = new TextEncoder()

/**
 * A generation's spans as JSON, written once per item: an item is one generation as one body
 * shape sees it (src/broadcast/bodies.ts keeps them per batch and shape), so the destinations
 * and the sends that carry it share the text and a body is a concatenation.
 */
const spansJsonOf = (item: TraceItem): string => {
  let json = item.spansJson
  if (json === undefined) {
    json = JSON.stringify(spanDataOf(item).map(spanObject)).slice(1, -1)
    item.spansJson = json
  }
  return json
}

/** The batch's OTLP/HTTP JSON body (`ExportTraceServiceRequest`). */
export const otlpOf = (items: ReadonlyArray<TraceItem>): Uint8Array => {
  if (items.length === 0) return encoder.encode('{"resourceSpans":[]}')
  let spans = ""
  for (const item of items) spans += (spans === "" ? "" : ",") + spansJsonOf(item)
  return encoder.encode(
    `{"resourceSpans":[{"resource":${RESOURCE_JSON},"scopeSpans":[{"scope":${SCOPE_JSON},"spans":[${spans}],"schemaUrl":${SCHEMA_URL_JSON}}]}]}`,
  )
}

/** The same body through @opentelemetry/otlp-transformer's serializer (tests compare the two). */
export const officialOtlpOf = (items: ReadonlyArray<TraceItem>): Uint8Array =>
  otlpTransformer().JsonTraceSerializer.serializeRequest(items.flatMap(spansOf)) ?? new Uint8Array()
