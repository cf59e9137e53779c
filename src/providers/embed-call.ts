/**
 * What the embedding functions of the adapters share (gemini/embed.ts, vertex/embed.ts,
 * azure-openai/embed.ts): the answer's shape, one JSON call through the gateway's upstream
 * transport (its pool and bounds) with the caller's signal and the provider's deadline, and
 * a batch split into the upstream's per-call limit and joined in order.
 */
import { Either, ParseResult, Schema } from "effect"
import { postJson as postJsonAnswer, type StatusError } from "./json-post"
import { type ProviderConfig, ProviderError } from "./types"

export interface Embeddings {
  /** One vector per input, in the inputs' order. */
  readonly vectors: Array<Array<number>>
  /** Undefined when the upstream did not count them: the gateway charges its estimate (`usage_estimated`), never 0. */
  readonly promptTokens: number | undefined
}

/** What an embedding call needs of its provider, as the chat adapters get it. */
export interface EmbedContext {
  readonly config: ProviderConfig
  /** The key read from `api_key_env` (the catalog endpoint's `apiKey`). */
  readonly apiKey?: string | undefined
}

export type { StatusError }

/** POSTs `body` as JSON (json-post.ts: the one path of the calls that are not a model turn) and decodes the answer with `schema`. */
export const postJson = async <A, I>(
  name: string,
  url: string,
  auth: Readonly<Record<string, string>>,
  body: unknown,
  schema: Schema.Schema<A, I>,
  signal: AbortSignal,
  config: ProviderConfig,
  statusError?: StatusError,
): Promise<A> => {
  const json = await postJsonAnswer(url, auth, body, config, { signal }, statusError)
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })(json)
  if (Either.isLeft(decoded)) {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
    // The root's issue is the schema's whole type written out: said in words instead.
    const where = issue === undefined ? "" : issue.path.length === 0 ? " (not a JSON object)" : ` (${issue.path.join(".")}: ${issue.message})`
    throw new ProviderError("server", `${name} upstream sent an embeddings answer of another shape${where}`)
  }
  return decoded.right
}

/** Runs `call` on slices of at most `size` inputs, side by side, and joins the answers in order. */
export const inBatches = async (
  inputs: ReadonlyArray<string>,
  size: number,
  call: (slice: ReadonlyArray<string>) => Promise<Embeddings>,
): Promise<Embeddings> => {
  if (inputs.length <= size) return call(inputs)
  const slices: Array<ReadonlyArray<string>> = []
  for (let at = 0; at < inputs.length; at += size) slices.push(inputs.slice(at, at + size))
  const answers = await Promise.all(slices.map(call))
  // One batch the upstream did not count makes the whole count unknown (estimated), not a part of it free.
  const counted = answers.every((a) => a.promptTokens !== undefined)
  return { vectors: answers.flatMap((a) => a.vectors), promptTokens: counted ? answers.reduce((sum, a) => sum + (a.promptTokens as number), 0) : undefined }
}

/** An answer with a vector per input, else the upstream's answer is not usable. */
export const checkCount = (name: string, embeddings: Embeddings, inputs: number): Embeddings => {
  if (embeddings.vectors.length !== inputs) {
    throw new ProviderError("server", `${name} upstream answered ${embeddings.vectors.length} embeddings for ${inputs} inputs`)
  }
  return embeddings
}
