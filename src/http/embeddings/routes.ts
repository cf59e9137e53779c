/**
 * `POST /v1/embeddings` and `POST /v1/rerank`: the key from the headers (any key, before the body
 * is read), the body under the cap and the deadline, the request decoded (src/domain/embeddings.ts),
 * then calls.ts routes, reserves, calls, records and settles. The upstream of an endpoint is its
 * provider kind's embedder or reranker (src/providers/embeddings/index.ts); a batch over its
 * per-call limit is split, the parts run a few at a time, and joined in order.
 */
import { Context, Either, Runtime } from "effect"
import type { Settings } from "../../config/Config.js"
import { type ApiError, errorResponse as envelope } from "../../domain/errors.js"
import { base64Float32, type EmbeddingInput, embeddingsRequestOf, rerankRequestOf } from "../../domain/embeddings.js"
import { countOf } from "../../domain/pricing.js"
import { authenticate, parseJson } from "../../pipeline/ingress.js"
import { type Loaded, Missing } from "../../pipeline/stages.js"
import type { RequestLifecycle } from "../../pipeline/lifecycle.js"
import { PlainAbort } from "../../providers/abort.js"
import { EMBEDDERS, RERANKERS } from "../../providers/embeddings/index.js"
import { type Embedder, type EmbeddingResult, searchUnitsOf, type UpstreamCallOptions } from "../../providers/embeddings/types.js"
import { ProviderError, type UpstreamLimits } from "../../providers/types.js"
import { Router } from "../../routing/Router.js"
import type { Endpoint } from "../../services/Catalog.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { KeyStore } from "../../services/KeyStore.js"
import { Spend } from "../../services/Spend.js"
import { BODY_TIMED_OUT, bodyTimedOut, makeBodyDeadline, readCappedText } from "../../pipeline/body.js"
import type { ErrorLog } from "../../lib/log.js"
import type { RequestTrace } from "../../pipeline/trace.js"
import { Deadlines } from "../../deadlines.js"
import { type Answered, makeCalls, PartlyAnswered } from "./calls.js"

/** Parts of one split batch in flight at once. */
const BATCH_CONCURRENCY = 4

/** Tokens an upstream may add per input (start and end markers), on top of one per byte at most. */
const TOKENS_PER_INPUT = 8

const utf8Bytes = (text: string): number => Buffer.byteLength(text, "utf8")

/** A true bound of an input's tokens: a token covers at least one byte; token ids are counted. */
const tokenBoundOf = (input: EmbeddingInput): number => (typeof input === "string" ? utf8Bytes(input) : input.length) + TOKENS_PER_INPUT

const CLOSE = { connection: "close" }

/** The error envelope, with extra headers (a refusal before the body is read closes the connection). */
const errorResponse = (e: ApiError, headers: Record<string, string> = {}): Response => {
  const res = envelope(e)
  for (const name in headers) res.headers.set(name, headers[name] as string)
  return res
}
const JSON_HEADERS = { "content-type": "application/json" }

/**
 * `inputs` through `embedder` in parts of at most its per-call limit, `BATCH_CONCURRENCY` at a
 * time, joined in order. A failed part stops the others; the tokens of the parts that answered
 * come with the failure (PartlyAnswered), as the upstream billed them.
 */
