/**
 * What the vendor exporters share about the batch's OTLP body: its shape as a Schema (the
 * worker writes it with its own encoder, src/broadcast/payload.ts, the official JSON serializer's
 * bytes), the binary protobuf encoding (what every OTLP/HTTP receiver accepts, and the only one
 * some vendors take: Weave, New Relic's recommended one), attributes a vendor routes or renders
 * by, and one trace's spans. The protobuf bytes come from the OpenTelemetry package's own
 * serializer (loaded on first use: ../otel-sdk.ts), fed with the spans read back from the JSON,
 * so no protobuf encoding is written by hand here.
 */
import type { AttributeValue, Attributes, HrTime, SpanContext } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { Either, ParseResult, Schema } from "effect"
import { describeParseError } from "../../domain/validation.js"
import type { OutboundRequest } from "../exporter.js"
import { otelResources, otlpTransformer } from "../otel-sdk.js"

// ---- the OTLP/HTTP JSON shape (opentelemetry-proto, JSON mapping) ----

export interface AnyValue {
  readonly stringValue?: string
  readonly boolValue?: boolean
  readonly intValue?: number | string
  readonly doubleValue?: number
  readonly bytesValue?: string
  readonly arrayValue?: { readonly values?: ReadonlyArray<AnyValue> }
  readonly kvlistValue?: { readonly values?: ReadonlyArray<KeyValue> }
}
export interface KeyValue {
  readonly key: string
  readonly value?: AnyValue
}

const AnyValueSchema: Schema.Schema<AnyValue> = Schema.Struct({
  stringValue: Schema.optional(Schema.String),
  boolValue: Schema.optional(Schema.Boolean),
  intValue: Schema.optional(Schema.Union(Schema.Number, Schema.String)),
  doubleValue: Schema.optional(Schema.Number),
  bytesValue: Schema.optional(Schema.String),
  arrayValue: Schema.optional(
    Schema.Struct({ values: Schema.optional(Schema.Array(Schema.suspend((): Schema.Schema<AnyValue> => AnyValueSchema))) }),
  ),
  kvlistValue: Schema.optional(
    Schema.Struct({ values: Schema.optional(Schema.Array(Schema.suspend((): Schema.Schema<KeyValue> => KeyValueSchema))) }),
  ),
})
const KeyValueSchema: Schema.Schema<KeyValue> = Schema.Struct({ key: Schema.String, value: Schema.optional(AnyValueSchema) })

const Attributes_ = Schema.optional(Schema.Array(KeyValueSchema))
const Nanos = Schema.Union(Schema.String, Schema.Number)

const OtlpSpan = Schema.Struct({
  traceId: Schema.String,
  spanId: Schema.String,
  parentSpanId: Schema.optional(Schema.String),
  traceState: Schema.optional(Schema.String),
  name: Schema.String,
  kind: Schema.optional(Schema.Number),
  startTimeUnixNano: Nanos,
  endTimeUnixNano: Nanos,
  attributes: Attributes_,
  droppedAttributesCount: Schema.optional(Schema.Number),
  events: Schema.optional(
    Schema.Array(
      Schema.Struct({
        timeUnixNano: Nanos,
        name: Schema.String,
        attributes: Attributes_,
        droppedAttributesCount: Schema.optional(Schema.Number),
      }),
    ),
  ),
  droppedEventsCount: Schema.optional(Schema.Number),
  links: Schema.optional(
    Schema.Array(
      Schema.Struct({
        traceId: Schema.String,
        spanId: Schema.String,
        traceState: Schema.optional(Schema.String),
        attributes: Attributes_,
        droppedAttributesCount: Schema.optional(Schema.Number),
        flags: Schema.optional(Schema.Number),
      }),
    ),
  ),
  droppedLinksCount: Schema.optional(Schema.Number),
  status: Schema.optional(Schema.Struct({ code: Schema.optional(Schema.Number), message: Schema.optional(Schema.String) })),
  flags: Schema.optional(Schema.Number),
})
export type OtlpSpan = typeof OtlpSpan.Type

const ScopeSpans = Schema.Struct({
  scope: Schema.optional(
    Schema.Struct({ name: Schema.String, version: Schema.optional(Schema.String), attributes: Attributes_ }),
  ),
  spans: Schema.optional(Schema.Array(OtlpSpan)),
  schemaUrl: Schema.optional(Schema.String),
})

const ResourceSpans = Schema.Struct({
  resource: Schema.optional(Schema.Struct({ attributes: Attributes_, droppedAttributesCount: Schema.optional(Schema.Number) })),
  scopeSpans: Schema.optional(Schema.Array(ScopeSpans)),
  schemaUrl: Schema.optional(Schema.String),
})

