/**
 * The JSON config file (`GATEWAY_CONFIG`): the catalog of providers and models, and switches.
 * Decoded once at start; a bad file stops start-up with the file, the path inside it and the rule.
 */
import { Schema } from "effect"
import { Category, DefaultParameters, InputModality, OutputModality, Parameter } from "../domain/models.js"

const nonEmpty = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))
const nonNegative = Schema.Number.pipe(Schema.nonNegative({ message: () => "must be a number ≥ 0" }))
const positiveInt = Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" }))
const countryCode = Schema.String.pipe(Schema.pattern(/^[A-Z]{2}$/, { message: () => "must be an ISO 3166-1 alpha-2 country code, e.g. US" }))

export const ProviderKind = Schema.Literal("openai-chat", "openai-responses", "anthropic", "fake")

export const ProviderEntry = Schema.Struct({
  id: nonEmpty,
  kind: ProviderKind,
  base_url: Schema.optional(nonEmpty),
  api_key_env: Schema.optional(nonEmpty),
  timeout_ms: Schema.optional(positiveInt),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Spend through this provider is on the workspace's own key (BYOK). */
  byok: Schema.optional(Schema.Boolean),
  /** Open connections to this provider's origin at most (default 512); calls beyond wait in line. */
  max_connections: Schema.optional(positiveInt),
  /** For `GET /providers` and the endpoints listing: the display name (default: the id) and the provider's pages. */
  name: Schema.optional(nonEmpty),
  privacy_policy_url: Schema.optional(nonEmpty),
  terms_of_service_url: Schema.optional(nonEmpty),
  status_page_url: Schema.optional(nonEmpty),
  /** ISO 3166-1 alpha-2 country codes. */
  headquarters: Schema.optional(countryCode),
  datacenters: Schema.optional(Schema.Array(countryCode)),
})
export type ProviderEntry = typeof ProviderEntry.Type

/** USD per million tokens; `request` is USD per request. */
export const Pricing = Schema.Struct({
  prompt: nonNegative,
  completion: nonNegative,
  cached_prompt: Schema.optional(nonNegative),
  cache_write: Schema.optional(nonNegative),
  request: Schema.optional(nonNegative),
})
export type Pricing = typeof Pricing.Type

export const Capability = Schema.Literal("tools", "reasoning", "json_schema", "json_object", "images", "files")

export const EndpointEntry = Schema.Struct({
  provider: nonEmpty,
  upstream_model: nonEmpty,
  pricing: Pricing,
  max_output_tokens: Schema.optional(positiveInt),
  context_length: Schema.optional(positiveInt),
  supports: Schema.optional(Schema.Array(Capability)),
  /** Whether the endpoint may retain or train on prompts ("deny" requests exclude "allow" endpoints). */
  data_collection: Schema.optional(Schema.Literal("allow", "deny")),
  zdr: Schema.optional(Schema.Boolean),
  quantization: Schema.optional(Schema.String),
  /** For the listings: request parameters this endpoint honours (default: derived from `supports`). */
  supported_parameters: Schema.optional(Schema.Array(Parameter)),
  /** The most prompt tokens the endpoint takes, when it is less than its context. */
  max_prompt_tokens: Schema.optional(positiveInt),
  /** The provider moderates prompts on this endpoint (default false). */
  is_moderated: Schema.optional(Schema.Boolean),
  /** The provider caches prompts without cache_control (default false). */
  implicit_caching: Schema.optional(Schema.Boolean),
})
export type EndpointEntry = typeof EndpointEntry.Type

export const ModelEntry = Schema.Struct({
  id: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9._-]+\/[A-Za-z0-9._:-]+$/, { message: () => "must look like vendor/model" }),
  ),
  name: Schema.optional(Schema.String),
  context_length: positiveInt,
  /** The rest is what `GET /models` shows; absent keys are listed as null (or derived where noted in docs/reference.md). */
  description: Schema.optional(Schema.String),
  /** When the model was released, Unix seconds. */
  created: Schema.optional(Schema.Int.pipe(Schema.nonNegative({ message: () => "must be Unix seconds, an integer ≥ 0" }))),
  canonical_slug: Schema.optional(nonEmpty),
  hugging_face_id: Schema.optional(nonEmpty),
  knowledge_cutoff: Schema.optional(nonEmpty),
  expiration_date: Schema.optional(nonEmpty),
  categories: Schema.optional(Schema.Array(Category)),
  architecture: Schema.optional(
    Schema.Struct({
      modality: Schema.optional(nonEmpty),
      input_modalities: Schema.optional(Schema.NonEmptyArray(InputModality)),
      output_modalities: Schema.optional(Schema.NonEmptyArray(OutputModality)),
      tokenizer: Schema.optional(nonEmpty),
      instruct_type: Schema.optional(nonEmpty),
    }),
  ),
  default_parameters: Schema.optional(DefaultParameters),
  /** For the auto and pareto routers: 0-1 per task type (coding, math, writing, analysis, translation, chat, general); a missing one counts as 0.5. */
  scores: Schema.optional(
    Schema.Record({ key: Schema.String, value: Schema.Number.pipe(Schema.between(0, 1, { message: () => "must be a number from 0 to 1" })) }),
  ),
  endpoints: Schema.NonEmptyArray(EndpointEntry).annotations({ message: () => "needs at least one endpoint" }),
})
export type ModelEntry = typeof ModelEntry.Type

