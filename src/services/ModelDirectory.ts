/**
 * The catalog as `GET /models`, `/models/count`, `/model/{author}/{slug}`,
 * `/models/{author}/{slug}/endpoints` and `/providers` show it: the config's optional keys where
 * it has them, null where it does not (never an invented value), a few values derived from what
 * the gateway itself does (noted where they are made), and the router's own rolling statistics.
 * The static part of each model is built once at start; a listing filters and pages it. Built by
 * the handlers' layer over the one Router the data plane reports to (handlers/models.ts).
 */
import { Either } from "effect"
import type { ProviderEntry } from "../config/file.js"
import type { Pricing } from "../domain/pricing.js"
import { BadRequest, NotFound } from "../domain/errors.js"
import {
  BENCHMARK_SCORES,
  type CountModelsParams,
  type EndpointData,
  type InputModality,
  type ListModelsParams,
  MODEL_SORTS,
  type ModelData,
  type ModelSort,
  PARAMETERS,
  type Parameter,
  type PricingData,
  UNAVAILABLE_MODEL_FILTERS,
  USAGE_SORTS,
  vendorOf,
} from "../domain/models.js"
import { quote } from "../domain/validation.js"
import type { Router } from "../routing/Router.js"
import type { CatalogShape, Endpoint, Model } from "./Catalog.js"
import type { UsageSnapshot } from "./ModelUsage.js"

/** A non-negative decimal `n × 10^shift` as a plain decimal string (no exponent, no float noise): 2.5, -6 → "0.0000025". */
export const shiftedDecimal = (n: number, shift: number): string => {
  const [mantissa, exponent] = n.toString().split("e")
  const [whole, fraction = ""] = mantissa.split(".")
  let digits = whole + fraction
  let point = whole.length + (exponent === undefined ? 0 : Number(exponent)) + shift
  if (point <= 0) {
    digits = "0".repeat(1 - point) + digits
    point = 1
  }
  if (point > digits.length) digits += "0".repeat(point - digits.length)
  const intPart = digits.slice(0, point).replace(/^0+(?=\d)/, "")
  const fracPart = digits.slice(point).replace(/0+$/, "")
  return fracPart === "" ? intPart : `${intPart}.${fracPart}`
}

/** The config's USD per million tokens as the wire's USD per token (per request for `request`). */
export const pricingData = (pricing: Pricing): PricingData => ({
  prompt: shiftedDecimal(pricing.prompt, -6),
  completion: shiftedDecimal(pricing.completion, -6),
  ...(pricing.request === undefined ? {} : { request: shiftedDecimal(pricing.request, 0) }),
  // Reasoning tokens are output tokens: billed at the completion price (domain/pricing.ts).
  internal_reasoning: shiftedDecimal(pricing.completion, -6),
  ...(pricing.cached_prompt === undefined ? {} : { input_cache_read: shiftedDecimal(pricing.cached_prompt, -6) }),
  ...(pricing.cache_write === undefined ? {} : { input_cache_write: shiftedDecimal(pricing.cache_write, -6) }),
})

/** Sampling parameters the gateway carries to every upstream format it speaks. */
const BASE_PARAMETERS: ReadonlyArray<Parameter> = ["max_tokens", "temperature", "top_p"]

/** The request parameters each declared capability brings. */
const CAPABILITY_PARAMETERS: Readonly<Record<string, ReadonlyArray<Parameter>>> = {
  tools: ["tools", "tool_choice", "parallel_tool_calls"],
  reasoning: ["reasoning"],
  json_schema: ["response_format", "structured_outputs"],
  json_object: ["response_format"],
}

const inParameterOrder = (set: ReadonlySet<string>): ReadonlyArray<Parameter> => PARAMETERS.filter((p) => set.has(p))

/** The config's list, else the parameters the gateway carries plus those of the endpoint's capabilities. */
export const endpointParameters = (e: Endpoint): ReadonlyArray<Parameter> => {
  if (e.entry.supported_parameters !== undefined) return inParameterOrder(new Set(e.entry.supported_parameters))
  const set = new Set<string>(BASE_PARAMETERS)
  for (const capability of e.supports) for (const p of CAPABILITY_PARAMETERS[capability] ?? []) set.add(p)
  return inParameterOrder(set)
}

