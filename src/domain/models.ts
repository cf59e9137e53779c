/**
 * The models, endpoints and providers listings as the official SDK of this API family reads them
 * (`@openrouter/sdk` `models.list`, `models.count`, `models.get`, `endpoints.list`,
 * `providers.list`): wire Schemas, query parameters, and the vocabularies the config shares.
 */
import { Schema } from "effect"

/** Request parameters a model may list in `supported_parameters` (the SDK's `Parameter`). */
export const PARAMETERS = [
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "top_a",
  "frequency_penalty",
  "presence_penalty",
  "repetition_penalty",
  "max_tokens",
  "max_completion_tokens",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  "prediction",
  "seed",
  "response_format",
  "structured_outputs",
  "stop",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "include_reasoning",
  "reasoning",
  "reasoning_effort",
  "web_search_options",
  "verbosity",
] as const
export const Parameter = Schema.Literal(...PARAMETERS)
export type Parameter = typeof Parameter.Type

export const INPUT_MODALITIES = ["text", "image", "file", "audio", "video"] as const
export const InputModality = Schema.Literal(...INPUT_MODALITIES)
export type InputModality = typeof InputModality.Type

export const OUTPUT_MODALITIES = ["text", "image", "embeddings", "audio", "video", "rerank", "decisions", "speech", "transcription"] as const
export const OutputModality = Schema.Literal(...OUTPUT_MODALITIES)
export type OutputModality = typeof OutputModality.Type

/** Use-case categories of `GET /models?category=` (the SDK's `GetModelsCategory`). */
export const CATEGORIES = [
  "programming",
  "roleplay",
  "marketing",
  "marketing/seo",
  "technology",
  "science",
  "translation",
  "legal",
  "finance",
  "health",
  "trivia",
  "academia",
] as const
export const Category = Schema.Literal(...CATEGORIES)
export type Category = typeof Category.Type

/** Sampling defaults a model lists (`default_parameters`). */
export const DefaultParameters = Schema.Struct({
  temperature: Schema.optional(Schema.NullOr(Schema.Number)),
  top_p: Schema.optional(Schema.NullOr(Schema.Number)),
  top_k: Schema.optional(Schema.NullOr(Schema.Int)),
  frequency_penalty: Schema.optional(Schema.NullOr(Schema.Number)),
  presence_penalty: Schema.optional(Schema.NullOr(Schema.Number)),
  repetition_penalty: Schema.optional(Schema.NullOr(Schema.Number)),
})

// ---- Wire shapes ----

/** USD per token (per request for `request`), as decimal strings. */
export const PricingData = Schema.Struct({
  prompt: Schema.String,
  completion: Schema.String,
  request: Schema.optional(Schema.String),
  internal_reasoning: Schema.optional(Schema.String),
  input_cache_read: Schema.optional(Schema.String),
  input_cache_write: Schema.optional(Schema.String),
})
export type PricingData = typeof PricingData.Type

export const ModelArchitecture = Schema.Struct({
  modality: Schema.String,
  input_modalities: Schema.Array(Schema.String),
  output_modalities: Schema.Array(Schema.String),
  /** Absent when the catalog does not say (the SDK reads a string or nothing on /models). */
  tokenizer: Schema.optional(Schema.String),
  instruct_type: Schema.NullOr(Schema.String),
})

/** A model id's vendor part (`demo` of `demo/echo`): the config requires `vendor/model`. */
export const vendorOf = (id: string): string => id.slice(0, id.indexOf("/"))

/** A model of the listings as the services build it; on the wire it is `ModelData`. */
const ModelFields = Schema.Struct({
  id: Schema.String,
  canonical_slug: Schema.String,
  name: Schema.String,
  created: Schema.Int,
  description: Schema.String,
  context_length: Schema.Int,
  architecture: ModelArchitecture,
  pricing: PricingData,
  top_provider: Schema.Struct({
    context_length: Schema.Int,
    max_completion_tokens: Schema.NullOr(Schema.Int),
    is_moderated: Schema.Boolean,
  }),
  per_request_limits: Schema.Null,
  supported_parameters: Schema.Array(Schema.String),
  default_parameters: Schema.NullOr(DefaultParameters),
  supported_voices: Schema.Null,
  hugging_face_id: Schema.NullOr(Schema.String),
  knowledge_cutoff: Schema.NullOr(Schema.String),
  expiration_date: Schema.NullOr(Schema.String),
  links: Schema.Struct({ details: Schema.String }),
})