/** The moderation plugin's API: an OpenAI-compatible `POST {base_url}/moderations` of a configured provider. */
export const ModerationConfig = Schema.Struct({
  /** A provider id of `providers` (its base_url, api_key_env and headers are used). */
  provider: nonEmpty,
  model: nonEmpty,
  /** USD per moderation call (`request`) and per million input tokens estimated as characters ÷ 4 (`prompt`). */
  pricing: Schema.optional(Schema.Struct({ request: Schema.optional(nonNegative), prompt: Schema.optional(nonNegative) })),
  /** Run it on every request; a request's `enabled: false` cannot skip it. */
  enforce: Schema.optional(Schema.Boolean),
  /** The call's own timeout (default 5 s), within the request's deadline. */
  timeout_ms: Schema.optional(positiveInt),
})
export type ModerationConfig = typeof ModerationConfig.Type

/** A content check on requests: a match blocks the request with 403 before any spend. */
export const GuardrailEntry = Schema.Struct({
  id: nonEmpty,
  name: nonEmpty,
  /** Regular expressions (case-insensitive) matched against the request's text. */
  patterns: Schema.NonEmptyArray(nonEmpty).annotations({ message: () => "needs at least one pattern" }),
  /** Only these workspaces; all when absent. */
  workspace_ids: Schema.optional(Schema.Array(Schema.String)),
})
export type GuardrailEntry = typeof GuardrailEntry.Type

export const ConfigFile = Schema.Struct({
  providers: Schema.Array(ProviderEntry),
  models: Schema.Array(ModelEntry),
  credits: Schema.optional(Schema.Struct({ enforce: Schema.Boolean })),
  /** What a request's reservation assumes for input the gateway cannot count (images, files). */
  money: Schema.optional(
    Schema.Struct({
      max_tokens_per_image: Schema.optional(positiveInt),
      max_tokens_per_file: Schema.optional(positiveInt),
    }),
  ),
  guardrails: Schema.optional(Schema.Array(GuardrailEntry)),
  /** Plugin settings by id (`_` for `-`). */
  plugins: Schema.optional(
    Schema.Struct({
      moderation: Schema.optional(ModerationConfig),
    }),
  ),
  server: Schema.optional(
    Schema.Struct({
      max_body_bytes: Schema.optional(positiveInt),
      request_timeout_ms: Schema.optional(positiveInt),
      /** A stream whose client has read nothing for this long is cut (default 60 s). */
      stall_timeout_ms: Schema.optional(positiveInt),
      /** Seconds a connection may stay silent (0: never closed for silence). */
      idle_timeout_s: Schema.optional(Schema.Int.pipe(Schema.between(0, 255, { message: () => "must be an integer from 0 to 255" }))),
      body_timeout_ms: Schema.optional(positiveInt),
      max_in_flight: Schema.optional(positiveInt),
      max_in_flight_per_ip: Schema.optional(positiveInt),
      max_upstream_body_bytes: Schema.optional(positiveInt),
      max_upstream_event_bytes: Schema.optional(positiveInt),
    }),
  ),
  ledger: Schema.optional(
    Schema.Struct({
      /** An answer's last byte waits until its generation record is committed (no loss on a process crash). */
      durable_answers: Schema.optional(Schema.Boolean),
      /** How long a hold stays valid without its process renewing it (renewed every third of it). */
      hold_lease_ms: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(300, { message: () => "must be an integer ≥ 300" }))),
    }),
  ),
  /** This process's name among those sharing a database (holds are owned by it); default the host name. */
  instance_id: Schema.optional(nonEmpty),
})
export type ConfigFile = typeof ConfigFile.Type

/** Cross-references a Schema cannot see: endpoints name known providers, ids are unique. */
export const checkReferences = (file: ConfigFile): string | undefined => {
  const providers = new Set<string>()
  for (const [i, p] of file.providers.entries()) {
    if (providers.has(p.id)) return `providers[${i}].id: duplicate provider id "${p.id}"`
    if (p.kind !== "fake" && p.base_url === undefined) return `providers[${i}].base_url: is required for kind "${p.kind}"`
    providers.add(p.id)
  }
  for (const [i, g] of (file.guardrails ?? []).entries()) {
    for (const [j, pattern] of g.patterns.entries()) {
      try {
        new RegExp(pattern, "i")
      } catch (e) {
        return `guardrails[${i}].patterns[${j}]: not a valid regular expression (${(e as Error).message})`
      }
    }
  }
  const models = new Set<string>()
  for (const [i, m] of file.models.entries()) {
    if (models.has(m.id)) return `models[${i}].id: duplicate model id "${m.id}"`
    models.add(m.id)
    for (const [j, e] of m.endpoints.entries()) {
      if (!providers.has(e.provider)) return `models[${i}].endpoints[${j}].provider: unknown provider "${e.provider}"`
    }
  }
  const moderation = file.plugins?.moderation
  if (moderation !== undefined) {
    const provider = file.providers.find((p) => p.id === moderation.provider)
    if (provider === undefined) return `plugins.moderation.provider: unknown provider "${moderation.provider}"`
    if (provider.base_url === undefined) return `plugins.moderation.provider: provider "${moderation.provider}" has no base_url`
  }
  return undefined
}