/** The endpoint a model's pricing and `top_provider` describe: the cheapest, the one the default draw favours. */
export const topEndpoint = (model: Model): Endpoint => {
  let best = model.endpoints[0]
  for (const e of model.endpoints) {
    const a = e.pricing.prompt + e.pricing.completion
    const b = best.pricing.prompt + best.pricing.completion
    if (a < b || (a === b && (e.pricing.request ?? 0) < (best.pricing.request ?? 0))) best = e
  }
  return best
}

interface Listed {
  readonly model: Model
  readonly data: ModelData
  readonly author: string
  readonly top: Endpoint
  readonly inputs: ReadonlySet<string>
  readonly outputs: ReadonlySet<string>
  readonly parameters: ReadonlySet<string>
  /** Provider ids and display names, lower case. */
  readonly providerNames: ReadonlySet<string>
}

/** What a model outputs: the config's list, else its kind's. GET /v1/models lists the text ones by default. */
export const outputModalitiesOf = (model: Model): ReadonlyArray<string> =>
  model.entry.architecture?.output_modalities ?? [model.kind === "embedding" ? "embeddings" : model.kind === "rerank" ? "rerank" : "text"]

const architectureOf = (model: Model) => {
  const declared = model.entry.architecture
  // Derived: text always; images and files where an endpoint declares them; the gateway answers text only.
  const inputs: Array<InputModality> = ["text"]
  if (model.endpoints.some((e) => e.supports.has("images"))) inputs.push("image")
  if (model.endpoints.some((e) => e.supports.has("files"))) inputs.push("file")
  const input_modalities: ReadonlyArray<string> = declared?.input_modalities ?? inputs
  // An embedding or rerank model outputs vectors or scores, not text: GET /v1/models leaves it out by default.
  const output_modalities = outputModalitiesOf(model)
  return {
    modality: declared?.modality ?? `${input_modalities.join("+")}->${output_modalities.join("+")}`,
    input_modalities,
    output_modalities,
    tokenizer: declared?.tokenizer,
    instruct_type: declared?.instruct_type ?? null,
  }
}

const listedOf = (model: Model, providers: ReadonlyMap<string, ProviderEntry>): Listed => {
  const entry = model.entry
  const top = topEndpoint(model)
  const architecture = architectureOf(model)
  const parameters = new Set(model.endpoints.flatMap(endpointParameters))
  const data: ModelData = {
    id: model.id,
    canonical_slug: entry.canonical_slug ?? model.id,
    name: model.name,
    created: entry.created ?? 0,
    description: entry.description ?? "",
    context_length: model.contextLength,
    architecture: {
      modality: architecture.modality,
      input_modalities: architecture.input_modalities,
      output_modalities: architecture.output_modalities,
      ...(architecture.tokenizer === undefined ? {} : { tokenizer: architecture.tokenizer }),
      instruct_type: architecture.instruct_type,
    },
    pricing: pricingData(top.pricing),
    top_provider: {
      context_length: top.contextLength,
      max_completion_tokens: top.maxOutputTokens ?? null,
      is_moderated: top.entry.is_moderated ?? false,
    },
    per_request_limits: null,
    supported_parameters: inParameterOrder(parameters),
    default_parameters: entry.default_parameters ?? null,
    supported_voices: null,
    hugging_face_id: entry.hugging_face_id ?? null,
    knowledge_cutoff: entry.knowledge_cutoff ?? null,
    expiration_date: entry.expiration_date ?? null,
    links: { details: `/v1/models/${model.id}/endpoints` },
  }
  const providerNames = new Set<string>()
  for (const e of model.endpoints) {
    providerNames.add(e.provider.id.toLowerCase())
    const name = providers.get(e.provider.id)?.name
    if (name !== undefined) providerNames.add(name.toLowerCase())
  }
  return {
    model,
    data,
    author: vendorOf(model.id).toLowerCase(),
    top,
    inputs: new Set(architecture.input_modalities),
    outputs: new Set(architecture.output_modalities),
    parameters,
    providerNames,
  }
}

const items = (list: string) =>
  list
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")

const DAY_MS = 86_400_000

/** `output_modalities` (default text): a model that outputs any of them; `all` keeps every model. */
const outputFilter = (param: string | undefined) => {
  const wanted = items(param ?? "text")
  if (wanted.includes("all")) return () => true
  return (l: Listed) => wanted.some((m) => l.outputs.has(m))
}

type RouterShape = Pick<Router, "endpointStats">

const invalid = (field: string, rule: string) => new BadRequest({ message: `Invalid request: ${field}: ${rule}` })


