/**
 * Vertex AI embeddings of Google's models: POST …/publishers/google/models/{model}:predict with
 * one instance per input. `gemini-embedding-*` models take one instance a call, the
 * `text-embedding-*` and `text-multilingual-embedding-*` ones 250. Each prediction counts its tokens.
 */
import { Schema } from "effect"
import { countOf } from "../../domain/pricing"
import { checkCount, type EmbedContext, type Embeddings, inBatches, postJson } from "../embed-call"
import { googleStatusError } from "../gemini/wire"
import { ProviderError } from "../types"
import { vertexUrl } from "./adapter"
import { tokenSourceFor } from "./credentials"

/** Instances per `:predict` call for a model. */
export const vertexEmbedBatch = (model: string): number => (model.startsWith("gemini-embedding") ? 1 : 250)

const PredictAnswer = Schema.Struct({
  predictions: Schema.Array(
    Schema.Struct({
      embeddings: Schema.Struct({
        values: Schema.Array(Schema.Number),
        // Any value: one that is no count (null, "3", -1) leaves the batch's count unknown (countOf).
        statistics: Schema.optional(Schema.NullOr(Schema.Struct({ token_count: Schema.optional(Schema.Unknown) }))),
      }),
    }),
  ),
})

export const embed = async (
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions: number | undefined,
  signal: AbortSignal,
  context: EmbedContext,
): Promise<Embeddings> => {
  const { config } = context
  if (config.publisher === "anthropic") throw new ProviderError("bad_request", `vertex provider ${config.id}: Anthropic's models on Vertex AI do not embed`)
  const tokens = tokenSourceFor(config)
  const url = vertexUrl(config, "google", model, "predict")
  return inBatches(inputs, vertexEmbedBatch(model), async (slice) => {
    const body = {
      instances: slice.map((content) => ({ content })),
      ...(dimensions === undefined ? {} : { parameters: { outputDimensionality: dimensions } }),
    }
    let answer: typeof PredictAnswer.Type
    try {
      answer = await postJson("vertex", url, { authorization: await tokens.authorization() }, body, PredictAnswer, signal, config, googleStatusError)
    } catch (e) {
      if (e instanceof ProviderError && e.kind === "auth") tokens.invalidate()
      throw e
    }
    const vectors = answer.predictions.map((p) => [...p.embeddings.values])
    // A prediction without its token count leaves the batch's count unknown: estimated, not 0.
    const counts = answer.predictions.map((p) => countOf(p.embeddings.statistics?.token_count))
    const promptTokens = counts.every((n) => n !== undefined) ? counts.reduce<number>((sum, n) => sum + (n as number), 0) : undefined
    return checkCount("vertex", { vectors, promptTokens }, slice.length)
  })
}