/**
 * A model of the listings (`GET /models`, `/models/user`, `/embeddings/models`,
 * `/model/{author}/{slug}`), with the two keys the `openai` SDK's `models.list` reads, as its
 * `models.retrieve` does: `object: "model"` and `owned_by` (the id's vendor part). Derived from the
 * id when encoded; the official SDK ignores them.
 */
export const ModelData = Schema.transform(
  Schema.Struct({ ...ModelFields.fields, object: Schema.Literal("model"), owned_by: Schema.String }),
  ModelFields,
  {
    strict: true,
    decode: ({ object: _, owned_by: __, ...model }) => model,
    encode: (model) => ({ ...model, object: "model" as const, owned_by: vendorOf(model.id) }),
  },
)
export type ModelData = typeof ModelData.Type

export const ModelList = Schema.Struct({
  data: Schema.Array(ModelData),
  total_count: Schema.Int,
  links: Schema.Struct({ next: Schema.NullOr(Schema.String) }),
})

export const ModelOne = Schema.Struct({ data: ModelData })

export const ModelCount = Schema.Struct({ data: Schema.Struct({ count: Schema.Int }) })

export const PercentileData = Schema.Struct({ p50: Schema.Number, p75: Schema.Number, p90: Schema.Number, p99: Schema.Number })

export const EndpointData = Schema.Struct({
  name: Schema.String,
  model_id: Schema.String,
  model_name: Schema.String,
  provider_name: Schema.String,
  /** What `provider.order` / `only` / `ignore` take to name this endpoint's provider. */
  tag: Schema.String,
  context_length: Schema.Int,
  max_completion_tokens: Schema.NullOr(Schema.Int),
  max_prompt_tokens: Schema.NullOr(Schema.Int),
  pricing: PricingData,
  quantization: Schema.NullOr(Schema.String),
  supported_parameters: Schema.Array(Schema.String),
  supports_implicit_caching: Schema.Boolean,
  supports_tool_choice: Schema.Struct({ auto: Schema.Boolean, none: Schema.Boolean, required: Schema.Boolean, function: Schema.Boolean }),
  supports_voice_cloning: Schema.Boolean,
  /** 0 answering, -1 failing (below the cooldown threshold), -2 cooling down (tried last). */
  status: Schema.Literal(0, -1, -2),
  uptime_last_5m: Schema.NullOr(Schema.Number),
  uptime_last_30m: Schema.NullOr(Schema.Number),
  uptime_last_1d: Schema.NullOr(Schema.Number),
  latency_last_30m: Schema.NullOr(PercentileData),
  throughput_last_30m: Schema.NullOr(PercentileData),
})
export type EndpointData = typeof EndpointData.Type

export const EndpointList = Schema.Struct({
  data: Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    created: Schema.Int,
    description: Schema.String,
    architecture: Schema.Struct({
      modality: Schema.String,
      input_modalities: Schema.Array(Schema.String),
      output_modalities: Schema.Array(Schema.String),
      tokenizer: Schema.NullOr(Schema.String),
      instruct_type: Schema.NullOr(Schema.String),
    }),
    endpoints: Schema.Array(EndpointData),
  }),
})

export const ProviderData = Schema.Struct({
  name: Schema.String,
  slug: Schema.String,
  privacy_policy_url: Schema.NullOr(Schema.String),
  terms_of_service_url: Schema.NullOr(Schema.String),
  status_page_url: Schema.NullOr(Schema.String),
  headquarters: Schema.NullOr(Schema.String),
  datacenters: Schema.NullOr(Schema.Array(Schema.String)),
})

export const ProviderList = Schema.Struct({ data: Schema.Array(ProviderData) })

export const ModelPath = Schema.Struct({ author: Schema.String, slug: Schema.String })

