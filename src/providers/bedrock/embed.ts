/**
 * Embeddings and rerank on Bedrock through InvokeModel (`POST /model/{id}/invoke`), in each model
 * family's own body: Amazon Titan Text Embeddings (one text a call), Cohere Embed (up to 96
 * texts a call), and Cohere or Amazon Rerank.
 */
import { ProviderError } from "../types"
import { type EmbeddingInput, type Embedder, type Reranker, searchUnitsOf } from "../embeddings/types"
import { postToBedrock, readJson } from "./call"
import { modelPath } from "./wire"

interface TitanAnswer {
  readonly embedding?: ReadonlyArray<number>
  readonly inputTextTokenCount?: number
}

interface CohereEmbedAnswer {
  readonly embeddings?: ReadonlyArray<ReadonlyArray<number>> | { readonly float?: ReadonlyArray<ReadonlyArray<number>> }
}

interface RerankAnswer {
  readonly results?: ReadonlyArray<{ readonly index?: number; readonly relevance_score?: number }>
}

const isCohere = (model: string) => model.includes("cohere.embed")

const textsOf = (inputs: ReadonlyArray<EmbeddingInput>): Array<string> =>
  inputs.map((input) => {
    if (typeof input !== "string") throw new ProviderError("bad_request", "bedrock embedding models take text, not token ids")
    return input
  })

export const bedrockEmbedder: Embedder = {
  maxInputs: (model) => (isCohere(model) ? 96 : 1),
  embed: async (call, config, options) => {
    const texts = textsOf(call.inputs)
    if (isCohere(call.model)) {
      // Cohere needs input_type; documents being embedded for search is its common use.
      const body = JSON.stringify({ texts, input_type: call.inputType ?? "search_document" })
      const answer = await postToBedrock(config, options, modelPath(call.model, "invoke"), body, "application/json")
      const counted = answer.response.headers.get("x-amzn-bedrock-input-token-count")
      const json = (await readJson(answer, options)) as CohereEmbedAnswer
      const vectors = Array.isArray(json.embeddings) ? json.embeddings : ((json.embeddings as { float?: ReadonlyArray<ReadonlyArray<number>> } | undefined)?.float ?? [])
      if (vectors.length !== texts.length) throw new ProviderError("server", `${config.id} answered ${vectors.length} embeddings for ${texts.length} texts`)
      return { vectors, inputTokens: counted === null ? undefined : Number(counted) }
    }
    const body: Record<string, unknown> = { inputText: texts[0] }
    if (call.dimensions !== undefined) body["dimensions"] = call.dimensions
    const answer = await postToBedrock(config, options, modelPath(call.model, "invoke"), JSON.stringify(body), "application/json")
    const json = (await readJson(answer, options)) as TitanAnswer
    if (!Array.isArray(json.embedding)) throw new ProviderError("server", `${config.id} answered no embedding`)
    return { vectors: [json.embedding], inputTokens: json.inputTextTokenCount }
  },
}

export const bedrockReranker: Reranker = {
  maxDocuments: 1000,
  rerank: async (call, config, options) => {
    const body: Record<string, unknown> = { query: call.query, documents: call.documents, api_version: 2 }
    if (call.topN !== undefined) body["top_n"] = call.topN
    const answer = await postToBedrock(config, options, modelPath(call.model, "invoke"), JSON.stringify(body), "application/json")
    const json = (await readJson(answer, options)) as RerankAnswer
    const results = (json.results ?? [])
      .filter((r) => typeof r.index === "number" && r.index >= 0 && r.index < call.documents.length && typeof r.relevance_score === "number")
      .map((r) => ({ index: r.index as number, relevanceScore: r.relevance_score as number }))
    return { results, searchUnits: searchUnitsOf(call.documents.length), inputTokens: undefined }
  },
}
