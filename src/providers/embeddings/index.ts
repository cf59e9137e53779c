/**
 * The upstreams of `POST /v1/embeddings` and `POST /v1/rerank`, by provider kind: one line per
 * kind that serves them (a kind missing here cannot serve a catalog model of kind "embedding" or
 * "rerank"; the config check says so at start).
 */
import { bedrockEmbedder, bedrockReranker } from "../bedrock/embed"
import type { ProviderKind } from "../kinds"
import { openAiEmbedder, openAiReranker } from "../openai-chat/embed"
import { azureEmbedder, geminiEmbedder, vertexEmbedder } from "./clouds"
import { fakeEmbedder, fakeReranker } from "./fake"
import type { Embedder, Reranker } from "./types"

export const EMBEDDERS: Partial<Record<ProviderKind, Embedder>> = {
  "openai-chat": openAiEmbedder,
  bedrock: bedrockEmbedder,
  gemini: geminiEmbedder,
  vertex: vertexEmbedder,
  "azure-openai": azureEmbedder,
  fake: fakeEmbedder,
}

export const RERANKERS: Partial<Record<ProviderKind, Reranker>> = {
  "openai-chat": openAiReranker,
  bedrock: bedrockReranker,
  fake: fakeReranker,
}
