/**
 * The official clients bound to a test gateway's in-process `fetch` (docs/testing.md): no port,
 * no retries (a test sees the gateway's first answer). The SDKs are the application's own
 * dependencies: `openai`, `@anthropic-ai/sdk` and `@openrouter/sdk`.
 */
import Anthropic from "@anthropic-ai/sdk"
import { HTTPClient, OpenRouter } from "@openrouter/sdk"
import OpenAI from "openai"
import type { TestClient } from "./gateway.js"

/** The `openai` client on the gateway's /v1 (the management key unless `key`). */
export const openaiClient = (client: TestClient, key: string = client.adminKey): OpenAI =>
  new OpenAI({ apiKey: key, baseURL: `${client.baseUrl}/v1`, fetch: client.fetch, maxRetries: 0 })

/** The `@anthropic-ai/sdk` client (it adds /v1 itself). */
export const anthropicClient = (client: TestClient, key: string = client.adminKey): Anthropic =>
  new Anthropic({ apiKey: key, baseURL: client.baseUrl, fetch: client.fetch, maxRetries: 0 })

/** The `@openrouter/sdk` client. */
export const openRouterClient = (client: TestClient, key: string = client.adminKey): OpenRouter =>
  new OpenRouter({
    apiKey: key,
    serverURL: `${client.baseUrl}/v1`,
    httpClient: new HTTPClient({ fetcher: client.fetch }),
    retryConfig: { strategy: "none" },
  })
