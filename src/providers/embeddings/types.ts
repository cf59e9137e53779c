/**
 * What an upstream that embeds or reranks does for `POST /v1/embeddings` and `POST /v1/rerank`
 * (src/http/embeddings/): one call per batch, the vectors or scores in the caller's order. An
 * implementation lives in its provider's folder; the registry (index.ts) lists one per kind.
 */
import type { AbortLike } from "../abort"
import type { ProviderConfig, UpstreamLimits } from "../types"

/** One input: text, or token ids (for upstreams that take them). */
export type EmbeddingInput = string | ReadonlyArray<number>

export interface EmbeddingCall {
  /** The model as the upstream knows it (the endpoint's `upstream_model`). */
  readonly model: string
  /** At most the embedder's `maxInputs(model)`. */
  readonly inputs: ReadonlyArray<EmbeddingInput>
  readonly dimensions?: number
  /** e.g. search_query, search_document (Cohere's and others' own field). */
  readonly inputType?: string
  readonly user?: string
}

export interface EmbeddingResult {
  /** One per input, in the order of the call's inputs. */
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  /** Input tokens as the upstream counted them; undefined when it gave no count (then estimated). */
  readonly inputTokens: number | undefined
}

export interface UpstreamCallOptions {
  readonly signal: AbortLike
  /** The key of `api_key_env`, if any. */
  readonly apiKey?: string
  readonly limits?: UpstreamLimits
}

export interface Embedder {
  /** Inputs one call may carry for `model`: a longer batch is split and joined in order. */
  readonly maxInputs: (model: string) => number
  /** Resolves with the vectors, or rejects with a `ProviderError`. */
  readonly embed: (call: EmbeddingCall, config: ProviderConfig, options: UpstreamCallOptions) => Promise<EmbeddingResult>
}

export interface RerankCall {
  readonly model: string
  readonly query: string
  readonly documents: ReadonlyArray<string>
  readonly topN?: number
}

export interface RerankResult {
  /** The documents' indexes with their scores, best first (at most `topN`). */
  readonly results: ReadonlyArray<{ readonly index: number; readonly relevanceScore: number }>
  /** Billed search units (Cohere: one per query and up to 100 documents). */
  readonly searchUnits: number
  /** Input tokens, when the upstream counts them. */
  readonly inputTokens: number | undefined
}

export interface Reranker {
  readonly maxDocuments: number
  readonly rerank: (call: RerankCall, config: ProviderConfig, options: UpstreamCallOptions) => Promise<RerankResult>
}

/** Cohere's billing unit: a query with up to 100 documents is one search. */
export const searchUnitsOf = (documents: number): number => Math.max(1, Math.ceil(documents / 100))
