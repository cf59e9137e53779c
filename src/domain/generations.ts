/**
 * Generations: the record the responses path appends for every model request (the usage
 * ledger), its optional stored content, and their wire shapes (`GET /generation`,
 * `GET /generation/content`).
 */
import { randomPool, takeRandom } from "./random"
import { Effect, Schema } from "effect"
import { BadRequest } from "./errors.js"
import type { ResponsesRequest } from "./responses.js"
import { maxChars } from "./schema-rules.js"

export type GenerationStatus = "completed" | "incomplete" | "failed" | "cancelled"

/** One failed attempt before the one that answered (fallbacks). */
export interface PreviousError {
  readonly code: number | string | null
  readonly message: string
  readonly providerName: string | null
  readonly raw?: unknown
}

export interface GenerationError {
  readonly message: string
  /** HTTP status the caller saw (or the upstream's). */
  readonly status: number
  readonly providerName: string | null
  readonly raw?: unknown
  readonly previousErrors?: ReadonlyArray<PreviousError>
}

export interface ContentMessage {
  readonly role: string
  readonly content: string
}

/** What was sent and what came back; stored only when the workspace logs content. */
export interface GenerationContent {
  readonly input: { readonly messages: ReadonlyArray<ContentMessage> } | { readonly prompt: string }
  readonly output: { readonly completion: string | null; readonly reasoning: string | null }
}

/** One upstream attempt of a request, in order (the answering one last). */
export interface AttemptRecord {
  readonly model: string
  readonly provider: string
  readonly status: number
}

/** USD per million tokens (`request`: per request), as the catalog prices an endpoint. */
export interface EndpointPrices {
  readonly prompt: number
  readonly completion: number
  readonly cached_prompt?: number
  readonly cache_write?: number
  readonly request?: number
}

/**
 * What broadcast sends beyond the record (src/broadcast/outbox.ts): references to what the
 * request path already holds, read only when a destination wants the generation; never stored as is.
 */
export interface BroadcastContext {
  /** The decoded request: its `trace`, `user`, parameters and plugins. */
  readonly request: ResponsesRequest
  /** The prompt in its stored form, built only when a destination takes content. */
  readonly input: () => GenerationContent["input"]
  readonly completion: string | null
  readonly reasoning: string | null
  readonly attempts: ReadonlyArray<AttemptRecord>
  readonly pricing: EndpointPrices
  /** How the candidates were ordered (`service_metadata.strategy`). */
  readonly strategy: string
}

/** What the responses path hands to `GenerationStore.record` once per model request. */
export interface GenerationEntry {
  /** `gen-…`, from `newGenerationId()`; also the `X-Generation-Id` header. */
  readonly id: string
  readonly keyHash: string
  readonly userId: string
  readonly workspaceId: string
  /** The model id the client asked for. */
  readonly model: string
  readonly providerName: string
  /** The provider's own model id that served the request. */
  readonly upstreamModel: string
  /** The provider's id of its response, when it gave one. */
  readonly upstreamId?: string | null
  /** ISO 8601 UTC. */
  readonly createdAt: string
  readonly streamed: boolean
  readonly cancelled: boolean
  readonly finishReason: string | null
  readonly sessionId: string | null
  readonly inputTokens: number
  readonly cachedTokens: number
  readonly cacheWriteTokens: number
  readonly outputTokens: number
  readonly reasoningTokens: number
  /** USD. Also written to the spend ledger as this generation's spend. */
  readonly totalCost: number
  readonly isByok: boolean
  /** Whole request, in milliseconds. */
  readonly generationTimeMs: number
  /** Time to the first token, in milliseconds; null when none came. */
  readonly latencyMs: number | null
  readonly status: GenerationStatus
  /** The counts are the gateway's estimate: the upstream gave none, or counts that were not counts. */
  readonly usageEstimated?: boolean
  readonly error?: GenerationError | null
  /** Present only when the workspace logs content (the caller decides). */
  readonly content?: GenerationContent | null
  /** The request's `HTTP-Referer`, capped (see CLIENT_HEADER_MAX); null when absent. */
  readonly httpReferer?: string | null
  /** The request's `X-OpenRouter-Title` or `X-Title`: the calling app's name. */
  readonly appTitle?: string | null
  /** The request's `User-Agent`. */
  readonly userAgent?: string | null
  /** For the broadcast outbox (absent: the generation is broadcast without request details or content). */
  readonly broadcast?: BroadcastContext
  /** The model router that chose the model (`auto`, `pareto`), or `fusion` for a request the fusion plugin answered; null otherwise. */
  readonly router?: string | null
  /** Server tools: web search results given to the model, pages fetched, the search engine used. */
  readonly numSearchResults?: number | null
  readonly numFetches?: number | null
  readonly webSearchEngine?: string | null
  /** The request's generation this inner model call was made for (fusion's panel and judge); null for a request's own. */
  readonly parentGenerationId?: string | null
}

