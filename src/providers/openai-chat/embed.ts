/**
 * Embeddings and rerank on an OpenAI-compatible host: `POST {base_url}/embeddings` (OpenAI's
 * shape) and `POST {base_url}/rerank` (Cohere's shape, which Jina, Voyage, vLLM and others serve).
 */
import { trimSlash } from "../http"
import { postJson } from "../json-post"
import { ProviderError } from "../types"
import { type Embedder, type Reranker, searchUnitsOf } from "../embeddings/types"
import { openAiChatWire } from "./adapter"

interface EmbeddingsAnswer {
  readonly data?: ReadonlyArray<{ readonly index?: number; readonly embedding?: ReadonlyArray<number> }>
  readonly usage?: { readonly prompt_tokens?: number }
}

interface RerankAnswer {
  readonly results?: ReadonlyArray<{ readonly index?: number; readonly relevance_score?: number }>
  readonly meta?: { readonly billed_units?: { readonly search_units?: number } }
  readonly usage?: { readonly total_tokens?: number; readonly search_units?: number }
}

const bearer = (apiKey: string | undefined): Record<string, string> => (apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` })
const baseOf = (baseUrl: string | undefined) => trimSlash(baseUrl ?? openAiChatWire.defaultBaseUrl)

export const openAiEmbedder: Embedder = {
  // OpenAI's own limit of inputs per call.
  maxInputs: () => 2048,
  embed: async (call, config, options) => {
    const body: Record<string, unknown> = { model: call.model, input: call.inputs, encoding_format: "float" }
    if (call.dimensions !== undefined) body["dimensions"] = call.dimensions
    if (call.user !== undefined) body["user"] = call.user
    if (call.inputType !== undefined) body["input_type"] = call.inputType
    const answer = (await postJson(`${baseOf(config.base_url)}/embeddings`, bearer(options.apiKey), body, config, options)) as EmbeddingsAnswer
    const vectors: Array<ReadonlyArray<number>> = []
    for (const [at, item] of (answer.data ?? []).entries()) {
      const index = item.index ?? at
      if (!Array.isArray(item.embedding) || index < 0 || index >= call.inputs.length) break
      vectors[index] = item.embedding
    }
    if (vectors.length !== call.inputs.length || vectors.includes(undefined as never)) {
      throw new ProviderError("server", `${config.id} answered ${answer.data?.length ?? 0} embeddings for ${call.inputs.length} inputs`)
    }
    return { vectors, inputTokens: answer.usage?.prompt_tokens }
  },
}

export const openAiReranker: Reranker = {
  maxDocuments: 1000,
  rerank: async (call, config, options) => {
    const body: Record<string, unknown> = { model: call.model, query: call.query, documents: call.documents, return_documents: false }
    if (call.topN !== undefined) body["top_n"] = call.topN
    const answer = (await postJson(`${baseOf(config.base_url)}/rerank`, bearer(options.apiKey), body, config, options)) as RerankAnswer
    const results = (answer.results ?? [])
      .filter((r) => typeof r.index === "number" && r.index >= 0 && r.index < call.documents.length && typeof r.relevance_score === "number")
      .map((r) => ({ index: r.index as number, relevanceScore: r.relevance_score as number }))
    return {
      results,
      searchUnits: answer.meta?.billed_units?.search_units ?? answer.usage?.search_units ?? searchUnitsOf(call.documents.length),
      inputTokens: answer.usage?.total_tokens,
    }
  },
}