/** `GET /models/{id}` as the `openai` SDK's `models.retrieve` reads it. */
export const OpenAIModel = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("model"),
  /** Release time, Unix seconds (0 when the catalog does not say). */
  created: Schema.Int,
  /** The id's vendor part. */
  owned_by: Schema.String,
})

/** `GET /models/{id}` with `anthropic-version`, as the Anthropic SDK's `models.retrieve` reads it (`ModelInfo`). */
export const AnthropicModelInfo = Schema.Struct({
  type: Schema.Literal("model"),
  id: Schema.String,
  display_name: Schema.String,
  /** RFC 3339; the epoch when the release date is unknown, as Anthropic's API does. */
  created_at: Schema.String,
  /** Anthropic's per-feature capability object: the catalog does not record it. */
  capabilities: Schema.Null,
  lifecycle: Schema.Literal("active"),
  line: Schema.Null,
  deprecated_at: Schema.Null,
  retires_at: Schema.NullOr(Schema.String),
  max_input_tokens: Schema.NullOr(Schema.Int),
  max_tokens: Schema.NullOr(Schema.Int),
})

// ---- Query parameters ----

const MAX_LIMIT = 1000

/** A decimal integer in a query string, checked before it becomes a number. */
const integerParam = (min: number, max: number) => {
  const message = () => (max === Number.MAX_SAFE_INTEGER ? `must be an integer of at least ${min}` : `must be an integer from ${min} to ${max}`)
  return Schema.String.pipe(
    Schema.pattern(/^-?\d{1,15}$/, { message }),
    Schema.compose(Schema.NumberFromString),
    Schema.between(min, max, { message }),
  )
}

/** USD per million tokens, at least 0. */
const priceParam = Schema.String.pipe(
  Schema.pattern(/^\d{1,12}(\.\d{1,12})?$/, { message: () => "must be a number of USD per million tokens, at least 0" }),
  Schema.compose(Schema.NumberFromString),
)

/** A comma-separated list whose every item is one of `values`. */
const listOf = <const V extends ReadonlyArray<string>>(values: V, extra: ReadonlyArray<string> = []) => {
  const allowed = new Set<string>([...values, ...extra])
  const all = [...values, ...extra].join(", ")
  return Schema.String.pipe(
    Schema.filter((s) => {
      const bad = s.split(",").find((item) => !allowed.has(item.trim()))
      return bad === undefined ? true : `${JSON.stringify(bad.trim())} is not one of ${all}`
    }),
  )
}

/** Parameters the gateway cannot honour: its catalog has no such data. Refused with 400, never ignored. */
export const UNAVAILABLE_MODEL_FILTERS: Readonly<Record<string, string>> = {
  region: "the catalog does not record data regions",
  min_tool_success_rate: "the gateway does not measure tool-call success",
  max_tool_success_rate: "the gateway does not measure tool-call success",
}

/**
 * The benchmark sorts and index filters, each read from one key of a model's config `scores`
 * (0 to 1; an index is the score × 100, as the benchmark indices run 0 to 100). A model without
 * that key is listed last by the sort and left out by the filters (docs/models.md).
 */
export const BENCHMARK_SCORES = {
  intelligence: "intelligence",
  coding: "coding",
  agentic: "agentic",
  "design-arena-elo": "design_arena",
} as const

export const MODEL_SORTS = [
  "newest",
  "pricing-low-to-high",
  "pricing-high-to-low",
  "context-high-to-low",
  "throughput-high-to-low",
  "latency-low-to-high",
  "most-popular",
  "top-weekly",
  "intelligence-high-to-low",
  "coding-high-to-low",
  "agentic-high-to-low",
  "design-arena-elo-high-to-low",
] as const
export type ModelSort = (typeof MODEL_SORTS)[number]

/** The sorts that read the ledger's usage rollup (src/services/ModelUsage.ts). */
export const USAGE_SORTS: ReadonlySet<string> = new Set<ModelSort>(["most-popular", "top-weekly"])

/** A benchmark index, 0 to 100. */
const indexParam = Schema.String.pipe(
  Schema.pattern(/^\d{1,3}(\.\d{1,12})?$/, { message: () => "must be a number from 0 to 100 (a config score × 100)" }),
  Schema.compose(Schema.NumberFromString),
  Schema.between(0, 100, { message: () => "must be a number from 0 to 100 (a config score × 100)" }),
)