/** The best p50 of a measure over the model's endpoints (undefined when none is measured). */
const bestMedian = (l: Listed, read: (e: Endpoint) => number | undefined, higherIsBetter: boolean) => {
  let best: number | undefined
  for (const e of l.model.endpoints) {
    const v = read(e)
    if (v !== undefined && (best === undefined || (higherIsBetter ? v > best : v < best))) best = v
  }
  return best
}

/** A model's benchmark score from its config `scores`, undefined when it has none for that benchmark. */
const scoreOf = (l: Listed, benchmark: keyof typeof BENCHMARK_SCORES): number | undefined => l.model.entry.scores?.[BENCHMARK_SCORES[benchmark]]

/** Highest first, models without a value last; ties keep catalog order (Array.sort is stable). */
const byValue = (list: ReadonlyArray<Listed>, read: (l: Listed) => number | undefined) => {
  const values = new Map(list.map((l) => [l, read(l)]))
  return [...list].sort((a, b) => {
    const x = values.get(a)
    const y = values.get(b)
    if (x === undefined || y === undefined) return x === undefined ? (y === undefined ? 0 : 1) : -1
    return y - x
  })
}

/** The listing in the order `sort` names; the measured sorts read the router's rolling statistics, the popular ones `usage`. */
const sorted = (list: ReadonlyArray<Listed>, sort: ModelSort, usage: UsageSnapshot | undefined, router: RouterShape): ReadonlyArray<Listed> => {
  const price = (l: Listed) => (l.top.pricing.prompt + l.top.pricing.completion) / 2
  /** Known values first, best first; unknown last; ties keep catalog order (Array.sort is stable). */
  const byMeasure = (read: (e: Endpoint) => number | undefined, higherIsBetter: boolean) => {
    const values = new Map(list.map((l) => [l, bestMedian(l, read, higherIsBetter)]))
    return [...list].sort((a, b) => {
      const x = values.get(a)
      const y = values.get(b)
      if (x === undefined || y === undefined) return x === undefined ? (y === undefined ? 0 : 1) : -1
      return higherIsBetter ? y - x : x - y
    })
  }
  switch (sort) {
    case "newest":
      return [...list].sort((a, b) => b.data.created - a.data.created)
    case "pricing-low-to-high":
      return [...list].sort((a, b) => price(a) - price(b))
    case "pricing-high-to-low":
      return [...list].sort((a, b) => price(b) - price(a))
    case "context-high-to-low":
      return [...list].sort((a, b) => b.model.contextLength - a.model.contextLength)
    case "throughput-high-to-low":
      return byMeasure((e) => router.endpointStats(e).rolling.throughput30m?.p50, true)
    case "latency-low-to-high":
      return byMeasure((e) => router.endpointStats(e).rolling.latency30m?.p50, false)
    // From the ledger's rollup; a model without requests counts 0 (catalog order among those).
    case "most-popular":
      return byValue(list, (l) => usage?.requests30d.get(l.model.id) ?? 0)
    case "top-weekly":
      return byValue(list, (l) => usage?.tokens7d.get(l.model.id) ?? 0)
    case "intelligence-high-to-low":
      return byValue(list, (l) => scoreOf(l, "intelligence"))
    case "coding-high-to-low":
      return byValue(list, (l) => scoreOf(l, "coding"))
    case "agentic-high-to-low":
      return byValue(list, (l) => scoreOf(l, "agentic"))
    case "design-arena-elo-high-to-low":
      return byValue(list, (l) => scoreOf(l, "design-arena-elo"))
  }
}


