/**
 * Models, their endpoints, prices and capabilities, from the config file. Built once at
 * start into lookup maps (no work at request time that could be done here).
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "../config/Config.js"
import type { EndpointEntry, ModelEntry, ProviderEntry } from "../config/file.js"
import type { Pricing } from "../domain/pricing.js"
import type { ProviderConfig } from "../providers/types.js"

export interface Endpoint {
  /** `provider-id/upstream-model`, unique per model. */
  readonly id: string
  readonly modelId: string
  readonly provider: ProviderConfig
  readonly upstreamModel: string
  readonly pricing: Pricing
  readonly maxOutputTokens: number | undefined
  readonly contextLength: number
  readonly supports: ReadonlySet<string>
  readonly dataCollection: "allow" | "deny"
  readonly zdr: boolean
  readonly quantization: string | undefined
  readonly isByok: boolean
  /** The upstream API key, read from `api_key_env` at start. */
  readonly apiKey: string | undefined
  /** The endpoint as the config file wrote it (the listings read its optional keys). */
  readonly entry: EndpointEntry
}

/** What a catalog model serves: the model requests (chat), POST /v1/embeddings or POST /v1/rerank. */
export type ModelKind = "chat" | "embedding" | "rerank"

export interface Model {
  readonly id: string
  readonly kind: ModelKind
  readonly name: string
  readonly contextLength: number
  readonly endpoints: ReadonlyArray<Endpoint>
  /** The model as the config file wrote it (the listings read its optional keys). */
  readonly entry: ModelEntry
}

export interface CatalogShape {
  readonly model: (id: string) => Model | undefined
  readonly models: ReadonlyArray<Model>
  readonly providers: ReadonlyArray<ProviderEntry>
}

/**
 * A vertex provider's config for endpoints of another publisher: the entry with `publisher` set,
 * one object per provider, made here so the adapter reads it off the config it is given.
 */
const publisherConfigs = new WeakMap<ProviderEntry, ProviderConfig>()
const providerConfigOf = (provider: ProviderEntry, entry: EndpointEntry): ProviderConfig => {
  if (entry.publisher === undefined || entry.publisher === "google") return provider
  let config = publisherConfigs.get(provider)
  if (config === undefined) {
    config = { ...provider, publisher: entry.publisher }
    publisherConfigs.set(provider, config)
  }
  return config
}

const endpointOf = (model: ModelEntry, entry: EndpointEntry, provider: ProviderEntry): Endpoint => ({
  id: `${provider.id}/${entry.upstream_model}`,
  modelId: model.id,
  provider: providerConfigOf(provider, entry),
  upstreamModel: entry.upstream_model,
  pricing: entry.pricing,
  maxOutputTokens: entry.max_output_tokens,
  contextLength: entry.context_length ?? model.context_length,
  supports: new Set(entry.supports ?? []),
  dataCollection: entry.data_collection ?? "deny",
  zdr: entry.zdr ?? false,
  quantization: entry.quantization,
  isByok: provider.byok ?? false,
  apiKey: provider.api_key_env === undefined ? undefined : process.env[provider.api_key_env],
  entry,
})

export const buildCatalog = (providers: ReadonlyArray<ProviderEntry>, models: ReadonlyArray<ModelEntry>): CatalogShape => {
  const byProvider = new Map(providers.map((p) => [p.id, p]))
  const list: Array<Model> = models.map((m) => ({
    id: m.id,
    kind: m.kind ?? "chat",
    name: m.name ?? m.id,
    contextLength: m.context_length,
    endpoints: m.endpoints.map((e) => endpointOf(m, e, byProvider.get(e.provider)!)),
    entry: m,
  }))
  const byId = new Map(list.map((m) => [m.id, m]))
  return { model: (id) => byId.get(id), models: list, providers }
}

/** Providers whose `api_key_env` names a variable that is not set (or empty): their calls go without a key. */
export const providersWithoutKey = (providers: ReadonlyArray<ProviderEntry>, env: Record<string, string | undefined> = process.env) =>
  providers.filter((p) => p.api_key_env !== undefined && (env[p.api_key_env] ?? "") === "")

export class Catalog extends Context.Tag("Catalog")<Catalog, CatalogShape>() {
  static readonly Live = Layer.effect(
    Catalog,
    Effect.gen(function* () {
      const config = yield* GatewayConfig
      // Said at start, naming the provider and the variable: the upstream's refusal is a generic 502 to callers.
      for (const p of providersWithoutKey(config.catalog.providers)) {
        yield* Effect.logWarning(`provider ${p.id}: its api_key_env variable ${p.api_key_env} is not set; its calls go without a key and fail (502) until it is`)
      }
      return buildCatalog(config.catalog.providers, config.catalog.models)
    }),
  )
}
