/**
 * The seam between the delivery worker and one destination kind: the worker claims a
 * batch of a destination's deliveries, builds what is sent (one OTLP/HTTP JSON trace request for
 * the batch, and each generation as a flat view for kinds that take events or rows), and asks the
 * kind's exporter for the HTTP requests that deliver it. Exporters are pure: they build requests;
 * the worker sends them through the safe outbound fetcher, with its timeout, retries and breaker.
 */
import type { DestinationRules } from "../domain/destinations.js"

/** One generation as destinations see it (privacy mode already applied: content fields are absent). */
export interface GenerationView {
  /** The generation id (`gen_…`): also `gen_ai.response.id`. */
  readonly id: string
  /** 32 hex: the trace id (from the request's `trace.trace_id` when valid, else derived from the generation id). */
  readonly traceId: string
  /** 16 hex: the root span's id. */
  readonly spanId: string
  readonly traceName: string
  readonly spanName: string
  readonly generationName: string
  readonly parentSpanId: string | undefined
  readonly createdAt: string
  /** Epoch ms. */
  readonly startMs: number
  readonly endMs: number
  readonly model: string
  readonly upstreamModel: string
  readonly provider: string
  readonly status: string
  readonly finishReason: string | null
  readonly streamed: boolean
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedTokens: number
  readonly reasoningTokens: number
  /** USD; present only with `broadcast_generation_cost`. */
  readonly cost?: { readonly total: number; readonly input: number; readonly output: number; readonly cached: number }
  readonly sessionId: string | null
  /** The request's `user` (the end user it names), not the key's owner. */
  readonly user: string | null
  /** The prompt as chat-like messages, and the completion; absent in privacy mode. */
  readonly input?: ReadonlyArray<{ readonly role: string; readonly content: string }>
  readonly output?: string
  readonly reasoning?: string
  /** Every other key of the request's `trace` object. */
  readonly metadata: Readonly<Record<string, string>>
  readonly error?: { readonly status: number; readonly message: string }
}

/** What the worker hands an exporter: the batch's OTLP JSON body and each generation's view. */
export interface TraceBatch {
  /**
   * `ExportTraceServiceRequest` in OTLP/HTTP JSON form (`{resourceSpans: [...]}`), the bytes
   * @opentelemetry/otlp-transformer's serializer wrote: the kinds that send OTLP JSON send them as is.
   */
  readonly otlpJson: Uint8Array
  /** The same body parsed (on first read), for the kinds that rework it. */
  readonly otlp: unknown
  readonly generations: ReadonlyArray<GenerationView>
}

/** A batch over the serializer's bytes; shared by every destination that gets the same generations the same way. */
export const traceBatch = (otlpJson: Uint8Array, generations: ReadonlyArray<GenerationView>): TraceBatch => {
  let parsed: unknown
  return {
    otlpJson,
    get otlp() {
      parsed ??= JSON.parse(new TextDecoder().decode(otlpJson)) as unknown
      return parsed
    },
    generations,
  }
}

/** One HTTP request to send. */
export interface OutboundRequest {
  readonly url: string
  readonly method: "POST" | "PUT"
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | Uint8Array
}

/** The requests that deliver `batch` to a destination with `config` (its secrets unsealed), or why it cannot. */
export type Delivery = { readonly requests: ReadonlyArray<OutboundRequest> } | { readonly unsupported: string }

export interface Exporter {
  readonly kind: string
  /** Async: signing (S3) may use WebCrypto. */
  readonly deliver: (config: Readonly<Record<string, unknown>>, batch: TraceBatch) => Promise<Delivery>
}

/**
 * A destination kind: what the control plane checks of its config (`DestinationRules`: the config
 * Schema, its secret keys) and its exporter. One module per kind (src/broadcast/exporters/<kind>.ts),
 * one line in the registry (src/broadcast/exporters/index.ts).
 */
export interface DestinationKind<K extends string = string> extends DestinationRules, Exporter {
  readonly kind: K
}

/** Keeps the kind's name as a literal type (the registry derives the API's list of types from it). */
export const defineKind = <const K extends string>(kind: DestinationKind<K>): DestinationKind<K> => kind
