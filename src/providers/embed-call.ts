/**
 * What the embedding functions of the adapters share (gemini/embed.ts, vertex/embed.ts,
 * azure-openai/embed.ts): the answer's shape, one JSON call through the gateway's upstream
 * transport (its pool and bounds) with the caller's signal and the provider's deadline, and
 * a batch split into the upstream's per-call limit and joined in order.
 */
import { Either, ParseResult, Schema } from "effect"
import { errorDetailOf, errorFromStatus } from "./errors"
import { sharedTransport, DEFAULT_TIMEOUT_MS } from "./http"
import { DEFAULT_MAX_CONNECTIONS, type HeaderReader, type UpstreamResponse } from "./http1"
import { DEFAULT_UPSTREAM_LIMITS, type ProviderConfig, ProviderError } from "./types"

export interface Embeddings {
  /** One vector per input, in the inputs' order. */
  readonly vectors: Array<Array<number>>
  readonly promptTokens: number
}

/** What an embedding call needs of its provider, as the chat adapters get it. */
export interface EmbedContext {
  readonly config: ProviderConfig
  /** The key read from `api_key_env` (the catalog endpoint's `apiKey`). */
  readonly apiKey?: string | undefined
}

export type StatusError = (status: number, bodyText: string, fallback: string, headers: HeaderReader) => ProviderError

const defaultStatusError: StatusError = (status, text, fallback, headers) => errorFromStatus(status, errorDetailOf(text, fallback), headers)

/** POSTs `body` as JSON and decodes the answer with `schema`; any failure is a `ProviderError`. */
export const postJson = async <A, I>(
  name: string,
  url: string,
  auth: Readonly<Record<string, string>>,
  body: unknown,
  schema: Schema.Schema<A, I>,
  signal: AbortSignal,
  config: ProviderConfig,
  statusError: StatusError = defaultStatusError,
): Promise<A> => {
  if (signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json", ...auth, ...config.headers }
  const timeoutMs = config.timeout_ms ?? DEFAULT_TIMEOUT_MS
  const deadline = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)])
  let response: UpstreamResponse
  let text: string
  try {
    response = await sharedTransport()({
      url,
      headers,
      body: JSON.stringify(body),
      signal: deadline,
      maxConnections: config.max_connections ?? DEFAULT_MAX_CONNECTIONS,
    })
    text = await response.text(DEFAULT_UPSTREAM_LIMITS.bodyBytes)
  } catch (cause) {
    if (cause instanceof ProviderError) throw cause
    if (signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
    if (deadline.aborted) throw new ProviderError("timeout", `the upstream did not answer within ${timeoutMs} ms`)
    throw new ProviderError("connection", `upstream connection failed: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  if (response.status < 200 || response.status > 299) {
    throw statusError(response.status, text, `${name} upstream answered ${response.status} ${response.statusText}`.trim(), response.headers)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new ProviderError("server", `${name} upstream sent a body that is not JSON`)
  }
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })(json)
  if (Either.isLeft(decoded)) {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]
    throw new ProviderError("server", `${name} upstream sent an embeddings answer of another shape${issue === undefined ? "" : ` (${issue.path.join(".")}: ${issue.message})`}`)
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
  return { vectors: answers.flatMap((a) => a.vectors), promptTokens: answers.reduce((sum, a) => sum + a.promptTokens, 0) }
}

/** An answer with a vector per input, else the upstream's answer is not usable. */
export const checkCount = (name: string, embeddings: Embeddings, inputs: number): Embeddings => {
  if (embeddings.vectors.length !== inputs) {
    throw new ProviderError("server", `${name} upstream answered ${embeddings.vectors.length} embeddings for ${inputs} inputs`)
  }
  return embeddings
}
