/** Each provider kind's settings: what it cannot do without, and what only another kind takes, named at start. */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parseConfigFile } from "../../src/config/Config.js"

const endpoint = { provider: "p", upstream_model: "m", pricing: { prompt: 1, completion: 1 } }
const fileWith = (provider: Record<string, unknown>, endpointExtra: Record<string, unknown> = {}) => ({
  providers: [{ id: "f", kind: "fake" }, { id: "q", kind: "fake" }, { id: "p", ...provider }],
  models: [{ id: "a/b", context_length: 10, endpoints: [{ ...endpoint, ...endpointExtra }] }],
})

const refusal = (file: unknown): string | undefined => {
  const parsed = parseConfigFile("conf.json", JSON.stringify(file))
  return Either.isLeft(parsed) ? parsed.left.message : undefined
}

describe("provider settings per kind", () => {
  const refused: Array<[string, Record<string, unknown>, string]> = [
    ["vertex without project", { kind: "vertex", location: "global" }, 'providers[2].project: is required for kind "vertex"'],
    ["vertex without location", { kind: "vertex", project: "proj" }, 'providers[2].location: is required for kind "vertex"'],
    ["gemini without its key variable", { kind: "gemini" }, 'providers[2].api_key_env: is required for kind "gemini"'],
    ["azure-openai without base_url", { kind: "azure-openai", api_key_env: "K" }, 'providers[2].base_url: is required for kind "azure-openai"'],
    ["azure-openai without any credential", { kind: "azure-openai", base_url: "https://r.openai.azure.com" }, 'providers[2].api_key_env: is required for kind "azure-openai" (or bearer_token_env)'],
    [
      "azure-openai with both credentials",
      { kind: "azure-openai", base_url: "https://r.openai.azure.com", api_key_env: "K", bearer_token_env: "T" },
      "providers[2].bearer_token_env: set api_key_env or bearer_token_env, not both",
    ],
    ["openai-chat without base_url (no default kept)", { kind: "openai-chat" }, 'providers[2].base_url: is required for kind "openai-chat"'],
    ["a vertex setting on another kind", { kind: "openai-chat", base_url: "http://x", project: "p" }, 'providers[2].project: only applies to kind "vertex"'],
    ["a header name that is no HTTP token", { kind: "openai-chat", base_url: "http://x", headers: { "X Team": "a" } }, "providers[2].headers.X Team: is not a valid header name"],
    ["a header value with a line break", { kind: "openai-chat", base_url: "http://x", headers: { "x-team": "research\n" } }, "providers[2].headers.x-team: must not contain CR, LF or NUL"],
    ["an azure setting on another kind", { kind: "gemini", api_key_env: "K", api_version: "2024-10-21" }, 'providers[2].api_version: only applies to kind "azure-openai"'],
    ["vertex with an API key", { kind: "vertex", project: "p", location: "global", api_key_env: "K" }, 'providers[2].api_key_env: kind "vertex" takes a service account (credentials_file), not a key'],
    ["a token_url that is not a URL", { kind: "vertex", project: "p", location: "global", token_url: "oauth2" }, "providers[2].token_url: must be an http(s) URL"],
    ["a location with a slash", { kind: "vertex", project: "p", location: "us/central1" }, 'providers[2].location: must be "global" or a region such as us-central1'],
    ["an azure api that does not exist", { kind: "azure-openai", base_url: "https://r", api_key_env: "K", api: "completions" }, "providers[2].api"],
  ]
  for (const [what, provider, message] of refused) {
    test(`refused: ${what}`, () => {
      expect(refusal(fileWith(provider))).toContain(`conf.json: ${message}`)
    })
  }

  test("gemini and vertex need no base_url (they have default hosts); each kind's full settings load", () => {
    expect(refusal(fileWith({ kind: "gemini", api_key_env: "GEMINI_API_KEY" }))).toBeUndefined()
    expect(refusal(fileWith({ kind: "vertex", project: "p", location: "us-central1", credentials_file: "/k.json", token_url: "http://127.0.0.1:1/token" }))).toBeUndefined()
    expect(refusal(fileWith({ kind: "azure-openai", base_url: "https://r.openai.azure.com", api_version: "2024-10-21", bearer_token_env: "T", api: "responses" }))).toBeUndefined()
  })

  test("an endpoint's publisher applies to vertex providers only", () => {
    expect(refusal(fileWith({ kind: "vertex", project: "p", location: "global" }, { publisher: "anthropic" }))).toBeUndefined()
    expect(refusal(fileWith({ kind: "gemini", api_key_env: "K" }, { publisher: "anthropic" }))).toBe(
      'conf.json: models[0].endpoints[0].publisher: only applies to providers of kind "vertex"',
    )
  })
})