/** Longest client header (`HTTP-Referer`, app title, `User-Agent`) kept on a generation. */
export const CLIENT_HEADER_MAX = 512

/** A generation as read back from the store (its content is read separately). */
export type StoredGeneration = Omit<GenerationEntry, "content" | "broadcast"> & { readonly hasContent: boolean }

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
const ID_CODES = Uint8Array.from(ID_ALPHABET, (ch) => ch.charCodeAt(0))

/**
 * `gen-<unix seconds>-<20 alphanumerics>`: the milliseconds within the second as three digits,
 * then 17 random alphanumerics. Ids made in the same millisecond sort together, so the ledger's
 * inserts land at the right edge of the `generations` primary-key index instead of anywhere in
 * the second's range: each group commit dirties a few index pages rather than one per row
 * (SQLite file, 20-row batches: ~21 → ~14 µs of CPU per generation and spend row).
 */
export const newGenerationId = (nowMs: number = Date.now()): string => {
  const at = takeRandom(17)
  const ms = Math.floor(nowMs) % 1000
  // One string from 17 codes, not 17 one-character concatenations (a rope cell each).
  const c = (i: number) => ID_CODES[(randomPool[at + i] as number) % ID_CODES.length] as number
  const random = String.fromCharCode(c(0), c(1), c(2), c(3), c(4), c(5), c(6), c(7), c(8), c(9), c(10), c(11), c(12), c(13), c(14), c(15), c(16))
  return `gen-${Math.floor(nowMs / 1000)}-${ms < 10 ? `00${ms}` : ms < 100 ? `0${ms}` : `${ms}`}${random}`
}

/**
 * The least id of Unix second `second` in `newGenerationId`'s shape: every id of an earlier second
 * sorts below it, every id of that second or later at or above it (the log's time ranges, retention).
 */
export const idBoundAt = (second: number): string => `gen-${second}-`

/** The Unix second a generation id starts with (`newGenerationId`'s shape); 0 for an id of another shape. */
export const idSecondOf = (id: string): number => {
  const end = id.indexOf("-", 4)
  const n = id.startsWith("gen-") && end > 4 ? Number(id.slice(4, end)) : Number.NaN
  return Number.isFinite(n) ? n : 0
}

// ---- wire shapes ----

const GenerationId = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))
export const GenerationIdParams = Schema.Struct({ id: GenerationId })

/**
 * `GET /generation/content`'s query: the id checked in the handler, after the key (the contract
 * answers an inference key 403 there, whatever its query).
 */
export const GenerationContentParams = Schema.Struct({ id: Schema.optional(Schema.String) })
/** The content query's id: a 400 naming it when missing or empty. */
export const generationIdOf = (params: typeof GenerationContentParams.Type): Effect.Effect<string, BadRequest> =>
  params.id === undefined
    ? Effect.fail(new BadRequest({ message: "Invalid request: id: is missing" }))
    : params.id === ""
      ? Effect.fail(new BadRequest({ message: "Invalid request: id: must not be empty" }))
      : Effect.succeed(params.id)

