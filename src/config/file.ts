/**
 * The JSON config file (`GATEWAY_CONFIG`): the catalog of providers and models, and switches.
 * Decoded once at start; a bad file stops start-up with the file, the path inside it and the rule.
 */
import { providerKinds } from "../providers/kinds.js"
import { providerSettingsProblem } from "./provider-settings.js"
import { EMBEDDERS, RERANKERS } from "../providers/embeddings/index.js"
import { Schema } from "effect"
import { patternSearchProblem } from "../domain/pattern-search.js"
import { searchEngineIds } from "../domain/web.js"
import { RateLimit } from "../domain/keys.js"
import { Category, DefaultParameters, InputModality, OutputModality, Parameter } from "../domain/models.js"
import { PriceUsd, Pricing } from "../domain/pricing.js"
import { headersAllowed } from "../domain/destinations.js"

const nonEmpty = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))
const positiveInt = Schema.Int.pipe(Schema.positive({ message: () => "must be a positive integer" }))
const countryCode = Schema.String.pipe(Schema.pattern(/^[A-Z]{2}$/, { message: () => "must be an ISO 3166-1 alpha-2 country code, e.g. US" }))
/** A socket buffer size: 0 (the kernel's own, autotuned) or 4 KB to 64 MB. */
const socketBuffer = Schema.Int.pipe(
  Schema.filter((n) => n === 0 || (n >= 4096 && n <= 64 * 1024 * 1024), { message: () => "must be 0 or an integer from 4096 to 67108864" }),
)

// The rule lists every kind (a literal union's own message names only the first).
export const ProviderKind = Schema.Literal(...providerKinds).annotations({
  message: () => ({ message: `must be one of ${providerKinds.join(", ")}`, override: true }),
})

/**
 * The headers the gateway sends upstream, held to a destination's header rules (an HTTP token for a
 * name, no line break, NUL or framing header): not checked here, a bad one made every request to
 * the provider a 502 at its first call.
 */
const UpstreamHeaders = Schema.Record({ key: Schema.String, value: Schema.String }).pipe(Schema.filter(headersAllowed))

export const ProviderEntry = Schema.Struct({
  id: nonEmpty,
  kind: ProviderKind,
  base_url: Schema.optional(nonEmpty),
  api_key_env: Schema.optional(nonEmpty),
  timeout_ms: Schema.optional(positiveInt),
  headers: Schema.optional(UpstreamHeaders),
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
  // Settings of one kind each (which kind takes which: provider-settings.ts; docs/providers.md).
  project: Schema.optional(nonEmpty),
  location: Schema.optional(nonEmpty),
  credentials_file: Schema.optional(nonEmpty),
  token_url: Schema.optional(nonEmpty),
  api_version: Schema.optional(nonEmpty),
  bearer_token_env: Schema.optional(nonEmpty),
  api: Schema.optional(Schema.Literal("chat-completions", "responses")),
  /** Bedrock: the AWS region (its default host is bedrock-runtime.{region}.amazonaws.com) and the variables of a key pair for SigV4. */
  region: Schema.optional(Schema.String.pipe(Schema.pattern(/^[a-z]{2}(-[a-z]+)+-\d+$/, { message: () => "must be an AWS region, e.g. us-east-1" }))),
  access_key_id_env: Schema.optional(nonEmpty),
  secret_access_key_env: Schema.optional(nonEmpty),
  session_token_env: Schema.optional(nonEmpty),
})
export type ProviderEntry = typeof ProviderEntry.Type

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
  /** On a `vertex` provider: whose model format the endpoint speaks (default google). */
  publisher: Schema.optional(Schema.Literal("google", "anthropic")),
})
export type EndpointEntry = typeof EndpointEntry.Type

export const ModelEntry = Schema.Struct({
  id: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9._-]+\/[A-Za-z0-9._:-]+$/, { message: () => "must look like vendor/model" }),
  ),
  name: Schema.optional(Schema.String),
  /** What the model serves: chat (the model requests, the default), embedding (POST /v1/embeddings) or rerank (POST /v1/rerank). */
  kind: Schema.optional(Schema.Literal("chat", "embedding", "rerank")),
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
  /** Its licence allows distilling it (`GET /models?distillable=`); default false. */
  distillable: Schema.optional(Schema.Boolean),
  /**
   * For the auto and pareto routers: 0-1 per task type (coding, math, writing, analysis, translation, chat, general); a missing
   * one counts as 0.5. `GET /models` sorts and filters by `intelligence`, `coding`, `agentic` and `design_arena` (docs/models.md).
   */
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
  pricing: Schema.optional(Schema.Struct({ request: Schema.optional(PriceUsd), prompt: Schema.optional(PriceUsd) })),
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

