/**
 * The models listing as plain functions over an in-memory catalog and router: what the config
 * says is shown, what it lacks is null (or derived from what the gateway does, as documented),
 * prices are exact decimal strings per token, and the filters, sorts and pages of `GET /models`.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import type { EndpointEntry, ModelEntry, ProviderEntry } from "../../src/config/file.js"
import type { ListModelsParams } from "../../src/domain/models.js"
import { makeRouter, type RoutePlan } from "../../src/routing/Router.js"
import { buildCatalog } from "../../src/services/Catalog.js"
import { makeModelDirectory, shiftedDecimal } from "../../src/services/ModelDirectory.js"

const providers: ReadonlyArray<ProviderEntry> = [
  {
    id: "acme",
    kind: "fake",
    name: "Acme Cloud",
    privacy_policy_url: "https://acme.example/privacy",
    terms_of_service_url: "https://acme.example/terms",
    status_page_url: "https://status.acme.example",
    headquarters: "US",
    datacenters: ["US", "DE"],
  },
  { id: "bare", kind: "fake" },
]

const ep = (provider: string, prompt: number, completion: number, extra: Partial<EndpointEntry> = {}): EndpointEntry => ({
  provider,
  upstream_model: "up",
  pricing: { prompt, completion },
  ...extra,
})

const model = (id: string, extra: Partial<ModelEntry>, ...endpoints: Array<EndpointEntry>): ModelEntry => ({
  id,
  context_length: 8_000,
  ...extra,
  // One upstream model per catalog model: the router keys its statistics by provider and upstream model.
  endpoints: endpoints.map((e) => ({ ...e, upstream_model: id })) as unknown as ModelEntry["endpoints"],
})

const NOW = Date.UTC(2026, 0, 31)

const MODELS: ReadonlyArray<ModelEntry> = [
  model(
    "acme/full",
    {
      name: "Acme Full",
      description: "Everything the config can say",
      created: NOW / 1000 - 10 * 86_400,
      context_length: 200_000,
      canonical_slug: "acme/full-2026-01-21",
      hugging_face_id: "acme/full",
      knowledge_cutoff: "2025-06-30",
      expiration_date: "2027-01-01",
      categories: ["programming", "science"],
      architecture: { tokenizer: "GPT", instruct_type: "chatml", input_modalities: ["text", "image", "audio"] },
      default_parameters: { temperature: 0.7, top_p: 0.9 },
      scores: { coding: 0.9, intelligence: 0.7 },
      distillable: true,
    },
    ep("bare", 3, 15, { supports: ["tools"] }),
    ep("acme", 2.5, 10, {
      pricing: { prompt: 2.5, completion: 10, cached_prompt: 0.25, cache_write: 3.125, request: 0.0001 },
      max_output_tokens: 16_384,
      context_length: 128_000,
      max_prompt_tokens: 100_000,
      quantization: "fp8",
      is_moderated: true,
      implicit_caching: true,
      supports: ["reasoning", "json_schema", "images"],
      zdr: true,
    }),
  ),
  model("bare/min", {}, ep("bare", 0.15, 0.6)),
  model("bare/old", { created: NOW / 1000 - 400 * 86_400, context_length: 32_000, scores: { coding: 0.5, agentic: 0.8, design_arena: 0.6 } }, ep("bare", 0.5, 0.5, { supported_parameters: ["seed", "temperature"] })),
]

const setup = () => {
  let now = NOW
  const catalog = buildCatalog(providers, MODELS)
  const router = makeRouter(catalog, { now: () => now, random: () => 0 })
  const directory = makeModelDirectory(catalog, router, () => now)
  return { catalog, router, directory, advance: (ms: number) => (now += ms) }
}

const list = (params: ListModelsParams = {}) => {
  const result = setup().directory.list(params)
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return result.right
}

const refusal = (params: ListModelsParams) => {
  const result = setup().directory.list(params)
  if (Either.isRight(result)) throw new Error("expected a 400")
  expect(result.left.status).toBe(400)
  return result.left.message
}

const ids = (params: ListModelsParams = {}) => list(params).data.map((m) => m.id)

describe("prices as the wire writes them", () => {
  test("USD per million becomes USD per token as a plain decimal string, without float noise or exponent", () => {
    expect(shiftedDecimal(2.5, -6)).toBe("0.0000025")
    expect(shiftedDecimal(0.15, -6)).toBe("0.00000015")
    expect(shiftedDecimal(0.3, -6)).toBe("0.0000003")
    expect(shiftedDecimal(3.125, -6)).toBe("0.000003125")
    expect(shiftedDecimal(75, -6)).toBe("0.000075")
    expect(shiftedDecimal(1500, -6)).toBe("0.0015")
    expect(shiftedDecimal(0, -6)).toBe("0")
    expect(shiftedDecimal(1e-7, -6)).toBe("0.0000000000001")
    expect(shiftedDecimal(0.0001, 0)).toBe("0.0001")
    expect(shiftedDecimal(12, 0)).toBe("12")
  })
})

describe("GET /models: a model as the config describes it", () => {
  test("every key the config gives is shown; pricing and top_provider are the cheapest endpoint's", () => {
    const full = list().data[0]
    expect(full).toEqual({
      id: "acme/full",
      canonical_slug: "acme/full-2026-01-21",
      name: "Acme Full",
      created: NOW / 1000 - 10 * 86_400,
      description: "Everything the config can say",
      context_length: 200_000,
      architecture: {
        modality: "text+image+audio->text",
        input_modalities: ["text", "image", "audio"],
        output_modalities: ["text"],
        tokenizer: "GPT",
        instruct_type: "chatml",
      },
      pricing: {
        prompt: "0.0000025",
        completion: "0.00001",
        request: "0.0001",
        internal_reasoning: "0.00001",
        input_cache_read: "0.00000025",
        input_cache_write: "0.000003125",
      },
      top_provider: { context_length: 128_000, max_completion_tokens: 16_384, is_moderated: true },
      per_request_limits: null,
      // The union of both endpoints' parameters.
      supported_parameters: [
        "temperature",
        "top_p",
        "max_tokens",
        "response_format",
        "structured_outputs",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
      ],
      default_parameters: { temperature: 0.7, top_p: 0.9 },
      supported_voices: null,
      hugging_face_id: "acme/full",
      knowledge_cutoff: "2025-06-30",
      expiration_date: "2027-01-01",
      links: { details: "/v1/models/acme/full/endpoints" },
    })
  })

  test("what the config lacks is null (or absent where the SDK reads no null), never invented", () => {
    const min = list().data[1]
    expect(min).toEqual({
      id: "bare/min",
      canonical_slug: "bare/min",
      name: "bare/min",
      created: 0,
      description: "",
      context_length: 8_000,
      architecture: { modality: "text->text", input_modalities: ["text"], output_modalities: ["text"], instruct_type: null },
      pricing: { prompt: "0.00000015", completion: "0.0000006", internal_reasoning: "0.0000006" },
      top_provider: { context_length: 8_000, max_completion_tokens: null, is_moderated: false },
      per_request_limits: null,
      supported_parameters: ["temperature", "top_p", "max_tokens"],
      default_parameters: null,
      supported_voices: null,
      hugging_face_id: null,
      knowledge_cutoff: null,
      expiration_date: null,
      links: { details: "/v1/models/bare/min/endpoints" },
    })
    expect("tokenizer" in min.architecture).toBe(false)
  })

  test("an endpoint's supported_parameters from the config replace the derived list (in the SDK's order)", () => {
    expect(list().data[2].supported_parameters).toEqual(["temperature", "seed"])
  })

  test("images declared by an endpoint make image an input modality", () => {
    const catalog = buildCatalog(providers, [model("x/vision", {}, ep("bare", 1, 1, { supports: ["images", "files"] }))])
    const directory = makeModelDirectory(catalog, makeRouter(catalog))
    const data = Either.getOrThrow(directory.list({})).data[0]
    expect(data.architecture.input_modalities).toEqual(["text", "image", "file"])
    expect(data.architecture.modality).toBe("text+image+file->text")
  })
})

describe("GET /models: filters", () => {
  test("no parameters: the whole catalog in catalog order, total_count, no next page", () => {
    const all = list()
    expect(all.data.map((m) => m.id)).toEqual(["acme/full", "bare/min", "bare/old"])
    expect(all.total_count).toBe(3)
    expect(all.links.next).toBeNull()
  })

  test("category matches the config's categories", () => {
    expect(ids({ category: "programming" })).toEqual(["acme/full"])
    expect(ids({ category: "legal" })).toEqual([])
  })

  test("supported_parameters: a model must support every listed parameter", () => {
    expect(ids({ supported_parameters: "tools,reasoning" })).toEqual(["acme/full"])
    expect(ids({ supported_parameters: "temperature" })).toEqual(["acme/full", "bare/min", "bare/old"])
    expect(ids({ supported_parameters: "seed" })).toEqual(["bare/old"])
  })

  test("input_modalities: every listed; output_modalities: any listed, text by default, all keeps every model", () => {
    expect(ids({ input_modalities: "image" })).toEqual(["acme/full"])
    expect(ids({ input_modalities: "text,audio" })).toEqual(["acme/full"])
    expect(ids({ output_modalities: "image" })).toEqual([])
    expect(ids({ output_modalities: "image,text" })).toHaveLength(3)
    expect(ids({ output_modalities: "all" })).toHaveLength(3)
  })

  test("q searches id and name, any case", () => {
    expect(ids({ q: "FULL" })).toEqual(["acme/full"])
    expect(ids({ q: "bare/" })).toEqual(["bare/min", "bare/old"])
  })

  test("context, prices ($/M of the listed pricing), arch, authors, providers, zdr", () => {
    expect(ids({ context: 32_000 })).toEqual(["acme/full", "bare/old"])
    expect(ids({ max_price: 0.5 })).toEqual(["bare/min", "bare/old"])
    expect(ids({ min_price: 0.5 })).toEqual(["acme/full", "bare/old"])
    expect(ids({ min_output_price: 1, max_output_price: 10 })).toEqual(["acme/full"])
    expect(ids({ arch: "gpt" })).toEqual(["acme/full"])
    expect(ids({ model_authors: "bare" })).toEqual(["bare/min", "bare/old"])
    expect(ids({ providers: "Acme Cloud" })).toEqual(["acme/full"])
    expect(ids({ providers: "acme,nobody" })).toEqual(["acme/full"])
    expect(ids({ zdr: "true" })).toEqual(["acme/full"])
  })

  test("age in days counts from created; a model without created is left out by age filters", () => {
    expect(ids({ max_age_days: 30 })).toEqual(["acme/full"])
    expect(ids({ min_age_days: 30 })).toEqual(["bare/old"])
  })

  test("filters the catalog has no data for are refused by name, never ignored", () => {
    expect(refusal({ region: "eu" })).toBe("Invalid request: region: not available on this gateway (the catalog does not record data regions)")
    expect(refusal({ min_tool_success_rate: "0.5" })).toContain("min_tool_success_rate: not available on this gateway")
  })

  test("distillable keeps (true) or leaves out (false) the models whose config says distillable", () => {
    expect(ids({ distillable: "true" })).toEqual(["acme/full"])
    expect(ids({ distillable: "false" })).toEqual(["bare/min", "bare/old"])
  })

  test("benchmark index filters read the config score × 100; a model without that score is left out", () => {
    expect(ids({ min_coding_index: 60 })).toEqual(["acme/full"])
    expect(ids({ max_coding_index: 60 })).toEqual(["bare/old"])
    expect(ids({ min_coding_index: 50, max_coding_index: 90 })).toEqual(["acme/full", "bare/old"])
    expect(ids({ min_intelligence_index: 0 })).toEqual(["acme/full"])
    expect(ids({ max_agentic_index: 100 })).toEqual(["bare/old"])
  })
})

describe("GET /models: sorts and pages", () => {
  test("newest, context and price sorts", () => {
    expect(ids({ sort: "newest" })).toEqual(["acme/full", "bare/old", "bare/min"])
    expect(ids({ sort: "context-high-to-low" })).toEqual(["acme/full", "bare/old", "bare/min"])
    expect(ids({ sort: "pricing-low-to-high" })).toEqual(["bare/min", "bare/old", "acme/full"])
    expect(ids({ sort: "pricing-high-to-low" })).toEqual(["acme/full", "bare/old", "bare/min"])
  })

  test("throughput and latency sorts read the router's measurements; unmeasured models come last", () => {
    const { router, directory, catalog } = setup()
    const plan = (id: string): RoutePlan => ({ requested: id, strategy: "direct", candidates: [], stickyScope: undefined })
    const catalogModel = (id: string) => catalog.model(id)!
    router.recordSuccess(plan("bare/old"), catalogModel("bare/old").endpoints[0], { ttftMs: 50, outputTokens: 100, generationMs: 1_000 })
    router.recordSuccess(plan("bare/min"), catalogModel("bare/min").endpoints[0], { ttftMs: 500, outputTokens: 100, generationMs: 500 })
    const sortedBy = (sort: string) => Either.getOrThrow(directory.list({ sort })).data.map((m) => m.id)
    expect(sortedBy("throughput-high-to-low")).toEqual(["bare/min", "bare/old", "acme/full"])
    expect(sortedBy("latency-low-to-high")).toEqual(["bare/old", "bare/min", "acme/full"])
  })

  test("benchmark sorts read the config scores, highest first; models without the score last, in catalog order", () => {
    expect(ids({ sort: "coding-high-to-low" })).toEqual(["acme/full", "bare/old", "bare/min"])
    expect(ids({ sort: "intelligence-high-to-low" })).toEqual(["acme/full", "bare/min", "bare/old"])
    expect(ids({ sort: "agentic-high-to-low" })).toEqual(["bare/old", "acme/full", "bare/min"])
    expect(ids({ sort: "design-arena-elo-high-to-low" })).toEqual(["bare/old", "acme/full", "bare/min"])
  })

  test("most-popular sorts by requests served in 30 days, top-weekly by tokens in 7, from the usage snapshot", () => {
    const { directory } = setup()
    const usage = { requests30d: new Map([["bare/old", 5], ["bare/min", 2]]), tokens7d: new Map([["bare/min", 100], ["acme/full", 40]]) }
    const sortedBy = (sort: string) => Either.getOrThrow(directory.list({ sort }, usage)).data.map((m) => m.id)
    expect(sortedBy("most-popular")).toEqual(["bare/old", "bare/min", "acme/full"])
    expect(sortedBy("top-weekly")).toEqual(["bare/min", "acme/full", "bare/old"])
  })

  test("an unknown sort is refused, naming it and every sort there is", () => {
    expect(refusal({ sort: "random" })).toBe(
      'Invalid request: sort: "random" is not one of newest, pricing-low-to-high, pricing-high-to-low, context-high-to-low, throughput-high-to-low, latency-low-to-high, most-popular, top-weekly, intelligence-high-to-low, coding-high-to-low, agentic-high-to-low, design-arena-elo-high-to-low',
    )
  })

  test("offset and limit page the filtered list; links.next asks for the next page with the same filters", () => {
    const first = list({ limit: 2, offset: 0, q: "a" })
    expect(first.data.map((m) => m.id)).toEqual(["acme/full", "bare/min"])
    expect(first.total_count).toBe(3)
    expect(first.links.next).toBe("/v1/models?limit=2&offset=2&q=a")
    const second = list({ limit: 2, offset: 2, q: "a" })
    expect(second.data.map((m) => m.id)).toEqual(["bare/old"])
    expect(second.links.next).toBeNull()
    expect(list({ offset: 5 }).data).toEqual([])
  })
})

describe("GET /models/{author}/{slug}/endpoints", () => {
  test("each endpoint with its provider's display name, its own pricing, context, quantization and flags", () => {
    const { directory } = setup()
    const answer = Either.getOrThrow(directory.endpoints("acme", "full")).data
    expect(answer.id).toBe("acme/full")
    expect(answer.architecture.tokenizer).toBe("GPT")
    const [bare, acme] = answer.endpoints
    expect(acme).toMatchObject({
      name: "Acme Cloud | acme/full",
      model_id: "acme/full-2026-01-21",
      model_name: "Acme Full",
      provider_name: "Acme Cloud",
      tag: "acme",
      context_length: 128_000,
      max_completion_tokens: 16_384,
      max_prompt_tokens: 100_000,
      quantization: "fp8",
      supports_implicit_caching: true,
      supports_tool_choice: { auto: false, none: false, required: false, function: false },
      status: 0,
      uptime_last_5m: null,
      latency_last_30m: null,
    })
    expect(acme.pricing.input_cache_read).toBe("0.00000025")
    expect(bare).toMatchObject({ provider_name: "bare", tag: "bare", quantization: null, max_prompt_tokens: null, supports_implicit_caching: false })
    expect(bare.supports_tool_choice).toEqual({ auto: true, none: true, required: true, function: true })
    expect(bare.pricing).toEqual({ prompt: "0.000003", completion: "0.000015", internal_reasoning: "0.000015" })
  })

  test("the router's outcomes: uptime counts endpoint failures (not rate limits), status follows the cooldown", () => {
    const { router, directory, catalog } = setup()
    const endpoint = catalog.model("bare/min")!.endpoints[0]
    const plan: RoutePlan = { requested: "bare/min", strategy: "direct", candidates: [endpoint], stickyScope: undefined }
    const stats = () => Either.getOrThrow(directory.endpoints("bare", "min")).data.endpoints[0]
    router.recordSuccess(plan, endpoint, { ttftMs: 120, outputTokens: 50, generationMs: 500 })
    router.recordFailure(endpoint, "rate_limited")
    expect(stats()).toMatchObject({ uptime_last_5m: 100, status: -1 })
    router.recordFailure(endpoint, "server")
    expect(stats()).toMatchObject({ uptime_last_5m: 50, uptime_last_30m: 50, uptime_last_1d: 50, status: -1 })
    // A request's own fault says nothing about the endpoint.
    router.recordFailure(endpoint, "bad_request")
    expect(stats().uptime_last_5m).toBe(50)
    router.recordFailure(endpoint, "overloaded")
    expect(stats()).toMatchObject({ status: -2 })
    expect(stats().latency_last_30m).toEqual({ p50: 120, p75: 120, p90: 120, p99: 120 })
    expect(stats().throughput_last_30m).toEqual({ p50: 100, p75: 100, p90: 100, p99: 100 })
    router.recordSuccess(plan, endpoint, { ttftMs: 80, outputTokens: 0, generationMs: 1 })
    expect(stats()).toMatchObject({ status: 0, uptime_last_5m: 50 })
  })

  test("an unknown model is a 404 naming it", () => {
    const result = setup().directory.endpoints("acme", "nope")
    expect(Either.isLeft(result) && result.left.status).toBe(404)
    expect(Either.isLeft(result) && result.left.message).toBe(`Model "acme/nope" does not exist in this gateway's catalog`)
  })
})

describe("GET /models/count and GET /providers", () => {
  test("count is the number of models with the output modality (text by default)", () => {
    const { directory } = setup()
    expect(directory.count({})).toEqual({ data: { count: 3 } })
    expect(directory.count({ output_modalities: "image" })).toEqual({ data: { count: 0 } })
    expect(directory.count({ output_modalities: "all" })).toEqual({ data: { count: 3 } })
  })

  test("providers in config order, with the config's names and pages, null where it has none", () => {
    expect(setup().directory.providers()).toEqual({
      data: [
        {
          name: "Acme Cloud",
          slug: "acme",
          privacy_policy_url: "https://acme.example/privacy",
          terms_of_service_url: "https://acme.example/terms",
          status_page_url: "https://status.acme.example",
          headquarters: "US",
          datacenters: ["US", "DE"],
        },
        {
          name: "bare",
          slug: "bare",
          privacy_policy_url: null,
          terms_of_service_url: null,
          status_page_url: null,
          headquarters: null,
          datacenters: null,
        },
      ],
    })
  })
})