const outputModalities = listOf(OUTPUT_MODALITIES, ["all"])

/** Decoded as text so the handler refuses them by name (UNAVAILABLE_MODEL_FILTERS). */
const unavailable = Schema.optional(Schema.String)

/** `GET /models`: every query parameter of the SDK's `models.list`; any other is refused. */
export const ListModelsParams = Schema.Struct({
  offset: Schema.optional(integerParam(0, Number.MAX_SAFE_INTEGER)),
  limit: Schema.optional(integerParam(1, MAX_LIMIT)),
  category: Schema.optional(Category),
  supported_parameters: Schema.optional(listOf(PARAMETERS)),
  output_modalities: Schema.optional(outputModalities),
  input_modalities: Schema.optional(listOf(INPUT_MODALITIES)),
  sort: Schema.optional(Schema.String),
  q: Schema.optional(Schema.String),
  context: Schema.optional(integerParam(0, Number.MAX_SAFE_INTEGER)),
  min_price: Schema.optional(priceParam),
  max_price: Schema.optional(priceParam),
  min_output_price: Schema.optional(priceParam),
  max_output_price: Schema.optional(priceParam),
  arch: Schema.optional(Schema.String),
  model_authors: Schema.optional(Schema.String),
  providers: Schema.optional(Schema.String),
  zdr: Schema.optional(Schema.Literal("true")),
  min_age_days: Schema.optional(integerParam(0, Number.MAX_SAFE_INTEGER)),
  max_age_days: Schema.optional(integerParam(0, Number.MAX_SAFE_INTEGER)),
  distillable: Schema.optional(Schema.Literal("true", "false")),
  region: unavailable,
  min_intelligence_index: Schema.optional(indexParam),
  max_intelligence_index: Schema.optional(indexParam),
  min_coding_index: Schema.optional(indexParam),
  max_coding_index: Schema.optional(indexParam),
  min_agentic_index: Schema.optional(indexParam),
  max_agentic_index: Schema.optional(indexParam),
  min_tool_success_rate: unavailable,
  max_tool_success_rate: unavailable,
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type ListModelsParams = typeof ListModelsParams.Type

/** `GET /models/user`: the SDK's `models.listForUser` sends a page and `output_modalities`. */
export const UserModelsParams = Schema.Struct({
  offset: Schema.optional(integerParam(0, Number.MAX_SAFE_INTEGER)),
  limit: Schema.optional(integerParam(1, MAX_LIMIT)),
  output_modalities: Schema.optional(outputModalities),
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type UserModelsParams = typeof UserModelsParams.Type

/**
 * `GET /models` with `anthropic-version`: the query of the Anthropic SDK's `models.list`. A page
 * of `limit` models after `after_id` or just before `before_id` (model ids); any other parameter is refused.
 */
export const AnthropicModelsParams = Schema.Struct({
  limit: Schema.optional(integerParam(1, MAX_LIMIT)),
  after_id: Schema.optional(Schema.String),
  before_id: Schema.optional(Schema.String),
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type AnthropicModelsParams = typeof AnthropicModelsParams.Type

/** `GET /endpoints/zdr`: every zero-data-retention endpoint of the catalog (the SDK's `endpoints.listZdrEndpoints`). */
export const ZdrEndpointList = Schema.Struct({ data: Schema.Array(EndpointData) })

/** `GET /models/count`: the SDK's `models.count` sends only `output_modalities`. */
export const CountModelsParams = Schema.Struct({
  output_modalities: Schema.optional(outputModalities),
}).annotations({ parseOptions: { onExcessProperty: "error" } })
export type CountModelsParams = typeof CountModelsParams.Type

/** For the endpoints without parameters: any query parameter is refused (an empty Struct would accept anything). */
export const NoParams = Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Array(Schema.String)) }).pipe(
  Schema.filter((params) => {
    const first = Object.keys(params)[0]
    return first === undefined ? true : `${first}: unknown key`
  }),
)
