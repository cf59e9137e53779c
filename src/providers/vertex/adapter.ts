/**
 * The Vertex AI provider: Google's models in the Gemini format
 * (`…/publishers/google/models/{m}:generateContent`, `:streamGenerateContent?alt=sse`) and, on
 * endpoints that say `"publisher": "anthropic"`, Anthropic's models in the Messages format
 * (`…/publishers/anthropic/models/{m}:rawPredict`, `:streamRawPredict`). The host is
 * `{location}-aiplatform.googleapis.com`, or `aiplatform.googleapis.com` for location `global`;
 * the bearer token comes from the service account (credentials.ts).
 */
import { anthropicWire } from "../anthropic/adapter"
import { anthropicRequestBody, thinkingBudget } from "../anthropic/request"
import { geminiWire } from "../gemini/adapter"
import { geminiThinkingTokens } from "../gemini/request"
import { googleStatusError } from "../gemini/wire"
import { openUpstreamAt, sharedTransport } from "../http"
import { type CallOptions, type NormalizedRequest, type Provider, type ProviderConfig, ProviderError, type UpstreamCall } from "../types"
import { memoUrl, trimSlash } from "../urls"
import type { WireFormat } from "../wire"
import { tokenSourceFor } from "./credentials"

/** The `anthropic_version` Vertex AI takes in the body (in place of the header and the model). */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"

const NO_HEADERS: Record<string, string> = {}

export const vertexGoogleWire: WireFormat = { ...geminiWire, name: "vertex", headers: () => NO_HEADERS }

export const vertexAnthropicWire: WireFormat = {
  ...anthropicWire,
  name: "vertex",
  headers: () => NO_HEADERS,
  // The model is in the URL; Vertex refuses it in the body.
  body: (request, stream) => {
    const { model: _model, ...rest } = anthropicRequestBody(request, stream)
    return { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest }
  },
  errorOf: googleStatusError,
}

/** `https://{location}-aiplatform.googleapis.com/v1`; location `global` has no region in the host. */
export const vertexBaseUrl = (config: ProviderConfig): string => {
  if (config.base_url !== undefined) return trimSlash(config.base_url)
  const location = config.location ?? "global"
  return `https://${location === "global" ? "" : `${location}-`}aiplatform.googleapis.com/v1`
}

const urls = new WeakMap<ProviderConfig, Map<string, string>>()

/** The URL of `method` on a model of `publisher`. */
export const vertexUrl = (config: ProviderConfig, publisher: string, model: string, method: string): string =>
  memoUrl(
    urls,
    config,
    `${publisher} ${method} ${model}`,
    () => `${vertexBaseUrl(config)}/projects/${config.project ?? ""}/locations/${config.location ?? "global"}/publishers/${publisher}/models/${model}:${method}`,
  )

const open = async (request: NormalizedRequest, config: ProviderConfig, options: CallOptions): Promise<UpstreamCall> => {
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const tokens = tokenSourceFor(config)
  const authorization = await tokens.authorization()
  // The caller may have gone while the token was exchanged (the exchange goes on for the others).
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const anthropic = config.publisher === "anthropic"
  const url = anthropic
    ? vertexUrl(config, "anthropic", request.model, options.stream ? "streamRawPredict" : "rawPredict")
    : vertexUrl(config, "google", request.model, options.stream ? "streamGenerateContent?alt=sse" : "generateContent")
  try {
    return await openUpstreamAt(sharedTransport(), anthropic ? vertexAnthropicWire : vertexGoogleWire, request, config, options, url, { authorization })
  } catch (e) {
    // A token refused before its expiry (revoked, or the clock is off): exchange again next time.
    if (e instanceof ProviderError && e.kind === "auth") tokens.invalidate()
    throw e
  }
}

/** The larger of the two formats' thinking budgets: one provider serves both publishers, so its hold covers either. */
const vertexThinkingTokens = (reasoning: Parameters<typeof thinkingBudget>[0]): number => Math.max(geminiThinkingTokens(reasoning), thinkingBudget(reasoning) ?? 0)

export const vertexProvider: Provider = { open, thinkingTokens: vertexThinkingTokens }