/** The listing's filters, one per query parameter given; `at` (epoch ms) is the age filters' now. */
const filtersOf = (params: ListModelsParams, at: number): Array<(l: Listed) => boolean> => {
  const filters: Array<(l: Listed) => boolean> = [outputFilter(params.output_modalities)]
  if (params.category !== undefined) {
    const category = params.category
    filters.push((l) => l.model.entry.categories?.includes(category) ?? false)
  }
  if (params.supported_parameters !== undefined) {
    const wanted = items(params.supported_parameters)
    filters.push((l) => wanted.every((p) => l.parameters.has(p)))
  }
  if (params.input_modalities !== undefined) {
    const wanted = items(params.input_modalities)
    filters.push((l) => wanted.every((m) => l.inputs.has(m)))
  }
  const q = params.q?.trim().toLowerCase()
  if (q !== undefined && q !== "") filters.push((l) => l.model.id.toLowerCase().includes(q) || l.model.name.toLowerCase().includes(q))
  const { context, min_price, max_price, min_output_price, max_output_price, min_age_days, max_age_days } = params
  if (context !== undefined) filters.push((l) => l.model.contextLength >= context)
  if (min_price !== undefined) filters.push((l) => l.top.pricing.prompt >= min_price)
  if (max_price !== undefined) filters.push((l) => l.top.pricing.prompt <= max_price)
  if (min_output_price !== undefined) filters.push((l) => l.top.pricing.completion >= min_output_price)
  if (max_output_price !== undefined) filters.push((l) => l.top.pricing.completion <= max_output_price)
  if (params.arch !== undefined) {
    const arch = params.arch.trim().toLowerCase()
    filters.push((l) => l.data.architecture.tokenizer?.toLowerCase() === arch)
  }
  if (params.model_authors !== undefined) {
    const authors = new Set(items(params.model_authors.toLowerCase()))
    filters.push((l) => authors.has(l.author))
  }
  if (params.providers !== undefined) {
    const wanted = items(params.providers.toLowerCase())
    filters.push((l) => wanted.some((p) => l.providerNames.has(p)))
  }
  if (params.zdr !== undefined) filters.push((l) => l.model.endpoints.some((e) => e.zdr))
  // Only a model whose config says `"distillable": true` is distillable.
  if (params.distillable !== undefined) {
    const wanted = params.distillable === "true"
    filters.push((l) => (l.model.entry.distillable === true) === wanted)
  }
  // Benchmark indices: the config score × 100; a model without the score is left out.
  const indexBounds = [
    ["intelligence", params.min_intelligence_index, params.max_intelligence_index],
    ["coding", params.min_coding_index, params.max_coding_index],
    ["agentic", params.min_agentic_index, params.max_agentic_index],
  ] as const
  for (const [benchmark, min, max] of indexBounds) {
    if (min === undefined && max === undefined) continue
    filters.push((l) => {
      const score = scoreOf(l, benchmark)
      if (score === undefined) return false
      const index = score * 100
      return (min === undefined || index >= min - 1e-9) && (max === undefined || index <= max + 1e-9)
    })
  }
  // Age filters need a release date: a model whose config has no `created` is left out by them.
  const ageDays = (l: Listed) => (at - l.data.created * 1000) / DAY_MS
  if (min_age_days !== undefined) filters.push((l) => l.data.created > 0 && ageDays(l) >= min_age_days)
  if (max_age_days !== undefined) filters.push((l) => l.data.created > 0 && ageDays(l) <= max_age_days)
  return filters
}

/** The query parameter that names a filter this gateway cannot apply, or a sort it does not know: the 400 to answer. */
const refusedParams = (params: ListModelsParams): BadRequest | undefined => {
  for (const [name, why] of Object.entries(UNAVAILABLE_MODEL_FILTERS)) {
    if ((params as Record<string, unknown>)[name] !== undefined) return invalid(name, `not available on this gateway (${why})`)
  }
  if (params.sort !== undefined && !(MODEL_SORTS as ReadonlyArray<string>).includes(params.sort)) {
    return invalid("sort", `${quote(params.sort)} is not one of ${MODEL_SORTS.join(", ")}`)
  }
  return undefined
}


/** One endpoint of a model as `/endpoints` shows it, with this process's statistics of it. */
const endpointDataOf = (l: Listed, e: Endpoint, router: RouterShape, providers: ReadonlyMap<string, ProviderEntry>): EndpointData => {
  const stats = router.endpointStats(e)
  const providerName = providers.get(e.provider.id)?.name ?? e.provider.id
  const tools = e.supports.has("tools")
  return {
    name: `${providerName} | ${l.model.id}`,
    model_id: l.data.canonical_slug,
    model_name: l.model.name,
    provider_name: providerName,
    tag: e.provider.id,
    context_length: e.contextLength,
    max_completion_tokens: e.maxOutputTokens ?? null,
    max_prompt_tokens: e.entry.max_prompt_tokens ?? null,
    pricing: pricingData(e.pricing),
    quantization: e.quantization ?? null,
    supported_parameters: endpointParameters(e),
    supports_implicit_caching: e.entry.implicit_caching ?? false,
    // Every upstream format the gateway speaks carries all four tool_choice forms (providers/*/request.ts).
    supports_tool_choice: { auto: tools, none: tools, required: tools, function: tools },
    supports_voice_cloning: false,
    status: stats.coolingDown ? -2 : stats.health.consecutiveFailures > 0 ? -1 : 0,
    uptime_last_5m: stats.rolling.uptime5m,
    uptime_last_30m: stats.rolling.uptime30m,
    uptime_last_1d: stats.rolling.uptime1d,
    latency_last_30m: stats.rolling.latency30m,
    throughput_last_30m: stats.rolling.throughput30m,
  }
}