/** `ExportTraceServiceRequest` in the OTLP/HTTP JSON mapping. */
export const TraceRequest = Schema.Struct({ resourceSpans: Schema.optional(Schema.Array(ResourceSpans)) })
export type TraceRequest = typeof TraceRequest.Type

const decodeTraceRequest = ParseResult.decodeUnknownEither(TraceRequest, { errors: "first" })

/** The batch's OTLP body, checked; the worker built it, so a mismatch is a bug, not a vendor's problem. */
export const readOtlp = (otlp: unknown): TraceRequest =>
  Either.getOrThrowWith(
    decodeTraceRequest(otlp),
    (issue) => new Error(`broadcast: the batch's OTLP body is malformed: ${describeParseError(new ParseResult.ParseError({ issue }))}`),
  )

// ---- attribute values ----

/** A plain value as an OTLP `AnyValue` (what the JSON serializer of otlp-transformer writes). */
export const anyValue = (value: string | number | boolean): AnyValue =>
  typeof value === "string"
    ? { stringValue: value }
    : typeof value === "boolean"
      ? { boolValue: value }
      : Number.isInteger(value)
        ? { intValue: value }
        : { doubleValue: value }

const plain = (value: AnyValue | undefined): unknown => {
  if (value === undefined) return undefined
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.bytesValue !== undefined) return Uint8Array.from(Buffer.from(value.bytesValue, "base64"))
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plain)
  if (value.kvlistValue !== undefined) return plainAttributes(value.kvlistValue.values)
  return undefined
}

/** OTLP key-values as a plain object (nested lists and maps kept: the protobuf serializer writes them). */
export const plainAttributes = (attributes: ReadonlyArray<KeyValue> | undefined): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const { key, value } of attributes ?? []) out[key] = plain(value)
  return out
}

/** `attributes` with `extra` set (an existing key is replaced, a new one appended). */
const withAttributes = (attributes: ReadonlyArray<KeyValue> | undefined, extra: Readonly<Record<string, AnyValue>>) => {
  const keys = new Set(Object.keys(extra))
  return [...(attributes ?? []).filter((kv) => !keys.has(kv.key)), ...Object.entries(extra).map(([key, value]) => ({ key, value }))]
}

/** The request with `extra` attributes on every resource (how Arize and Weave route spans to a project). */
export const withResourceAttributes = (otlp: TraceRequest, extra: Readonly<Record<string, AnyValue>>): TraceRequest => ({
  resourceSpans: (otlp.resourceSpans ?? []).map((rs) => ({
    ...rs,
    resource: { ...rs.resource, attributes: withAttributes(rs.resource?.attributes, extra) },
  })),
})

/** The request with `extra(span)` attributes on each span for which it answers some (vendor-specific renderings). */
export const withSpanAttributes = (
  otlp: TraceRequest,
  extra: (span: OtlpSpan) => Readonly<Record<string, AnyValue>> | undefined,
): TraceRequest => ({
  resourceSpans: (otlp.resourceSpans ?? []).map((rs) => ({
    ...rs,
    scopeSpans: (rs.scopeSpans ?? []).map((ss) => ({
      ...ss,
      spans: (ss.spans ?? []).map((span) => {
        const add = extra(span)
        return add === undefined ? span : { ...span, attributes: withAttributes(span.attributes, add) }
      }),
    })),
  })),
})

/** Only the spans of `traceId` under the span `rootSpanId` (itself included): one generation's part of a trace. */
export const generationSpans = (otlp: TraceRequest, traceId: string, rootSpanId: string): TraceRequest => {
  const ours = new Set([rootSpanId])
  const all = (otlp.resourceSpans ?? []).flatMap((rs) => (rs.scopeSpans ?? []).flatMap((ss) => ss.spans ?? []))
  // Parents may follow their children in the body: grow the set until it stops growing.
  for (let grew = true; grew; ) {
    grew = false
    for (const span of all) {
      if (span.traceId === traceId && !ours.has(span.spanId) && span.parentSpanId !== undefined && ours.has(span.parentSpanId)) {
        ours.add(span.spanId)
        grew = true
      }
    }
  }
  return {
    resourceSpans: (otlp.resourceSpans ?? [])
      .map((rs) => ({
        ...rs,
        scopeSpans: (rs.scopeSpans ?? [])
          .map((ss) => ({ ...ss, spans: (ss.spans ?? []).filter((s) => s.traceId === traceId && ours.has(s.spanId)) }))
          .filter((ss) => ss.spans.length > 0),
      }))
      .filter((rs) => rs.scopeSpans.length > 0),
  }
}

