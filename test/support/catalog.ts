/** The demo catalog plus models of the given ids (served by the fake provider): tests that store model ids need them in the catalog. */
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile, EndpointEntry, ModelEntry, ProviderEntry } from "../../src/config/file.js"

export const demoCatalogWith = (ids: ReadonlyArray<string>): ConfigFile => ({
  ...demoCatalog,
  models: [
    ...demoCatalog.models,
    ...ids.map((id): ConfigFile["models"][number] => ({
      id,
      context_length: 100_000,
      endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 1, completion: 1 } }],
    })),
  ],
})

/** The demo catalog plus test/penny: every request costs (and holds, whatever its tokens) exactly $0.01. */
export const pennyCatalog: ConfigFile = {
  ...demoCatalog,
  models: [
    ...demoCatalog.models,
    {
      id: "test/penny",
      context_length: 100_000,
      endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0, completion: 0, request: 0.01 } }],
    },
  ],
}

/** The wire formats the gateway speaks upstream, and the answers scripts/mock-upstream.ts scripts by `x-mock-scenario`. */
export const UPSTREAM_FORMATS = ["openai-chat", "openai-responses", "anthropic"] as const
export const MOCK_SCENARIOS = ["text", "tool_call", "reasoning"] as const
export type MockScenario = (typeof MOCK_SCENARIOS)[number]

/** What every model of `mockScenarioCatalog` costs, in USD per million tokens. */
export const MOCK_PRICE = { prompt: 3, completion: 15 }

/** The key the mock's providers send upstream, from the environment as a real provider's is. */
export const MOCK_UPSTREAM_KEY_ENV = "MOCK_UPSTREAM_KEY"

/**
 * The demo catalog plus `mock/<format>-<scenario>` for every upstream format and scenario, on the
 * mock upstream at `url` (provider `<format>-<scenario>`, upstream model `upstream-<format>`,
 * priced `MOCK_PRICE`); `extra` adds a test's own providers and models.
 */
export const mockScenarioCatalog = (
  url: string,
  extra: { readonly providers?: ConfigFile["providers"]; readonly models?: ConfigFile["models"] } = {},
): ConfigFile => {
  const pairs = UPSTREAM_FORMATS.flatMap((kind) => MOCK_SCENARIOS.map((scenario) => ({ kind, scenario, id: `${kind}-${scenario}` })))
  return {
    ...demoCatalog,
    providers: [
      ...demoCatalog.providers,
      ...pairs.map(({ kind, scenario, id }) => ({ id, kind, base_url: url, api_key_env: MOCK_UPSTREAM_KEY_ENV, headers: { "x-mock-scenario": scenario } })),
      ...(extra.providers ?? []),
    ],
    models: [
      ...demoCatalog.models,
      ...pairs.map(({ kind, id }) => ({
        id: `mock/${id}`,
        context_length: 100_000,
        endpoints: [{ provider: id, upstream_model: `upstream-${kind}`, pricing: MOCK_PRICE }] as const,
      })),
      ...(extra.models ?? []),
    ],
  }
}

/** Providers of kind `fake` (src/providers/fake), one of each id. */
export const fakeProviders = (...ids: ReadonlyArray<string>): Array<ProviderEntry> => ids.map((id) => ({ id, kind: "fake" }))

/** An endpoint of `provider` serving `echo` at $1 per million tokens in and out, unless `extra` says otherwise. */
export const endpointOf = (provider: string, extra: Partial<Omit<EndpointEntry, "provider">> = {}): EndpointEntry => ({
  provider,
  upstream_model: "echo",
  pricing: { prompt: 1, completion: 1 },
  ...extra,
})

/** A chat model of 100,000 tokens' context served by `endpoints`. */
export const modelOf = (id: string, first: EndpointEntry, ...rest: ReadonlyArray<EndpointEntry>): ModelEntry => ({
  id,
  context_length: 100_000,
  endpoints: [first, ...rest],
})
