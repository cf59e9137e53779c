/** The provider for each `kind` of the config file. */
import { anthropicProvider } from "./anthropic/adapter"
import { azureOpenAiProvider } from "./azure-openai/adapter"
import { bedrockProvider } from "./bedrock/adapter"
import { fakeProvider } from "./fake"
import { geminiProvider } from "./gemini/adapter"
import { openAiChatProvider } from "./openai-chat/adapter"
import { openAiResponsesProvider } from "./openai-responses/adapter"
import type { ProviderKind } from "./kinds"
import type { Provider } from "./types"
import { vertexProvider } from "./vertex/adapter"

/** One provider per kind (a kind missing here is a compile error). */
const PROVIDERS: Record<ProviderKind, Provider> = {
  "openai-chat": openAiChatProvider,
  "openai-responses": openAiResponsesProvider,
  anthropic: anthropicProvider,
  fake: fakeProvider,
  gemini: geminiProvider,
  vertex: vertexProvider,
  "azure-openai": azureOpenAiProvider,
  bedrock: bedrockProvider,
}

export const providerFor = (kind: ProviderKind): Provider => PROVIDERS[kind]