// ---- binary protobuf, through the OpenTelemetry serializer ----

const NANOS_PER_SECOND = 1_000_000_000n

const hrTime = (nanos: string | number): HrTime => {
  const n = BigInt(nanos)
  return [Number(n / NANOS_PER_SECOND), Number(n % NANOS_PER_SECOND)]
}

const hrDuration = (start: HrTime, end: HrTime): HrTime => {
  const n = (BigInt(end[0]) - BigInt(start[0])) * NANOS_PER_SECOND + BigInt(end[1] - start[1])
  return [Number(n / NANOS_PER_SECOND), Number(n % NANOS_PER_SECOND)]
}

// The serializer writes nested maps, arrays and bytes too, beyond the API's `AttributeValue` type.
const attributesOf = (attributes: ReadonlyArray<KeyValue> | undefined): Attributes =>
  plainAttributes(attributes) as Record<string, AttributeValue>

const IS_REMOTE = 0x200

const readableSpan = (
  span: OtlpSpan,
  resource: Resource,
  scope: ReadableSpan["instrumentationScope"],
): ReadableSpan => {
  const traceFlags = (span.flags ?? 1) & 0xff
  const context: SpanContext = { traceId: span.traceId, spanId: span.spanId, traceFlags }
  const startTime = hrTime(span.startTimeUnixNano)
  const endTime = hrTime(span.endTimeUnixNano)
  return {
    name: span.name,
    // The API's SpanKind is the proto's minus one (the proto has UNSPECIFIED = 0).
    kind: Math.max(0, (span.kind ?? 1) - 1),
    spanContext: () => context,
    parentSpanContext:
      span.parentSpanId === undefined || span.parentSpanId === ""
        ? undefined
        : { traceId: span.traceId, spanId: span.parentSpanId, traceFlags, isRemote: ((span.flags ?? 0) & IS_REMOTE) !== 0 },
    startTime,
    endTime,
    duration: hrDuration(startTime, endTime),
    ended: true,
    status: { code: span.status?.code ?? 0, message: span.status?.message },
    attributes: attributesOf(span.attributes),
    droppedAttributesCount: span.droppedAttributesCount ?? 0,
    events: (span.events ?? []).map((e) => ({
      name: e.name,
      time: hrTime(e.timeUnixNano),
      attributes: attributesOf(e.attributes),
      droppedAttributesCount: e.droppedAttributesCount ?? 0,
    })),
    droppedEventsCount: span.droppedEventsCount ?? 0,
    links: (span.links ?? []).map((l) => ({
      context: { traceId: l.traceId, spanId: l.spanId, traceFlags: (l.flags ?? 1) & 0xff },
      attributes: attributesOf(l.attributes),
      droppedAttributesCount: l.droppedAttributesCount ?? 0,
    })),
    droppedLinksCount: span.droppedLinksCount ?? 0,
    resource,
    instrumentationScope: scope,
  }
}

/** The request in the binary protobuf encoding (`application/x-protobuf`). */
export const toProtobuf = (otlp: TraceRequest): Uint8Array => {
  const spans: Array<ReadableSpan> = []
  for (const rs of otlp.resourceSpans ?? []) {
    // One Resource and one scope object per group: the serializer groups spans by identity.
    const resource = otelResources().resourceFromAttributes(
      attributesOf(rs.resource?.attributes),
      rs.schemaUrl === undefined ? undefined : { schemaUrl: rs.schemaUrl },
    )
    for (const ss of rs.scopeSpans ?? []) {
      const scope = { name: ss.scope?.name ?? "", version: ss.scope?.version, schemaUrl: ss.schemaUrl }
      for (const span of ss.spans ?? []) spans.push(readableSpan(span, resource, scope))
    }
  }
  return otlpTransformer().ProtobufTraceSerializer.serializeRequest(spans) ?? new Uint8Array()
}

/** One OTLP/HTTP traces export in protobuf to `url` with the vendor's `headers`. */
export const otlpRequest = (url: string, headers: Readonly<Record<string, string>>, otlp: TraceRequest): OutboundRequest => ({
  url,
  method: "POST",
  headers: { ...headers, "content-type": "application/x-protobuf" },
  body: toProtobuf(otlp),
})

/** `base` with the traces path: kept when it already ends with it, else appended (`{base}/v1/traces`). */
export const tracesUrl = (base: string, path = "/v1/traces"): string => {
  const trimmed = base.replace(/\/+$/, "")
  return trimmed.endsWith(path) ? trimmed : trimmed + path
}
