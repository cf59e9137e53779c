/**
 * The cloud kinds' embedding calls (gemini/embed.ts, vertex/embed.ts, azure-openai/embed.ts) as
 * the registry's `Embedder`s: text inputs (token ids are refused, as those APIs take text), the
 * caller's signal as a native one for their transport, and the same per-call limits they split by.
 */
import type { AbortLike } from "../abort"
import { AZURE_EMBED_BATCH, embed as azureEmbed } from "../azure-openai/embed"
import type { EmbedContext, Embeddings } from "../embed-call"
import { embed as geminiEmbed, GEMINI_EMBED_BATCH } from "../gemini/embed"
import type { ProviderConfig } from "../types"
import { ProviderError } from "../types"
import { embed as vertexEmbed, vertexEmbedBatch } from "../vertex/embed"
import type { Embedder, EmbeddingInput, UpstreamCallOptions } from "./types"

type CloudEmbed = (model: string, inputs: ReadonlyArray<string>, dimensions: number | undefined, signal: AbortSignal, context: EmbedContext) => Promise<Embeddings>

const textsOf = (kind: string, inputs: ReadonlyArray<EmbeddingInput>): Array<string> =>
  inputs.map((input) => {
    if (typeof input !== "string") throw new ProviderError("bad_request", `${kind} embeddings take text inputs, not token ids`)
    return input
  })

/** A native signal that follows `like` for the length of one call. */
const following = async <A>(like: AbortLike, call: (signal: AbortSignal) => Promise<A>): Promise<A> => {
  if (like instanceof AbortSignal) return call(like)
  const controller = new AbortController()
  const onAbort = () => controller.abort(like.reason)
  if (like.aborted) onAbort()
  else like.addEventListener("abort", onAbort, { once: true })
  try {
    return await call(controller.signal)
  } finally {
    like.removeEventListener("abort", onAbort)
  }
}

const cloudEmbedder = (kind: string, maxInputs: (model: string) => number, embed: CloudEmbed): Embedder => ({
  maxInputs,
  embed: async (call, config: ProviderConfig, options: UpstreamCallOptions) => {
    const texts = textsOf(kind, call.inputs)
    const answer = await following(options.signal, (signal) => embed(call.model, texts, call.dimensions, signal, { config, apiKey: options.apiKey }))
    return { vectors: answer.vectors, inputTokens: answer.promptTokens }
  },
})

export const geminiEmbedder = cloudEmbedder("gemini", () => GEMINI_EMBED_BATCH, geminiEmbed)
export const vertexEmbedder = cloudEmbedder("vertex", vertexEmbedBatch, vertexEmbed)
export const azureEmbedder = cloudEmbedder("azure-openai", () => AZURE_EMBED_BATCH, azureEmbed)
