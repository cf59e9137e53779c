/**
 * The Gemini API provider: POST {base_url}/models/{model}:generateContent, or
 * :streamGenerateContent?alt=sse for a stream, with the key in `x-goog-api-key` (never in the URL,
 * which error messages and logs may show).
 */
import { openUpstreamAt, sharedTransport } from "../http"
import { type Provider, type ProviderConfig, ProviderError } from "../types"
import { memoUrl, trimSlash } from "../urls"
import type { WireFormat } from "../wire"
import { GeminiAnswer, geminiJsonEvents } from "./answer"
import { geminiRequestBody, geminiThinkingTokens } from "./request"
import { googleStatusError } from "./wire"

export const GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"

/** The Gemini model format, as the Gemini API and Vertex AI's Google models both speak it. */
export const geminiWire: WireFormat = {
  name: "gemini",
  defaultBaseUrl: GEMINI_BASE_URL,
  path: "",
  headers: (apiKey): Record<string, string> => (apiKey === undefined ? {} : { "x-goog-api-key": apiKey }),
  body: (request) => geminiRequestBody(request),
  fromJson: geminiJsonEvents,
  translator: () => new GeminiAnswer(),
  thinkingTokens: geminiThinkingTokens,
  errorOf: googleStatusError,
}

/** `models/…` and `tunedModels/…` names go as they are; a bare id is a model's. */
export const modelPath = (model: string): string => (model.startsWith("models/") || model.startsWith("tunedModels/") ? model : `models/${model}`)

const urls = new WeakMap<ProviderConfig, Map<string, string>>()

export const geminiUrl = (config: ProviderConfig, model: string, method: string): string =>
  memoUrl(urls, config, `${method} ${model}`, () => `${trimSlash(config.base_url ?? GEMINI_BASE_URL)}/${modelPath(model)}:${method}`)

export const geminiProvider: Provider = {
  open: (request, config, options) => {
    if (options.apiKey === undefined || options.apiKey === "") {
      return Promise.reject(new ProviderError("auth", `gemini provider ${config.id}: the variable named by api_key_env is not set`))
    }
    const url = geminiUrl(config, request.model, options.stream ? "streamGenerateContent?alt=sse" : "generateContent")
    return openUpstreamAt(sharedTransport(), geminiWire, request, config, options, url, geminiWire.headers(options.apiKey))
  },
  thinkingTokens: geminiThinkingTokens,
}
