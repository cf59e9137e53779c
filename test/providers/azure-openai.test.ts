/**
 * The azure-openai adapter against the fake Azure OpenAI (scripts/mock-clouds.ts): the
 * deployments path with api-version and the v1 paths (Responses included), the `api-key` header or
 * an Entra ID bearer token, the answers in OpenAI's formats, and errors.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockClouds, startMockClouds } from "../../scripts/mock-clouds"
import { azureOpenAiProvider, azureUrl } from "../../src/providers/azure-openai/adapter"
import type { NormalizedRequest, ProviderConfig, ProviderEvent } from "../../src/providers/types"
import { eventsOf, providerErrorOf, textRequest, usage, weatherTool } from "./helpers"

const KEY = "az-test-key-do-not-leak"
const TOKEN = "entra-test-token"
let clouds: MockClouds
beforeAll(async () => {
  clouds = await startMockClouds({ azureKey: KEY, azureToken: TOKEN })
})
afterAll(async () => {
  await clouds.stop()
})
beforeEach(() => clouds.reset())

const configOf = (overrides: Partial<ProviderConfig> = {}, headers: Record<string, string> = {}): ProviderConfig => ({
  id: "az",
  kind: "azure-openai",
  base_url: clouds.url,
  api_key_env: "AZ_KEY",
  headers,
  ...overrides,
})

const request = (overrides: Partial<NormalizedRequest> = {}) => textRequest("hello", { model: "my-gpt", ...overrides })
/** `apiKey` null: no key read (a default parameter would take undefined for the default). */
const open = (config: ProviderConfig, stream: boolean, apiKey: string | null = KEY, req = request()) =>
  azureOpenAiProvider.open(req, config, { stream, signal: new AbortController().signal, ...(apiKey === null ? {} : { apiKey }) })
const tok = (n: number): Array<ProviderEvent> => Array.from({ length: n }, () => ({ type: "text", delta: "tok " }))
const done = [usage(10, 5), { type: "finish", reason: "stop" }] as Array<ProviderEvent>

describe("azure-openai URLs", () => {
  const at = (overrides: Partial<ProviderConfig>, operation: string) => azureUrl({ id: "a", kind: "azure-openai", base_url: "https://r.openai.azure.com/", ...overrides }, "dep 1", operation)

  test("a dated api_version calls the deployment, named in the path", () => {
    expect(at({ api_version: "2024-10-21" }, "chat/completions")).toBe("https://r.openai.azure.com/openai/deployments/dep%201/chat/completions?api-version=2024-10-21")
    expect(at({ api_version: "2024-10-21" }, "embeddings")).toBe("https://r.openai.azure.com/openai/deployments/dep%201/embeddings?api-version=2024-10-21")
    expect(at({ api_version: "2025-04-01-preview" }, "responses")).toBe("https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview")
  })

  test("no api_version, v1 or preview: the v1 paths, which take no dated version", () => {
    expect(at({}, "chat/completions")).toBe("https://r.openai.azure.com/openai/v1/chat/completions")
    expect(at({ api_version: "v1" }, "responses")).toBe("https://r.openai.azure.com/openai/v1/responses")
    expect(at({ api_version: "preview" }, "responses")).toBe("https://r.openai.azure.com/openai/v1/responses?api-version=preview")
    // A base_url written down to /openai/v1 is the same resource.
    expect(at({ base_url: "https://r.openai.azure.com/openai/v1" }, "embeddings")).toBe("https://r.openai.azure.com/openai/v1/embeddings")
  })
})

