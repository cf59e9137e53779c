/**
 * Gemini API embeddings: POST {base_url}/models/{model}:batchEmbedContents, at most 100 inputs a
 * call. The answer carries no token count, so the prompt tokens are estimated from the text
 * (the gateway's estimate, four characters a token).
 */
import { Schema } from "effect"
import { estimateTokens } from "../../domain/pricing"
import { checkCount, type EmbedContext, type Embeddings, inBatches, postJson } from "../embed-call"
import { ProviderError } from "../types"
import { geminiUrl, modelPath } from "./adapter"
import { googleStatusError } from "./wire"

/** batchEmbedContents takes at most this many requests. */
export const GEMINI_EMBED_BATCH = 100

const BatchAnswer = Schema.Struct({ embeddings: Schema.Array(Schema.Struct({ values: Schema.Array(Schema.Number) })) })

export const embed = (
  model: string,
  inputs: ReadonlyArray<string>,
  dimensions: number | undefined,
  signal: AbortSignal,
  context: EmbedContext,
): Promise<Embeddings> => {
  const { config, apiKey } = context
  if (apiKey === undefined || apiKey === "") {
    return Promise.reject(new ProviderError("auth", `gemini provider ${config.id}: the variable named by api_key_env is not set`))
  }
  const url = geminiUrl(config, model, "batchEmbedContents")
  const name = modelPath(model)
  return inBatches(inputs, GEMINI_EMBED_BATCH, async (slice) => {
    const requests = slice.map((text) => ({
      model: name,
      content: { parts: [{ text }] },
      ...(dimensions === undefined ? {} : { outputDimensionality: dimensions }),
    }))
    const answer = await postJson("gemini", url, { "x-goog-api-key": apiKey }, { requests }, BatchAnswer, signal, config, googleStatusError)
    const vectors = answer.embeddings.map((e) => [...e.values])
    const promptTokens = slice.reduce((sum, text) => sum + estimateTokens(text.length), 0)
    return checkCount("gemini", { vectors, promptTokens }, slice.length)
  })
}