export const embedInParts = async (
  embedder: Embedder,
  endpoint: Endpoint,
  inputs: ReadonlyArray<EmbeddingInput>,
  call: { readonly dimensions?: number; readonly inputType?: string; readonly user?: string },
  signal: PlainAbort,
  limits: UpstreamCallOptions["limits"],
): Promise<Answered<ReadonlyArray<ReadonlyArray<number>>>> => {
  const size = Math.max(1, embedder.maxInputs(endpoint.upstreamModel))
  const options: UpstreamCallOptions = { signal, ...(endpoint.apiKey === undefined ? {} : { apiKey: endpoint.apiKey }), ...(limits === undefined ? {} : { limits }) }
  const one = (part: ReadonlyArray<EmbeddingInput>) => embedder.embed({ model: endpoint.upstreamModel, inputs: part, ...call }, endpoint.provider, options)
  if (inputs.length <= size) {
    const result = await one(inputs)
    return { value: result.vectors, inputTokens: countOf(result.inputTokens), units: 1 }
  }
  const parts: Array<ReadonlyArray<EmbeddingInput>> = []
  for (let at = 0; at < inputs.length; at += size) parts.push(inputs.slice(at, at + size))
  const results: Array<EmbeddingResult | undefined> = new Array(parts.length)
  // The parts share one abort: the first failure stops the rest.
  const partsAbort = new PlainAbort()
  const onAbort = () => partsAbort.abort(signal.reason)
  signal.addEventListener("abort", onAbort)
  const partOptions: UpstreamCallOptions = { ...options, signal: partsAbort }
  let next = 0
  let failure: unknown
  const worker = async () => {
    while (next < parts.length && failure === undefined) {
      const at = next++
      try {
        results[at] = await embedder.embed({ model: endpoint.upstreamModel, inputs: parts[at] as ReadonlyArray<EmbeddingInput>, ...call }, endpoint.provider, partOptions)
      } catch (cause) {
        failure ??= cause
        partsAbort.abort(cause)
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: Math.min(BATCH_CONCURRENCY, parts.length) }, worker))
  } finally {
    signal.removeEventListener("abort", onAbort)
  }
  let tokens = 0
  let counted = true
  for (const result of results) {
    if (result === undefined) continue
    const count = countOf(result.inputTokens)
    if (count === undefined) counted = false
    else tokens += count
  }
  if (failure !== undefined) {
    const error = failure instanceof ProviderError ? failure : new ProviderError("connection", String(failure))
    if (tokens > 0) throw new PartlyAnswered(error, tokens)
    throw error
  }
  const vectors: Array<ReadonlyArray<number>> = []
  for (const result of results) for (const vector of (result as EmbeddingResult).vectors) vectors.push(vector)
  return { value: vectors, inputTokens: counted ? tokens : undefined, units: 1 }
}

export interface EmbeddingRoutesOptions {
  readonly settings: Settings
  readonly lifecycle: RequestLifecycle
  readonly log: ErrorLog
  /** The request's key is good: the server lifts its idle timeout for it. */
  readonly authenticated?: (req: Request, trace: RequestTrace | undefined) => void
}

