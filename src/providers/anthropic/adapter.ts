/** The Anthropic Messages provider: POST {base_url}/messages with `x-api-key` and a pinned API version. */
import { httpProvider } from "../http"
import type { Provider } from "../types"
import type { WireFormat } from "../wire"
import { anthropicJsonEvents } from "./json"
import { anthropicRequestBody, thinkingBudget } from "./request"
import { AnthropicStreamTranslator } from "./stream"

export const ANTHROPIC_VERSION = "2023-06-01"

export const anthropicWire: WireFormat = {
  name: "anthropic",
  defaultBaseUrl: "https://api.anthropic.com/v1",
  path: "/messages",
  headers: (apiKey): Record<string, string> => (apiKey === undefined ? { "anthropic-version": ANTHROPIC_VERSION } : { "x-api-key": apiKey, "anthropic-version": ANTHROPIC_VERSION }),
  body: (request, stream) => anthropicRequestBody(request, stream),
  fromJson: anthropicJsonEvents,
  translator: () => new AnthropicStreamTranslator(),
  // max_tokens counts thinking too: the request body adds the budget on top of the answer's.
  thinkingTokens: (reasoning) => thinkingBudget(reasoning) ?? 0,
}

export const anthropicProvider: Provider = httpProvider(anthropicWire)
