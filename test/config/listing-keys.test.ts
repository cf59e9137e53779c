/**
 * The config keys the models and providers listings read: all optional, checked like every other
 * key (a bad value names the path and the rule, an unknown key stays refused).
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parseConfigFile } from "../../src/config/Config.js"

const provider = { id: "p", kind: "fake" }
const endpoint = { provider: "p", upstream_model: "m", pricing: { prompt: 1, completion: 1 } }
const model = { id: "a/b", context_length: 10, endpoints: [endpoint] }

const refusal = (file: unknown) => {
  const parsed = parseConfigFile("conf.json", JSON.stringify(file))
  return Either.isLeft(parsed) ? parsed.left.message : undefined
}

const withProvider = (extra: Record<string, unknown>) => ({ providers: [{ ...provider, ...extra }], models: [model] })
const withModel = (extra: Record<string, unknown>) => ({ providers: [provider], models: [{ ...model, ...extra }] })
const withEndpoint = (extra: Record<string, unknown>) => withModel({ endpoints: [{ ...endpoint, ...extra }] })

describe("the listing keys of the config file", () => {
  test("every one loads", () => {
    const file = {
      providers: [
        {
          ...provider,
          name: "P Cloud",
          privacy_policy_url: "https://p.example/privacy",
          terms_of_service_url: "https://p.example/terms",
          status_page_url: "https://status.p.example",
          headquarters: "US",
          datacenters: ["US", "IE"],
        },
      ],
      models: [
        {
          ...model,
          description: "A model",
          created: 1_767_225_600,
          canonical_slug: "a/b-2026",
          hugging_face_id: "a/b",
          knowledge_cutoff: "2025-01",
          expiration_date: "2027-01-01",
          categories: ["programming", "marketing/seo"],
          architecture: { modality: "text->text", input_modalities: ["text"], output_modalities: ["text"], tokenizer: "Llama3", instruct_type: "llama3" },
          default_parameters: { temperature: 0.6, top_p: 0.95, top_k: 40, repetition_penalty: 1.1 },
          endpoints: [{ ...endpoint, supported_parameters: ["temperature", "seed"], max_prompt_tokens: 5, is_moderated: true, implicit_caching: true }],
        },
      ],
    }
    expect(refusal(file)).toBeUndefined()
  })

  const cases: Array<[string, unknown, string]> = [
    ["a country code", withProvider({ headquarters: "usa" }), "providers[0].headquarters: must be an ISO 3166-1 alpha-2 country code, e.g. US"],
    ["a datacenter", withProvider({ datacenters: ["US", "de"] }), "providers[0].datacenters[1]: must be an ISO 3166-1 alpha-2 country code, e.g. US"],
    ["created", withModel({ created: -1 }), "models[0].created: must be Unix seconds, an integer ≥ 0"],
    ["a category", withModel({ categories: ["cooking"] }), "models[0].categories[0]: "],
    ["an input modality", withModel({ architecture: { input_modalities: ["smell"] } }), "models[0].architecture.input_modalities[0]: "],
    ["an architecture key", withModel({ architecture: { tokeniser: "GPT" } }), "models[0].architecture.tokeniser: unknown key"],
    ["a default parameter", withModel({ default_parameters: { temp: 1 } }), "models[0].default_parameters.temp: unknown key"],
    ["a supported parameter", withEndpoint({ supported_parameters: ["telepathy"] }), "models[0].endpoints[0].supported_parameters[0]: "],
    ["max_prompt_tokens", withEndpoint({ max_prompt_tokens: 0 }), "models[0].endpoints[0].max_prompt_tokens: must be a positive integer"],
  ]
  for (const [what, file, message] of cases) {
    test(`a bad ${what} is refused with its path and rule`, () => {
      expect(refusal(file)).toStartWith(`conf.json: ${message}`)
    })
  }
})
