/** The provider kinds of the config file (`providers[].kind`), written once: each is one wire format (providers/index.ts). */
export const providerKinds = ["openai-chat", "openai-responses", "anthropic", "fake", "gemini", "vertex", "azure-openai", "bedrock"] as const
export type ProviderKind = (typeof providerKinds)[number]