export const makeModelDirectory = (catalog: CatalogShape, router: RouterShape, now: () => number = Date.now) => {
  const providers = new Map(catalog.providers.map((p) => [p.id, p]))
  const listed = catalog.models.map((m) => listedOf(m, providers))
  const byId = new Map(listed.map((l) => [l.model.id, l]))

  /**
   * A page of the catalog. `usage` is the ledger's usage snapshot, which only the popularity sorts
   * read (`needsUsage`): the handler fetches it for those alone. `path` is the listing's own (its next link).
   */
  const list = (
    params: ListModelsParams,
    usage?: UsageSnapshot,
    path = "/v1/models",
  ): Either.Either<{ data: ReadonlyArray<ModelData>; total_count: number; links: { next: string | null } }, BadRequest> => {
    const refused = refusedParams(params)
    if (refused !== undefined) return Either.left(refused)
    const filters = filtersOf(params, now())
    let kept: ReadonlyArray<Listed> = listed.filter((l) => filters.every((f) => f(l)))
    if (params.sort !== undefined) kept = sorted(kept, params.sort as ModelSort, usage, router)
    const offset = params.offset ?? 0
    const paged = params.limit === undefined && params.offset === undefined
    const page = paged ? kept : kept.slice(offset, params.limit === undefined ? undefined : offset + params.limit)
    let next: string | null = null
    if (!paged && params.limit !== undefined && offset + params.limit < kept.length) {
      const query = new URLSearchParams()
      for (const [k, v] of Object.entries(params)) if (v !== undefined) query.set(k, String(v))
      query.set("offset", String(offset + params.limit))
      next = `${path}?${query.toString()}`
    }
    return Either.right({ data: page.map((l) => l.data), total_count: kept.length, links: { next } })
  }

  const count = (params: CountModelsParams) => {
    const keep = outputFilter(params.output_modalities)
    return { data: { count: listed.filter(keep).length } }
  }

  const find = (author: string, slug: string): Either.Either<Listed, NotFound> => {
    const id = `${author}/${slug}`
    const found = byId.get(id)
    return found === undefined
      ? Either.left(new NotFound({ message: `Model ${quote(id)} does not exist in this gateway's catalog` }))
      : Either.right(found)
  }

  const endpoints = (author: string, slug: string) =>
    Either.map(find(author, slug), (l) => ({
      data: {
        id: l.model.id,
        name: l.model.name,
        created: l.data.created,
        description: l.data.description,
        architecture: { ...l.data.architecture, tokenizer: l.data.architecture.tokenizer ?? null },
        endpoints: l.model.endpoints.map((e) => endpointDataOf(l, e, router, providers)),
      },
    }))

  const get = (author: string, slug: string) => Either.map(find(author, slug), (l) => ({ data: l.data }))

  /** Every zero-data-retention endpoint, in catalog order, with this process's statistics. */
  const zdrEndpoints = () => ({ data: listed.flatMap((l) => l.model.endpoints.filter((e) => e.zdr).map((e) => endpointDataOf(l, e, router, providers))) })

  const providerList = {
    data: catalog.providers.map((p) => ({
      name: p.name ?? p.id,
      slug: p.id,
      privacy_policy_url: p.privacy_policy_url ?? null,
      terms_of_service_url: p.terms_of_service_url ?? null,
      status_page_url: p.status_page_url ?? null,
      headquarters: p.headquarters ?? null,
      datacenters: p.datacenters ?? null,
    })),
  }

  return { list, count, get, endpoints, zdrEndpoints, providers: () => providerList } as const
}

/** Whether a listing reads the ledger's usage snapshot: only a popularity sort does. */
export const needsUsage = (params: { readonly sort?: string | undefined }): boolean => params.sort !== undefined && USAGE_SORTS.has(params.sort)

export type ModelDirectory = ReturnType<typeof makeModelDirectory>