/** `plugins.file_parser`: PDF parsing (docs/plugins.md, "file-parser"). */
export const FileParserConfig = Schema.Struct({
  /** Bytes of one file at most (default `outbound.max_bytes`, 5 MB). */
  max_file_bytes: Schema.optional(positiveInt),
  /** Pages of one PDF at most (default 200), checked before any text is extracted. */
  max_pages: Schema.optional(positiveInt),
  /** One parse's time limit in the worker (default 20 s). */
  parse_timeout_ms: Schema.optional(positiveInt),
  /** Parse results kept in memory (default 256). */
  cache_entries: Schema.optional(positiveInt),
  /** Bytes a PDF's compressed streams may inflate to in all (default 200 MB), checked before parsing. */
  max_inflated_bytes: Schema.optional(positiveInt),
  /** Bytes one compressed stream of a PDF may inflate to (default 50 MB). */
  max_stream_inflated_bytes: Schema.optional(positiveInt),
  /** Bytes the process's memory may grow by while one PDF is parsed (default 512 MB); past it the parse is ended. */
  max_parse_memory_bytes: Schema.optional(positiveInt),
  /** The `mistral-ocr` engine: a provider of `providers` (its base_url and key) and the OCR model. */
  ocr: Schema.optional(
    Schema.Struct({
      provider: nonEmpty,
      model: nonEmpty,
      /** USD per page processed (default 0). */
      price_per_page: Schema.optional(PriceUsd),
    }),
  ),
})
export type FileParserConfig = typeof FileParserConfig.Type

/** `search`: the engine behind web_search and the `web` plugin (docs/web-tools.md). */
export const SearchConfig = Schema.Struct({
  engine: Schema.Literal(...searchEngineIds).annotations({ message: () => ({ message: `must be one of ${searchEngineIds.join(", ")}`, override: true }) }),
  /** The engine's API root (default: the vendor's public API; required for searxng, which is self-hosted). */
  base_url: Schema.optional(nonEmpty),
  /** The environment variable holding the engine's API key (required for exa, tavily and brave). */
  api_key_env: Schema.optional(nonEmpty),
  /** USD per search request, charged to the key. */
  pricing: Schema.optional(Schema.Struct({ request: Schema.optional(PriceUsd) })),
  /** One search's deadline (default 10 s), within the request's. */
  timeout_ms: Schema.optional(positiveInt),
})
export type SearchConfig = typeof SearchConfig.Type
/** One fusion preset: the analysis panel and the judge (README, docs/fusion.md). */
export const FusionPresetConfig = Schema.Struct({
  /** Model ids of the catalog that answer in parallel (1 to 8). */
  analysis_models: Schema.Array(nonEmpty).pipe(
    Schema.minItems(1, { message: () => "1 to 8 models" }),
    Schema.maxItems(8, { message: () => "1 to 8 models" }),
  ),
  /** The judge: compares the panel's answers as JSON. */
  model: nonEmpty,
})
export type FusionPresetConfig = typeof FusionPresetConfig.Type

/** `plugins.fusion`: the presets a request's `preset` names (only the contract's three). */
export const FusionConfig = Schema.Struct({
  presets: Schema.optional(
    Schema.Struct({
      "general-high": Schema.optional(FusionPresetConfig),
      "general-budget": Schema.optional(FusionPresetConfig),
      "general-fast": Schema.optional(FusionPresetConfig),
    }),
  ),
})
export type FusionConfig = typeof FusionConfig.Type

/** `retention`: how long generation records and their stored content are kept (docs/operations.md#retention). */
export const RetentionConfig = Schema.Struct({
  /** Generation records older than this many days are deleted (default: kept forever); the daily spend rollups stay. */
  generations_days: Schema.optional(Schema.Number.pipe(Schema.positive({ message: () => "must be a number of days > 0" }))),
  /** Stored prompts and completions older than this many days are deleted (default: kept forever). */
  content_days: Schema.optional(Schema.Number.pipe(Schema.positive({ message: () => "must be a number of days > 0" }))),
})
export type RetentionConfig = typeof RetentionConfig.Type

/** An origin as a browser sends it (`https://app.example.com`, a port allowed), or `*` for any origin. */
const corsOrigin = Schema.String.pipe(
  Schema.filter((s) => s === "*" || (URL.canParse(s) && new URL(s).origin === s), {
    message: () => "must be * or an origin such as https://app.example.com (scheme, host and port only, no trailing slash)",
  }),
)

