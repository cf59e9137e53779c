/**
 * A JSON POST to an upstream and its JSON answer, through the shared transport with the
 * caller's signal and the provider's deadline (http.ts `UpstreamLink`): for the calls that are
 * not a model turn (embeddings, rerank). A non-2xx answer is a `ProviderError` as for a turn.
 */
import { errorDetailOf, errorFromStatus } from "./errors"
import { DEFAULT_TIMEOUT_MS, sharedTransport, UpstreamLink } from "./http"
import { DEFAULT_MAX_CONNECTIONS, type HeaderReader, type UpstreamResponse } from "./http1"
import { DEFAULT_UPSTREAM_LIMITS, ProviderError, type ProviderConfig } from "./types"
import type { UpstreamCallOptions } from "./embeddings/types"

/** A non-2xx answer as a `ProviderError` (a provider whose errors have a shape of their own passes its reader). */
export type StatusError = (status: number, bodyText: string, fallback: string, headers: HeaderReader) => ProviderError

const defaultStatusError: StatusError = (status, text, fallback, headers) => errorFromStatus(status, errorDetailOf(text, fallback), headers)

export const postJson = async (
  url: string,
  headers: Readonly<Record<string, string>>,
  body: unknown,
  config: ProviderConfig,
  options: UpstreamCallOptions,
  statusError: StatusError = defaultStatusError,
): Promise<unknown> => {
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const all: Record<string, string> = { "content-type": "application/json", accept: "application/json", ...headers }
  if (config.headers !== undefined) for (const name in config.headers) all[name] = config.headers[name] as string
  const link = new UpstreamLink(options.signal, config.timeout_ms ?? DEFAULT_TIMEOUT_MS)
  const limits = options.limits ?? DEFAULT_UPSTREAM_LIMITS
  let response: UpstreamResponse
  try {
    response = await sharedTransport()({
      url,
      headers: all,
      body: JSON.stringify(body),
      signal: link.controller,
      maxConnections: config.max_connections ?? DEFAULT_MAX_CONNECTIONS,
      receiveBufferBytes: limits.receiveBufferBytes,
    })
  } catch (cause) {
    link.close()
    throw link.failure(cause)
  }
  link.touch()
  let text: string
  try {
    text = await response.text(limits.bodyBytes)
  } catch (cause) {
    link.close()
    throw link.failure(cause)
  }
  link.close()
  if (response.status < 200 || response.status > 299) {
    throw statusError(response.status, text, `${config.kind} upstream answered ${response.status}`, response.headers)
  }
  try {
    return JSON.parse(text)
  } catch {
    throw new ProviderError("server", `${config.kind} upstream sent a body that is not JSON`)
  }
}