describe("azure-openai calls", () => {
  test("deployments path: the api-key header, the api-version query, a JSON answer", async () => {
    expect(await eventsOf(await open(configOf({ api_version: "2024-10-21" }), false))).toEqual([{ type: "text", delta: "tok tok tok tok tok " }, ...done])
    const sent = clouds.requests[0]
    expect(sent?.path).toBe("/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21")
    expect(sent?.headers["api-key"]).toBe(KEY)
    expect(sent?.headers["authorization"]).toBeUndefined()
  })

  test("v1 chat completions: the deployment as the body's model, a streamed answer", async () => {
    expect(await eventsOf(await open(configOf(), true))).toEqual([...tok(5), ...done])
    expect(clouds.requests[0]?.path).toBe("/openai/v1/chat/completions")
    expect(clouds.requests[0]?.body).toMatchObject({ model: "my-gpt", stream: true })
  })

  test("v1 Responses (api: responses), JSON and streamed", async () => {
    const config = configOf({ api: "responses" })
    expect(await eventsOf(await open(config, false))).toEqual([{ type: "text", delta: "tok tok tok tok tok " }, ...done])
    expect(await eventsOf(await open(config, true))).toEqual([...tok(5), ...done])
    expect(clouds.requests.map((r) => r.path)).toEqual(["/openai/v1/responses", "/openai/v1/responses"])
    expect(clouds.requests[0]?.body).toMatchObject({ model: "my-gpt" })
  })

  test("an Entra ID token from bearer_token_env goes as a bearer, with no api-key", async () => {
    process.env["AZ_TEST_ENTRA_TOKEN"] = TOKEN
    try {
      const config = configOf({ api_key_env: undefined, bearer_token_env: "AZ_TEST_ENTRA_TOKEN" })
      expect(await eventsOf(await open(config, false, null))).toHaveLength(3)
      expect(clouds.requests[0]?.headers["authorization"]).toBe(`Bearer ${TOKEN}`)
      expect(clouds.requests[0]?.headers["api-key"]).toBeUndefined()
    } finally {
      delete process.env["AZ_TEST_ENTRA_TOKEN"]
    }
  })

  test("a streamed tool call, and the tool's result sent back as a tool message", async () => {
    const events = await eventsOf(await open(configOf({}, { "x-mock-scenario": "tool_call", "x-mock-tokens": "1" }), true, KEY, request({ tools: [weatherTool] })))
    expect(events).toEqual([
      { type: "tool_call_start", index: 0, callId: "call_mock_0", name: "get_weather" },
      { type: "tool_call_delta", index: 0, delta: '{"input":"tok "}' },
      usage(10, 1),
      { type: "finish", reason: "tool_calls" },
    ])
    const followUp = request({
      tools: [weatherTool],
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "Weather?" }] },
        { type: "function_call", callId: "call_mock_0", name: "get_weather", arguments: '{"input":"tok "}' },
        { type: "function_call_output", callId: "call_mock_0", output: "sunny" },
      ],
    })
    await eventsOf(await open(configOf(), false, KEY, followUp))
    expect((clouds.requests[1]?.body as { messages: Array<unknown> } | undefined)?.messages.slice(1)).toEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "call_mock_0", type: "function", function: { name: "get_weather", arguments: '{"input":"tok "}' } }] },
      { role: "tool", tool_call_id: "call_mock_0", content: "sunny" },
    ])
  })
})

describe("azure-openai errors", () => {
  test("a key Azure refuses (401) is an auth failure that does not show the key", async () => {
    const failure = await providerErrorOf(open(configOf(), false, "az-wrong-key"))
    expect(failure.kind).toBe("auth")
    expect(failure.message).not.toContain("az-wrong-key")
  })

  test("429 with its Retry-After, overloaded, bad request", async () => {
    const limited = await providerErrorOf(open(configOf({}, { "x-mock-error": "429" }), true))
    expect([limited.kind, limited.retryAfterSeconds]).toEqual(["rate_limited", 1])
    expect((await providerErrorOf(open(configOf({}, { "x-mock-error": "overloaded" }), false))).kind).toBe("overloaded")
    expect((await providerErrorOf(open(configOf({}, { "x-mock-error": "400" }), false))).kind).toBe("bad_request")
  })

  test("the variable of the credential is not set: an auth failure naming the setting, before any call", async () => {
    const failure = await providerErrorOf(open(configOf(), false, null))
    expect([failure.kind, failure.message]).toEqual(["auth", "azure-openai provider az: the variable named by api_key_env is not set"])
    const bearer = await providerErrorOf(open(configOf({ api_key_env: undefined, bearer_token_env: "AZ_TEST_UNSET" }), false, null))
    expect(bearer.message).toBe("azure-openai provider az: the variable named by bearer_token_env is not set")
    expect(clouds.requests).toHaveLength(0)
  })
})
