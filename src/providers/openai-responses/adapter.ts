/** The native Responses provider: POST {base_url}/responses with a Bearer key. */
import { httpProvider } from "../http"
import type { Provider } from "../types"
import type { WireFormat } from "../wire"
import { responsesJsonEvents } from "./json"
import { responsesRequestBody } from "./request"
import { ResponsesStreamTranslator } from "./stream"

export const openAiResponsesWire: WireFormat = {
  name: "openai-responses",
  defaultBaseUrl: "https://api.openai.com/v1",
  path: "/responses",
  headers: (apiKey): Record<string, string> => (apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }),
  body: (request, stream) => responsesRequestBody(request, stream),
  fromJson: responsesJsonEvents,
  translator: () => new ResponsesStreamTranslator(),
}

export const openAiResponsesProvider: Provider = httpProvider(openAiResponsesWire)