/** The categories of `POST /generation/feedback`, as the official SDK sends them. */
export const FEEDBACK_CATEGORIES = ["latency", "incoherence", "incorrect_response", "formatting", "billing", "api_error", "other"] as const
export const FeedbackCategory = Schema.Literal(...FEEDBACK_CATEGORIES).annotations({
  message: () => ({ message: `must be one of ${FEEDBACK_CATEGORIES.join(", ")}`, override: true }),
})
export type FeedbackCategory = typeof FeedbackCategory.Type

export const FEEDBACK_COMMENT_MAX = 4000

export const FeedbackPayload = Schema.Struct({
  generation_id: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })),
  category: FeedbackCategory,
  comment: Schema.optional(maxChars(FEEDBACK_COMMENT_MAX)),
})

export const FeedbackAccepted = Schema.Struct({ data: Schema.Struct({ success: Schema.Literal(true) }) })

const Message = Schema.Struct({ role: Schema.String, content: Schema.String })

const ErrorDetail = Schema.Struct({
  message: Schema.String,
  status: Schema.Int,
  provider_name: Schema.NullOr(Schema.String),
  raw: Schema.Unknown,
  previous_errors: Schema.Array(
    Schema.Struct({
      code: Schema.NullOr(Schema.Union(Schema.Int, Schema.String)),
      message: Schema.String,
      provider_name: Schema.NullOr(Schema.String),
      raw: Schema.Unknown,
    }),
  ),
})

export const GenerationContentData = Schema.Struct({
  data: Schema.Struct({
    input: Schema.Union(Schema.Struct({ messages: Schema.Array(Message) }), Schema.Struct({ prompt: Schema.String })),
    output: Schema.Struct({ completion: Schema.NullOr(Schema.String), reasoning: Schema.NullOr(Schema.String) }),
    error: Schema.NullOr(ErrorDetail),
  }),
})
export type GenerationContentData = typeof GenerationContentData.Type

export const Generation = Schema.Struct({
  id: Schema.String,
  model: Schema.String,
  upstream_model: Schema.String,
  provider_name: Schema.String,
  upstream_id: Schema.NullOr(Schema.String),
  api_key_hash: Schema.String,
  workspace_id: Schema.String,
  created_at: Schema.String,
  status: Schema.Literal("completed", "incomplete", "failed", "cancelled"),
  total_cost: Schema.Number,
  /** Same as total_cost (clients read either). */
  usage: Schema.Number,
  is_byok: Schema.Boolean,
  tokens_prompt: Schema.Int,
  tokens_completion: Schema.Int,
  native_tokens_prompt: Schema.Int,
  native_tokens_completion: Schema.Int,
  native_tokens_reasoning: Schema.Int,
  native_tokens_cached: Schema.Int,
  native_tokens_cache_write: Schema.Int,
  /** The token counts are the gateway's estimate (the upstream reported none, or counts that were not counts). */
  usage_estimated: Schema.Boolean,
  /** Milliseconds. */
  generation_time: Schema.Int,
  /** Milliseconds to the first token, or null. */
  latency: Schema.NullOr(Schema.Int),
  finish_reason: Schema.NullOr(Schema.String),
  native_finish_reason: Schema.NullOr(Schema.String),
  streamed: Schema.Boolean,
  cancelled: Schema.Boolean,
  session_id: Schema.NullOr(Schema.String),
  external_user: Schema.NullOr(Schema.String),
  has_content: Schema.Boolean,
  // Keys the official SDK requires (GenerationResponseData); null where the gateway has no such fact.
  /** The kind of API: every generation here is a text generation. */
  api_type: Schema.Literal("completions"),
  /** The gateway keeps no app registry: the app's name is `app_name`. */
  app_id: Schema.Null,
  /** The request's `X-OpenRouter-Title` or `X-Title`, or null (our extension). */
  app_name: Schema.NullOr(Schema.String),
  /** The request's `HTTP-Referer`, or null. */
  http_referer: Schema.NullOr(Schema.String),
  /** The request's `HTTP-Referer`, or "" (the SDK requires a string). */
  origin: Schema.String,
  /** The request's `User-Agent`, or null. */
  user_agent: Schema.NullOr(Schema.String),
  /** The gateway serves from one place. */
  data_region: Schema.Literal("global"),
  cache_discount: Schema.Null,
  moderation_latency: Schema.Null,
  native_tokens_completion_images: Schema.Null,
  /** Pages the server tools fetched (web_fetch), or null when none ran. */
  num_fetches: Schema.NullOr(Schema.Int),
  num_input_audio_prompt: Schema.Null,
  num_media_completion: Schema.Null,
  num_media_prompt: Schema.Null,
  /** Web search results the server tools gave the model, or null when none ran. */
  num_search_results: Schema.NullOr(Schema.Int),
  preset_id: Schema.Null,
  provider_responses: Schema.Null,
  /** The model router that chose the model (`auto` for router/auto, `pareto` for router/pareto-code), or null. */
  router: Schema.NullOr(Schema.String),
  /** The generation of the request this one was an inner model call of (fusion's panel and judge), or null. */
  parent_generation_id: Schema.NullOr(Schema.String),
  service_tier: Schema.Null,
  upstream_inference_cost: Schema.Null,
  /** The search engine the web search tool used (`searxng`, `exa`, …), or null. */
  web_search_engine: Schema.NullOr(Schema.String),
})
export type Generation = typeof Generation.Type

