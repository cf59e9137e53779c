/** The provider for each `kind` of the config file. */
import { anthropicProvider } from "./anthropic/adapter"
import { fakeProvider } from "./fake"
import { openAiChatProvider } from "./openai-chat/adapter"
import { openAiResponsesProvider } from "./openai-responses/adapter"
import type { Provider, ProviderConfig } from "./types"

const PROVIDERS: Record<ProviderConfig["kind"], Provider> = {
  "openai-chat": openAiChatProvider,
  "openai-responses": openAiResponsesProvider,
  anthropic: anthropicProvider,
  fake: fakeProvider,
}

export const providerFor = (kind: ProviderConfig["kind"]): Provider => PROVIDERS[kind]
