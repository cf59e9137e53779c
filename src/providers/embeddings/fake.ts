/**
 * The in-process fake (kind "fake") for embeddings and rerank: deterministic vectors from the
 * text (the same text, the same vector), so the demo and the tests run offline. Markers in the
 * endpoint's `upstream_model` script it: `[fail:429|500|503|auth|400]` fails every call;
 * `[batch:N]` takes at most N inputs a call (the caller splits longer batches).
 */
import { ProviderError } from "../types"
import { type Embedder, type Reranker, searchUnitsOf } from "./types"

const FAILURES: Record<string, () => ProviderError> = {
  "429": () => new ProviderError("rate_limited", "fake: rate limited", 429, 1),
  "500": () => new ProviderError("server", "fake: internal server error", 500),
  "503": () => new ProviderError("server", "fake: service unavailable", 503),
  auth: () => new ProviderError("auth", "fake: invalid api key", 401),
  "400": () => new ProviderError("bad_request", "fake: bad request", 400),
}

const FAIL = /\[fail:([a-z0-9]+)\]/
const BATCH = /\[batch:(\d+)\]/
export const FAKE_DIMENSIONS = 8
/**
 * The most numbers one fake answer carries (inputs × dimensions): beyond it the fake refuses with
 * the upstream's 400, as a model refuses dimensions it does not have. Without it a `dimensions` of a
 * billion grew one answer until the process ran out of memory (the demo catalog answers any key).
 */
export const FAKE_MAX_NUMBERS = 1 << 20

const failureOf = (model: string): ProviderError | undefined => {
  const match = FAIL.exec(model)
  return match === null ? undefined : FAILURES[match[1] as string]?.()
}

/** A unit vector of `dimensions` from the text (FNV-1a, then a multiplicative step per component). */
export const fakeVector = (text: string, dimensions: number = FAKE_DIMENSIONS): Array<number> => {
  let h = 2166136261
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0
  const out: Array<number> = []
  let norm = 0
  for (let i = 0; i < dimensions; i++) {
    h = Math.imul(h ^ (i + 1), 2654435761) >>> 0
    const v = (h / 4294967296) * 2 - 1
    out.push(v)
    norm += v * v
  }
  const scale = 1 / Math.sqrt(norm)
  // float32 values, as upstreams send them: base64 and float answers then carry the same numbers.
  return out.map((v) => Math.fround(v * scale))
}

/** Tokens of a fake input: ceil(characters ÷ 4), at least 1; token ids count one each. */
const tokensOf = (input: string | ReadonlyArray<number>): number => (typeof input === "string" ? Math.max(1, Math.ceil(input.length / 4)) : input.length)

export const fakeEmbedder: Embedder = {
  maxInputs: (model) => {
    const match = BATCH.exec(model)
    return match === null ? 2048 : Number(match[1])
  },
  embed: async (call, _config, options) => {
    if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
    const failure = failureOf(call.model)
    if (failure !== undefined) throw failure
    const dimensions = call.dimensions ?? FAKE_DIMENSIONS
    if (dimensions * call.inputs.length > FAKE_MAX_NUMBERS) {
      throw new ProviderError(
        "bad_request",
        `fake: dimensions ${dimensions} for ${call.inputs.length} input(s) is more than this model writes (at most ${FAKE_MAX_NUMBERS} numbers an answer)`,
        400,
      )
    }
    let tokens = 0
    const vectors = call.inputs.map((input) => {
      tokens += tokensOf(input)
      return fakeVector(typeof input === "string" ? input : input.join(","), dimensions)
    })
    return { vectors, inputTokens: tokens }
  },
}

const wordsOf = (text: string) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w !== "")

export const fakeReranker: Reranker = {
  maxDocuments: 1000,
  rerank: async (call, _config, options) => {
    if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
    const failure = failureOf(call.model)
    if (failure !== undefined) throw failure
    // The share of the query's words a document holds: a plain, deterministic relevance.
    const query = new Set(wordsOf(call.query))
    const scored = call.documents.map((document, index) => {
      const words = new Set(wordsOf(document))
      let shared = 0
      for (const w of query) if (words.has(w)) shared++
      return { index, relevanceScore: query.size === 0 ? 0 : Math.round((shared / query.size) * 1e6) / 1e6 }
    })
    scored.sort((a, b) => b.relevanceScore - a.relevanceScore || a.index - b.index)
    let tokens = tokensOf(call.query)
    for (const document of call.documents) tokens += tokensOf(document)
    return { results: scored.slice(0, call.topN ?? scored.length), searchUnits: searchUnitsOf(call.documents.length), inputTokens: tokens }
  },
}
