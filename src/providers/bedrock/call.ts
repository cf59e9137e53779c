/**
 * One signed POST to Bedrock's runtime through the gateway's upstream transport, with the
 * caller's abort signal and the provider's deadline (http.ts `UpstreamLink`); a non-2xx answer
 * is read and mapped to a `ProviderError` (AWS's error type first). Converse, ConverseStream and
 * InvokeModel (embeddings, rerank) all go through it.
 */
import { isJsonObject, notAnAnswer } from "../errors"
import { DEFAULT_TIMEOUT_MS, sharedTransport, trimSlash, UpstreamLink } from "../http"
import { DEFAULT_MAX_CONNECTIONS, type Transport, type UpstreamResponse } from "../http1"
import { type CallOptions, DEFAULT_UPSTREAM_LIMITS, ProviderError, type ProviderConfig } from "../types"
import { authHeaders, bedrockAuth } from "./credentials"
import { bedrockErrorFromStatus, defaultBedrockBaseUrl } from "./wire"

export interface BedrockAnswer {
  readonly response: UpstreamResponse
  readonly link: UpstreamLink
}

type Options = Pick<CallOptions, "signal" | "apiKey" | "limits">

/** The runtime's base URL of a provider: `base_url`, else the region's public host. */
export const bedrockBaseUrl = (config: ProviderConfig): string => trimSlash(config.base_url ?? defaultBedrockBaseUrl(config.region ?? "us-east-1"))

/** ConverseStream's answer type: what `accept` asks for a stream of frames. */
export const EVENT_STREAM = "application/vnd.amazon.eventstream"

export const postToBedrock = async (
  config: ProviderConfig,
  options: Options,
  path: string,
  body: string,
  accept: string,
  transport: Transport = sharedTransport(),
): Promise<BedrockAnswer> => {
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const auth = bedrockAuth(config, options.apiKey)
  if (auth instanceof ProviderError) throw auth
  const url = bedrockBaseUrl(config) + path
  const headers: Record<string, string> = { "content-type": "application/json", accept }
  const signed = authHeaders(auth, url, body)
  for (const name in signed) headers[name] = signed[name] as string
  // The operator's headers go unsigned (AWS accepts unsigned headers beside the signed ones).
  if (config.headers !== undefined) for (const name in config.headers) headers[name] = config.headers[name] as string
  const link = new UpstreamLink(options.signal, config.timeout_ms ?? DEFAULT_TIMEOUT_MS)
  const limits = options.limits ?? DEFAULT_UPSTREAM_LIMITS
  let response: UpstreamResponse
  try {
    response = await transport({
      url,
      headers,
      body,
      signal: link.controller,
      maxConnections: config.max_connections ?? DEFAULT_MAX_CONNECTIONS,
      receiveBufferBytes: limits.receiveBufferBytes,
    })
  } catch (cause) {
    link.close()
    throw link.failure(cause)
  }
  link.touch()
  const ok = response.status >= 200 && response.status <= 299
  // A JSON body where frames were asked for (a proxy's error under a 200) is an error body, read as
  // one (its message, its x-amzn-errortype's kind), not as frames whose first bytes are a length.
  const jsonForFrames = ok && accept === EVENT_STREAM && response.headers.get("content-type")?.startsWith("application/json") === true
  if (ok && !jsonForFrames) return { response, link }
  let text = ""
  try {
    text = await response.text(limits.bodyBytes)
  } catch (cause) {
    if (link.timedOut || options.signal.aborted) {
      link.close()
      throw link.failure(cause)
    }
  }
  link.close()
  throw bedrockErrorFromStatus(ok ? 502 : response.status, text, response.headers)
}

/** A 2xx answer's body as JSON (InvokeModel and Converse); the failure is a "server" error. */
export const readJson = async (answer: BedrockAnswer, options: Options): Promise<unknown> => {
  const limits = options.limits ?? DEFAULT_UPSTREAM_LIMITS
  let text: string
  try {
    text = await answer.response.text(limits.bodyBytes)
  } catch (cause) {
    const failure = answer.link.failure(cause)
    failure.answerBegun = true
    throw failure
  } finally {
    answer.link.close()
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new ProviderError("server", "bedrock upstream sent a body that is not JSON")
  }
  // Every answer this reads (Converse, InvokeModel's embeddings and rerank) is an object.
  if (!isJsonObject(json)) throw notAnAnswer("bedrock", "not a JSON object")
  return json
}