/** One Redis endpoint (Cluster and Sentinel are not supported). */
export const RedisUrl = Schema.String.pipe(
  Schema.pattern(/^(redis|rediss|valkey|valkeys):\/\/\S+$/, { message: () => "must be a redis:// or rediss:// URL" }),
)

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
      /** Request bodies still arriving at once, after the key was accepted, for one key (default 64). */
      max_unfinished_bodies_per_key: Schema.optional(positiveInt),
      /** The same for one client address (default 256). */
      max_unfinished_bodies_per_ip: Schema.optional(positiveInt),
      max_upstream_body_bytes: Schema.optional(positiveInt),
      max_upstream_event_bytes: Schema.optional(positiveInt),
      /** Model calls one request may make in all, server-tool loop and fusion included (default 64). */
      max_upstream_calls: Schema.optional(positiveInt),
      /** The kernel send buffer of each client connection, fixed (0: the kernel's autotuning). */
      send_buffer_bytes: Schema.optional(socketBuffer),
      /** The kernel receive buffer of each upstream connection, fixed (0: the kernel's autotuning). */
      upstream_receive_buffer_bytes: Schema.optional(socketBuffer),
      /** The unsent low-water mark of each client connection (TCP_NOTSENT_LOWAT; 0: none). */
      unsent_low_water_bytes: Schema.optional(socketBuffer),
    }),
  ),
  ledger: Schema.optional(
    Schema.Struct({
      /** An answer's last byte waits until its generation record is committed (no loss on a process crash). */
      durable_answers: Schema.optional(Schema.Boolean),
      /** How long a hold stays valid without its process renewing it (renewed every third of it). */
      hold_lease_ms: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(300, { message: () => "must be an integer ≥ 300" }))),
      /** A budget slice holds at most this many worst cases of the request asking for it; 0: every request holds its own. */
      budget_slice_requests: Schema.optional(
        Schema.Int.pipe(Schema.between(0, 1_000_000, { message: () => "must be an integer from 0 to 1000000" })),
      ),
      /** A slice no request used for this long is given back. */
      budget_slice_idle_ms: Schema.optional(
        Schema.Int.pipe(Schema.between(10, 3_600_000, { message: () => "must be an integer from 10 to 3600000" })),
      ),
      /** The ledger spool's bound in generations (docs/operations.md): past it, new requests get 503. */
      spool_max_generations: Schema.optional(
        Schema.Int.pipe(Schema.between(1, 100_000_000, { message: () => "must be an integer from 1 to 100000000" })),
      ),
      /** The ledger spool's bound in bytes of its file. */
      spool_max_bytes: Schema.optional(
        Schema.Int.pipe(Schema.between(1024, 1024 ** 4, { message: () => "must be an integer from 1024 to 1099511627776" })),
      ),
      /** A ledger commit not ended after this long counts as failed (a stalled connection) and its batch is spooled. */
      commit_timeout_ms: Schema.optional(
        Schema.Int.pipe(Schema.between(100, 600_000, { message: () => "must be an integer from 100 to 600000" })),
      ),
    }),
  ),
  /** Plugin settings, one key per plugin id (`_` for `-`). */
  plugins: Schema.optional(
    Schema.Struct({
      file_parser: Schema.optional(FileParserConfig),
      moderation: Schema.optional(ModerationConfig),
      fusion: Schema.optional(FusionConfig),
      context_compression: Schema.optional(
        Schema.Struct({
          /** On by default for endpoints whose context is at most this many tokens (default 8192; 0: never by default). */
          default_max_context: Schema.optional(Schema.Int.pipe(Schema.nonNegative({ message: () => "must be an integer ≥ 0" }))),
          /** Provider id → the most input items (messages) its upstream takes, e.g. {"mistral": 1000}. */
          max_messages: Schema.optional(Schema.Record({ key: Schema.String, value: positiveInt })),
          /** Added to the tokenizer's count for other tokenizers (default 0.15). */
          safety_margin: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "must be a number from 0 to 1" }))),
          /** The most characters of one request counted with the tokenizer (default 262144); the rest at bytes ÷ 3. */
          tokenizer_max_chars: Schema.optional(positiveInt),
        }),
      ),
    }),
  ),
  /** This process's name among those sharing a database (holds are owned by it); default the host name. */
  instance_id: Schema.optional(nonEmpty),
  database: Schema.optional(
    Schema.Struct({
      /** Connections of each process's Postgres pool (default 20; every worker of `--workers` has its own). */
      pool_size: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000, { message: () => "must be an integer from 1 to 1000" }))),
    }),
  ),
  /** Redis (or Valkey) for the state processes share: rate limits (docs/operations.md, "Redis"). REDIS_URL overrides `url`. */
  redis: Schema.optional(
    Schema.Struct({
      url: Schema.optional(RedisUrl),
      /** The deadline of one Redis call on the request path (default 5 ms): slower, the process uses its own state. */
      timeout_ms: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000, { message: () => "must be an integer from 1 to 1000" }))),
    }),
  ),
  /** Request rate limits: a default per workspace id, for keys that set none of their own. */
  rate_limits: Schema.optional(
    Schema.Struct({
      workspaces: Schema.optional(Schema.Record({ key: Schema.String, value: RateLimit })),
    }),
  ),
  /** The web console at /console (README, Console). */
  console: Schema.optional(Schema.Struct({ enabled: Schema.optional(Schema.Boolean) })),
  /** The gateway's own traces (exported when OTEL_EXPORTER_OTLP_ENDPOINT is set). */
  tracing: Schema.optional(
    Schema.Struct({
      /** Continue the caller's W3C traceparent instead of starting a new trace (only behind a trusted proxy). */
      trust_traceparent: Schema.optional(Schema.Boolean),
    }),
  ),
  /** Requests the gateway makes to URLs a tenant gave (broadcast destinations, plugins): src/outbound/fetch.ts. */
  outbound: Schema.optional(
    Schema.Struct({
      /** Allow private, loopback, link-local and metadata addresses (a collector inside the network). */
      allow_private_addresses: Schema.optional(Schema.Boolean),
      /** The most bytes of an answer (default 5 MB). */
      max_bytes: Schema.optional(positiveInt),
      /** One fetch's deadline, redirects included (default 10 s). */
      timeout_ms: Schema.optional(positiveInt),
      /** Outbound fetches at once across the process (default 32); the rest wait. */
      max_concurrent: Schema.optional(positiveInt),
    }),
  ),
  search: Schema.optional(SearchConfig),
  /** Which browser origins may call the gateway (docs/operations.md#browsers-cors). */
  cors: Schema.optional(
    Schema.Struct({
      /** Default `["*"]`: the data plane and the read endpoints for any origin; the management endpoints only for origins listed by name. */
      allowed_origins: Schema.optional(Schema.Array(corsOrigin)),
    }),
  ),
  /** `GET /metrics` (docs/operations.md#metrics). */
  metrics: Schema.optional(
    Schema.Struct({
      /** The bearer token `GET /metrics` requires (env `GATEWAY_METRICS_TOKEN` wins); without one it is refused. */
      token: Schema.optional(Schema.String.pipe(Schema.minLength(16, { message: () => "must be at least 16 characters" }))),
    }),
  ),
  retention: Schema.optional(RetentionConfig),
  /** Delivery of generations to observability destinations (README, Broadcast). */
  broadcast: Schema.optional(
    Schema.Struct({
      /** Spans (generations) per request to a destination at most. */
      batch_size: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000, { message: () => "must be an integer from 1 to 1000" }))),
      /** Bytes per request to a destination, about (a generation larger than it goes alone). */
      batch_max_bytes: Schema.optional(
        Schema.Int.pipe(Schema.between(10_000, 100_000_000, { message: () => "must be an integer from 10000 to 100000000" })),
      ),
      /** One send's deadline. */
      timeout_ms: Schema.optional(positiveInt),
      /** Attempts before a delivery is dead (1 to 20). */
      max_attempts: Schema.optional(Schema.Int.pipe(Schema.between(1, 20, { message: () => "must be an integer from 1 to 20" }))),
      /** The first retry's delay; doubled per attempt. */
      retry_base_ms: Schema.optional(positiveInt),
      /** Pending deliveries kept per destination; beyond it the oldest are dropped (counted). */
      max_pending_per_destination: Schema.optional(positiveInt),
      /** What the pending batches may hold on disk in all (items and sealed content); beyond it the oldest are dropped (counted). */
      max_pending_bytes: Schema.optional(positiveInt),
      /** Requests in flight to one destination at once. */
      concurrency_per_destination: Schema.optional(positiveInt),
      /** How long delivered and dead rows are kept. */
      retention_hours: Schema.optional(Schema.Number.pipe(Schema.positive({ message: () => "must be a number > 0" }))),
      /** The delivery Worker's thread priority on Linux: 0 (the process's) to 19 (the lowest, the default). */
      worker_nice: Schema.optional(Schema.Int.pipe(Schema.between(0, 19, { message: () => "must be an integer from 0 to 19" }))),
    }),
  ),
})
export type ConfigFile = typeof ConfigFile.Type

