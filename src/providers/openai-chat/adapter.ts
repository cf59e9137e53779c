/** The Chat Completions provider: POST {base_url}/chat/completions with a Bearer key. */
import { httpProvider } from "../http"
import type { Provider } from "../types"
import type { WireFormat } from "../wire"
import { chatJsonEvents } from "./json"
import { chatRequestBody } from "./request"
import { ChatStreamTranslator } from "./stream"

export const openAiChatWire: WireFormat = {
  name: "openai-chat",
  defaultBaseUrl: "https://api.openai.com/v1",
  path: "/chat/completions",
  headers: (apiKey): Record<string, string> => (apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }),
  body: (request, stream) => chatRequestBody(request, stream),
  fromJson: chatJsonEvents,
  translator: () => new ChatStreamTranslator(),
}

export const openAiChatProvider: Provider = httpProvider(openAiChatWire)
