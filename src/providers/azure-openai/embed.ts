/**
 * Azure OpenAI embeddings: POST …/openai/deployments/{deployment}/embeddings?api-version=… or
 * …/openai/v1/embeddings (the deployment as `model`), at most 2048 inputs a call, in OpenAI's
 * shape; the answer's `index` puts each vector in its place.
 */
import { Schema } from "effect"
import { countOf } from "../../domain/pricing"
import { checkCount, type EmbedContext, type Embeddings, inBatches, postJson } from "../embed-call"
import { ProviderError } from "../types"
import { azureAuth, azureUrl } from "./adapter"

/** Inputs per call Azure OpenAI takes. */
export const AZURE_EMBED_BATCH = 2048

const EmbeddingsAnswer = Schema.Struct({
  data: Schema.Array(Schema.Struct({ index: Schema.Number, embedding: Schema.Array(Schema.Number) })),
  // Any value: one that is no count (null, "7", -1) is charged as estimated (countOf), not a failed answer.
  usage: Schema.optional(Schema.NullOr(Schema.Struct({ prompt_tokens: Schema.optional(Schema.Unknown) }))),
})

export const embed = (
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions: number | undefined,
  signal: AbortSignal,
  context: EmbedContext,
): Promise<Embeddings> => {
  const { config } = context
  let auth: Record<string, string>
  try {
    auth = azureAuth(config, context.apiKey)
  } catch (e) {
    return Promise.reject(e)
  }
  const url = azureUrl(config, model, "embeddings")
  return inBatches(inputs, AZURE_EMBED_BATCH, async (slice) => {
    const body = { model, input: slice, ...(dimensions === undefined ? {} : { dimensions }) }
    const answer = await postJson("azure-openai", url, auth, body, EmbeddingsAnswer, signal, config)
    const vectors = new Array<Array<number>>(slice.length)
    for (const item of answer.data) {
      if (!Number.isInteger(item.index) || item.index < 0 || item.index >= slice.length) {
        throw new ProviderError("server", `azure-openai upstream answered an embedding of index ${item.index} for ${slice.length} inputs`)
      }
      vectors[item.index] = [...item.embedding]
    }
    const filled = vectors.filter((v) => v !== undefined)
    return checkCount("azure-openai", { vectors: filled, promptTokens: countOf(answer.usage?.prompt_tokens) }, slice.length)
  })
}