export const GenerationData = Schema.Struct({ data: Generation })

/** The wire object of `GET /generation`. */
export const generationView = (g: StoredGeneration): Generation => ({
  id: g.id,
  model: g.model,
  upstream_model: g.upstreamModel,
  provider_name: g.providerName,
  upstream_id: g.upstreamId ?? null,
  api_key_hash: g.keyHash,
  workspace_id: g.workspaceId,
  created_at: g.createdAt,
  status: g.status,
  total_cost: g.totalCost,
  usage: g.totalCost,
  is_byok: g.isByok,
  // We count no tokens of our own: the normalized counts are the provider's.
  tokens_prompt: g.inputTokens,
  tokens_completion: g.outputTokens,
  native_tokens_prompt: g.inputTokens,
  native_tokens_completion: g.outputTokens,
  native_tokens_reasoning: g.reasoningTokens,
  native_tokens_cached: g.cachedTokens,
  native_tokens_cache_write: g.cacheWriteTokens,
  usage_estimated: g.usageEstimated === true,
  generation_time: g.generationTimeMs,
  latency: g.latencyMs,
  finish_reason: g.finishReason,
  native_finish_reason: g.finishReason,
  streamed: g.streamed,
  cancelled: g.cancelled,
  session_id: g.sessionId,
  external_user: null,
  has_content: g.hasContent,
  api_type: "completions",
  app_id: null,
  app_name: g.appTitle ?? null,
  http_referer: g.httpReferer ?? null,
  origin: g.httpReferer ?? "",
  user_agent: g.userAgent ?? null,
  data_region: "global",
  cache_discount: null,
  moderation_latency: null,
  native_tokens_completion_images: null,
  num_fetches: g.numFetches ?? null,
  num_input_audio_prompt: null,
  num_media_completion: null,
  num_media_prompt: null,
  num_search_results: g.numSearchResults ?? null,
  preset_id: null,
  provider_responses: null,
  router: g.router ?? null,
  parent_generation_id: g.parentGenerationId ?? null,
  service_tier: null,
  upstream_inference_cost: null,
  web_search_engine: g.webSearchEngine ?? null,
})

/** The wire object of `GET /generation/content`: input, output and error, always all three. */
export const contentView = (content: GenerationContent, error: GenerationError | null | undefined): GenerationContentData["data"] => ({
  input:
    "messages" in content.input
      ? { messages: content.input.messages.map((m) => ({ role: m.role, content: m.content })) }
      : { prompt: content.input.prompt },
  output: { completion: content.output.completion, reasoning: content.output.reasoning },
  error:
    error == null
      ? null
      : {
          message: error.message,
          status: error.status,
          provider_name: error.providerName,
          raw: error.raw ?? null,
          previous_errors: (error.previousErrors ?? []).map((p) => ({
            code: p.code,
            message: p.message,
            provider_name: p.providerName,
            raw: p.raw ?? null,
          })),
        },
})