export const makeEmbeddingRoutes = (runtime: Runtime.Runtime<KeyStore | Router | Spend | GenerationStore>, options: EmbeddingRoutesOptions) => {
  const { settings, log } = options
  const keys = Context.get(runtime.context, KeyStore)
  const runPromise = Runtime.runPromise(runtime)
  const bodyDeadline = makeBodyDeadline(settings.bodyTimeoutMs, settings.maxBodyBytes)
  const limits: UpstreamLimits = {
    bodyBytes: settings.maxUpstreamBodyBytes,
    eventBytes: settings.maxUpstreamEventBytes,
    receiveBufferBytes: settings.upstreamReceiveBufferBytes,
  }
  const calls = makeCalls({
    settings,
    router: Context.get(runtime.context, Router),
    spend: Context.get(runtime.context, Spend),
    generationStore: Runtime.runSync(runtime)(GenerationStore),
    lifecycle: options.lifecycle,
    deadlines: new Deadlines(settings.requestTimeoutMs, undefined, (e) => log({}, "a request deadline's handler failed", e)),
    log,
  })

  /** The caller and the parsed body, or the refusal (a key is checked before the body is read). */
  const admit = async (req: Request, trace: RequestTrace | undefined) => {
    const loaded: Loaded = {}
    let principal = authenticate(keys, req.headers, loaded)
    while (principal instanceof Missing) {
      await runPromise(principal.load)
      principal = authenticate(keys, req.headers, loaded)
    }
    if ("_tag" in principal) return { refused: errorResponse(principal, CLOSE) }
    options.authenticated?.(req, trace)
    const read = readCappedText(req, settings.maxBodyBytes)
    if (!(read instanceof Promise)) return { refused: errorResponse(read, CLOSE) }
    const text = await bodyDeadline(read, req.headers.get("content-length"))
    if (text === BODY_TIMED_OUT) return { refused: errorResponse(bodyTimedOut(settings.bodyTimeoutMs), CLOSE) }
    if (typeof text !== "string") return { refused: errorResponse(text, CLOSE) }
    const json = parseJson(text)
    if (Either.isLeft(json)) return { refused: errorResponse(json.left) }
    return { principal, body: json.right }
  }

  const refuse = (refused: ApiError, generationId: string | undefined) => errorResponse(refused, generationId === undefined ? {} : { "x-generation-id": generationId })

  const embeddings = async (req: Request, trace?: RequestTrace): Promise<Response> => {
    const admitted = await admit(req, trace)
    if (admitted.refused !== undefined) return admitted.refused
    const decoded = embeddingsRequestOf(admitted.body)
    if (Either.isLeft(decoded)) return errorResponse(decoded.left)
    const { request, inputs } = decoded.right
    let tokenBound = 0
    let chars = 0
    for (const input of inputs) {
      tokenBound += tokenBoundOf(input)
      chars += typeof input === "string" ? input.length : input.length * 4
    }
    const call = {
      ...(request.dimensions === undefined ? {} : { dimensions: request.dimensions }),
      ...(request.input_type === undefined ? {} : { inputType: request.input_type }),
      ...(request.user === undefined ? {} : { user: request.user }),
    }
    const done = await calls.run(
      {
        kind: "embedding",
        principal: admitted.principal,
        headers: req.headers,
        routing: request,
        tokenBound,
        estimatedTokens: Math.max(1, Math.ceil(chars / 4)),
        maxUnits: 1,
        attempt: (endpoint, signal) => {
          const embedder = EMBEDDERS[endpoint.provider.kind]
          if (embedder === undefined) return Promise.reject(new ProviderError("bad_request", `provider kind ${endpoint.provider.kind} does not serve embeddings`))
          return embedInParts(embedder, endpoint, inputs, call, signal, limits)
        },
      },
      req.signal,
      trace?.id,
    )
    if ("refused" in done) return refuse(done.refused, done.generationId)
    if (trace !== undefined) trace.generationId = done.generationId
    const base64 = request.encoding_format === "base64"
    const data = done.value.map((vector, index) => ({ object: "embedding", index, embedding: base64 ? base64Float32(vector) : vector }))
    const body = {
      object: "list",
      data,
      model: done.endpoint.modelId,
      id: done.generationId,
      usage: { prompt_tokens: done.inputTokens, total_tokens: done.inputTokens, cost: done.cost },
    }
    return new Response(JSON.stringify(body), { headers: { ...JSON_HEADERS, "x-generation-id": done.generationId } })
  }

  const rerank = async (req: Request, trace?: RequestTrace): Promise<Response> => {
    const admitted = await admit(req, trace)
    if (admitted.refused !== undefined) return admitted.refused
    const decoded = rerankRequestOf(admitted.body)
    if (Either.isLeft(decoded)) return errorResponse(decoded.left)
    const { request, documents } = decoded.right
    let tokenBound = tokenBoundOf(request.query)
    let chars = request.query.length
    for (const document of documents) {
      tokenBound += tokenBoundOf(document)
      chars += document.length
    }
    const units = Math.max(1, Math.ceil(documents.length / 100))
    const done = await calls.run(
      {
        kind: "rerank",
        principal: admitted.principal,
        headers: req.headers,
        routing: request,
        tokenBound,
        estimatedTokens: Math.max(1, Math.ceil(chars / 4)),
        maxUnits: units,
        attempt: async (endpoint, signal) => {
          const reranker = RERANKERS[endpoint.provider.kind]
          if (reranker === undefined) throw new ProviderError("bad_request", `provider kind ${endpoint.provider.kind} does not serve rerank`)
          if (documents.length > reranker.maxDocuments) throw new ProviderError("bad_request", `${endpoint.provider.id} reranks at most ${reranker.maxDocuments} documents a call`)
          const options: UpstreamCallOptions = { signal, limits, ...(endpoint.apiKey === undefined ? {} : { apiKey: endpoint.apiKey }) }
          const call = { model: endpoint.upstreamModel, query: request.query, documents, ...(request.top_n === undefined ? {} : { topN: request.top_n }) }
          const answer = await reranker.rerank(call, endpoint.provider, options)
          // Units not a count are the documents' own (Cohere's rule), never a negative charge.
          const result = { ...answer, searchUnits: countOf(answer.searchUnits) ?? searchUnitsOf(documents.length) }
          return { value: result, inputTokens: countOf(result.inputTokens), units: result.searchUnits }
        },
      },
      req.signal,
      trace?.id,
    )
    if ("refused" in done) return refuse(done.refused, done.generationId)
    if (trace !== undefined) trace.generationId = done.generationId
    const withText = request.return_documents !== false
    const results = done.value.results.slice(0, request.top_n ?? documents.length).map((r) => ({
      index: r.index,
      relevance_score: r.relevanceScore,
      document: withText ? { text: documents[r.index] as string } : {},
    }))
    const body = {
      id: done.generationId,
      model: done.endpoint.modelId,
      provider: done.endpoint.provider.id,
      results,
      usage: { search_units: Math.min(done.value.searchUnits, units), total_tokens: done.inputTokens, cost: done.cost },
    }
    return new Response(JSON.stringify(body), { headers: { ...JSON_HEADERS, "x-generation-id": done.generationId } })
  }

  return { embeddings, rerank } as const
}