/** Bedrock's own settings: a region, and a key pair named in full (README, Bedrock). */
const checkBedrock = (p: ProviderEntry, i: number): string | undefined => {
  const keyPair = p.access_key_id_env !== undefined || p.secret_access_key_env !== undefined || p.session_token_env !== undefined
  if (p.kind !== "bedrock") {
    if (p.region !== undefined) return `providers[${i}].region: is only for kind "bedrock"`
    return keyPair ? `providers[${i}].access_key_id_env: is only for kind "bedrock"` : undefined
  }
  if (p.region === undefined) return `providers[${i}].region: is required for kind "bedrock"`
  if (keyPair && p.access_key_id_env === undefined) return `providers[${i}].access_key_id_env: is required with secret_access_key_env or session_token_env`
  if (keyPair && p.secret_access_key_env === undefined) return `providers[${i}].secret_access_key_env: is required with access_key_id_env`
  return undefined
}

/** Cross-references a Schema cannot see: endpoints name known providers, ids are unique. */
export const checkReferences = (file: ConfigFile): string | undefined => {
  const providers = new Set<string>()
  for (const [i, p] of file.providers.entries()) {
    if (providers.has(p.id)) return `providers[${i}].id: duplicate provider id "${p.id}"`
    const problem = providerSettingsProblem(p, i)
    if (problem !== undefined) return problem
    const bedrock = checkBedrock(p, i)
    if (bedrock !== undefined) return bedrock
    providers.add(p.id)
  }
  // A guardrail's id is what a 403's pipeline entry names: two with one id could not be told apart.
  const guardrails = new Set<string>()
  for (const [i, g] of (file.guardrails ?? []).entries()) {
    if (guardrails.has(g.id)) return `guardrails[${i}].id: duplicate guardrail id "${g.id}"`
    guardrails.add(g.id)
    for (const [j, pattern] of g.patterns.entries()) {
      const problem = patternSearchProblem(pattern)
      if (problem !== undefined) return `guardrails[${i}].patterns[${j}]: ${problem}`
    }
  }
  for (const id of Object.keys(file.plugins?.context_compression?.max_messages ?? {})) {
    if (!providers.has(id)) return `plugins.context_compression.max_messages.${id}: unknown provider "${id}"`
  }
  const models = new Set<string>()
  for (const [i, m] of file.models.entries()) {
    if (models.has(m.id)) return `models[${i}].id: duplicate model id "${m.id}"`
    models.add(m.id)
    for (const [j, e] of m.endpoints.entries()) {
      if (!providers.has(e.provider)) return `models[${i}].endpoints[${j}].provider: unknown provider "${e.provider}"`
      const kind = file.providers.find((p) => p.id === e.provider)?.kind
      if (e.publisher !== undefined && kind !== "vertex") {
        return `models[${i}].endpoints[${j}].publisher: only applies to providers of kind "vertex"`
      }
      const serves = m.kind === "embedding" ? EMBEDDERS : m.kind === "rerank" ? RERANKERS : undefined
      if (kind !== undefined && serves !== undefined && serves[kind] === undefined) {
        return `models[${i}].endpoints[${j}].provider: provider "${e.provider}" is of kind "${kind}", which does not serve ${m.kind} models (${Object.keys(serves).join(", ")} do)`
      }
    }
  }
  const search = file.search
  if (search !== undefined) {
    if (search.engine === "searxng" && search.base_url === undefined) return "search.base_url: is required for engine searxng (a self-hosted instance)"
    if (search.engine !== "searxng" && search.api_key_env === undefined) return `search.api_key_env: is required for engine ${search.engine}`
    if (search.base_url !== undefined && !URL.canParse(search.base_url)) return "search.base_url: must be an http(s) URL"
  }
  for (const [name, preset] of Object.entries(file.plugins?.fusion?.presets ?? {})) {
    if (preset === undefined) continue
    for (const [i, id] of preset.analysis_models.entries()) {
      if (!models.has(id)) return `plugins.fusion.presets.${name}.analysis_models[${i}]: unknown model "${id}"`
    }
    if (!models.has(preset.model)) return `plugins.fusion.presets.${name}.model: unknown model "${preset.model}"`
  }
  const moderation = file.plugins?.moderation
  if (moderation !== undefined) {
    const provider = file.providers.find((p) => p.id === moderation.provider)
    if (provider === undefined) return `plugins.moderation.provider: unknown provider "${moderation.provider}"`
    if (provider.base_url === undefined) return `plugins.moderation.provider: provider "${moderation.provider}" has no base_url`
  }
  return undefined
}
