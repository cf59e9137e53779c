/**
 * The models and providers endpoints over HTTP: any key reads them, every field of the shapes is
 * present (null where the catalog has nothing), bad query parameters are 400s naming the
 * parameter, and the endpoints listing shows the router's statistics of the requests served.
 */
import { describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const catalog: ConfigFile = {
  ...demoCatalog,
  providers: [...demoCatalog.providers, { id: "stats-a", kind: "fake", name: "Stats A" }, { id: "stats-b", kind: "fake" }],
  models: [
    ...demoCatalog.models,
    {
      id: "test/stats",
      context_length: 1_000,
      endpoints: [{ provider: "stats-a", upstream_model: "echo[ttft:40][slow:5]", pricing: { prompt: 1, completion: 1 } }],
    },
    {
      id: "test/down",
      context_length: 1_000,
      endpoints: [{ provider: "stats-b", upstream_model: "echo[fail:503]", pricing: { prompt: 1, completion: 1 } }],
    },
  ],
}

/** The models GET /v1/models lists by default: text ones (embedding and rerank models have their own listing). */
const textModels = catalog.models.filter((m) => m.kind === undefined || m.kind === "chat")

const gw = useInProcessGateway({ catalog })

const MODEL_KEYS = [
  "id",
  "canonical_slug",
  "name",
  "created",
  "description",
  "context_length",
  "architecture",
  "pricing",
  "top_provider",
  "per_request_limits",
  "supported_parameters",
  "default_parameters",
  "supported_voices",
  "hugging_face_id",
  "knowledge_cutoff",
  "expiration_date",
  "links",
]

const ENDPOINT_KEYS = [
  "name",
  "model_id",
  "model_name",
  "provider_name",
  "tag",
  "context_length",
  "max_completion_tokens",
  "max_prompt_tokens",
  "pricing",
  "quantization",
  "supported_parameters",
  "supports_implicit_caching",
  "supports_tool_choice",
  "supports_voice_cloning",
  "status",
  "uptime_last_5m",
  "uptime_last_30m",
  "uptime_last_1d",
  "latency_last_30m",
  "throughput_last_30m",
]

interface Json {
  readonly [k: string]: unknown
}

const get = async (path: string, key?: string | null) => {
  const res = await gw().fetch(path, { key })
  return { status: res.status, body: (await res.json()) as Json }
}

const inferenceKey = async () => {
  const res = await gw().fetch("/v1/keys", { method: "POST", json: { name: "reader" } })
  return ((await res.json()) as { key: string }).key
}

interface EndpointJson {
  readonly provider_name: string
  readonly status: number
  readonly uptime_last_5m: number | null
  readonly uptime_last_30m: number | null
  readonly uptime_last_1d: number | null
  readonly latency_last_30m: { p50: number; p75: number; p90: number; p99: number } | null
  readonly throughput_last_30m: { p50: number } | null
}

const endpointsOf = async (id: string): Promise<ReadonlyArray<EndpointJson>> => {
  const { status, body } = await get(`/v1/models/${id}/endpoints`)
  expect(status).toBe(200)
  return (body.data as { endpoints: ReadonlyArray<EndpointJson> }).endpoints
}

describe("GET /v1/models", () => {
  test("lists the catalog with every field of a model present (null where the catalog has nothing)", async () => {
    const { status, body } = await get("/v1/models")
    expect(status).toBe(200)
    const data = body.data as ReadonlyArray<Json>
    expect(data.map((m) => m.id)).toEqual([...textModels.map((m) => m.id)])
    expect(body.total_count).toBe(textModels.length)
    expect(body.links).toEqual({ next: null })
    for (const model of data) {
      for (const key of MODEL_KEYS) expect(model).toHaveProperty(key)
      expect(model.per_request_limits).toBeNull()
      const architecture = model.architecture as Json
      for (const key of ["modality", "input_modalities", "output_modalities", "instruct_type"]) expect(architecture).toHaveProperty(key)
      const pricing = model.pricing as Json
      expect(typeof pricing.prompt).toBe("string")
      expect(typeof pricing.completion).toBe("string")
      const top = model.top_provider as Json
      for (const key of ["context_length", "max_completion_tokens", "is_moderated"]) expect(top).toHaveProperty(key)
    }
  })

  test("the demo catalog's listing keys are shown: description, created, categories, architecture", async () => {
    const echo = ((await get("/v1/models")).body.data as ReadonlyArray<Json>)[0]
    expect(echo.id).toBe("demo/echo")
    const listed = demoCatalog.models.find((m) => m.id === "demo/echo")
    expect(echo.description).toBe(listed?.description as string)
    expect((echo.description as string).length).toBeGreaterThan(0)
    expect(echo.created).toBe(listed?.created as number)
    expect(echo.created).toBeGreaterThan(0)
    expect((echo.architecture as Json).instruct_type).toBeNull()
    expect(echo.default_parameters).toEqual({ temperature: 1 })
    const programming = await get("/v1/models?category=programming")
    expect((programming.body.data as ReadonlyArray<Json>).map((m) => m.id)).toEqual(["demo/echo"])
  })

  test("filters and pages: supported_parameters, limit and offset, links.next", async () => {
    const tools = await get("/v1/models?supported_parameters=tools,tool_choice")
    expect((tools.body.data as ReadonlyArray<Json>).map((m) => m.id)).toEqual(["demo/echo"])
    const page = await get("/v1/models?limit=2&offset=1")
    expect((page.body.data as ReadonlyArray<Json>).map((m) => m.id)).toEqual(["demo/free", "demo/fallback"])
    expect(page.body.total_count).toBe(textModels.length)
    expect(page.body.links).toEqual({ next: "/v1/models?offset=3&limit=2" })
  })

  test("an unknown or invalid query parameter is a 400 naming it", async () => {
    expect(await expectError(await gw().fetch("/v1/models?supported=tools"), 400)).toBe("Invalid request: supported: unknown key")
    expect(await expectError(await gw().fetch("/v1/models?limit=5000"), 400)).toBe("Invalid request: limit: must be an integer from 1 to 1000")
    expect(await expectError(await gw().fetch("/v1/models?offset=-1"), 400)).toBe("Invalid request: offset: must be an integer of at least 0")
    expect(await expectError(await gw().fetch("/v1/models?category=cooking"), 400)).toStartWith("Invalid request: category: ")
    expect(await expectError(await gw().fetch("/v1/models?supported_parameters=tools,telepathy"), 400)).toStartWith(
      'Invalid request: supported_parameters: "telepathy" is not one of temperature, ',
    )
    expect(await expectError(await gw().fetch("/v1/models?min_price=cheap"), 400)).toBe(
      "Invalid request: min_price: must be a number of USD per million tokens, at least 0",
    )
    expect(await expectError(await gw().fetch("/v1/models?region=eu"), 400)).toBe(
      "Invalid request: region: not available on this gateway (the catalog does not record data regions)",
    )
    expect(await expectError(await gw().fetch("/v1/models?sort=top-monthly"), 400)).toContain('sort: "top-monthly" is not one of newest')
    expect(await expectError(await gw().fetch("/v1/models?distillable=yes"), 400)).toStartWith("Invalid request: distillable: ")
    expect(await expectError(await gw().fetch("/v1/models?min_coding_index=101"), 400)).toBe(
      "Invalid request: min_coding_index: must be a number from 0 to 100 (a config score × 100)",
    )
  })
})

describe("GET /v1/models/count, /v1/model/{author}/{slug}, /v1/providers", () => {
  test("count counts the text models; an unknown parameter is a 400", async () => {
    expect((await get("/v1/models/count")).body).toEqual({ data: { count: textModels.length } })
    expect((await get("/v1/models/count?output_modalities=image")).body).toEqual({ data: { count: 0 } })
    expect(await expectError(await gw().fetch("/v1/models/count?limit=1"), 400)).toBe("Invalid request: limit: unknown key")
  })

  test("one model by author and slug; an unknown one is a 404", async () => {
    const { status, body } = await get("/v1/model/demo/free")
    expect(status).toBe(200)
    expect((body.data as Json).id).toBe("demo/free")
    expect(await expectError(await gw().fetch("/v1/model/demo/missing"), 404)).toBe(`Model "demo/missing" does not exist in this gateway's catalog`)
  })

  test("providers: every catalog provider with name, slug and pages (null where the config has none)", async () => {
    const { status, body } = await get("/v1/providers")
    expect(status).toBe(200)
    const data = body.data as ReadonlyArray<Json>
    expect(data.map((p) => p.slug)).toEqual(catalog.providers.map((p) => p.id))
    const fake = data[0]
    expect(fake.name).toBe("Offline fake")
    expect(typeof fake.privacy_policy_url).toBe("string")
    expect(data.find((p) => p.slug === "stats-b")).toEqual({
      name: "stats-b",
      slug: "stats-b",
      privacy_policy_url: null,
      terms_of_service_url: null,
      status_page_url: null,
      headquarters: null,
      datacenters: null,
    })
    expect(await expectError(await gw().fetch("/v1/providers?x=1"), 400)).toBe("Invalid request: x: unknown key")
  })
})

describe("GET /v1/models/{author}/{slug}/endpoints", () => {
  test("every field of an endpoint is present; an unknown model is a 404", async () => {
    const { body } = await get("/v1/models/demo/echo/endpoints")
    const data = body.data as Json
    for (const key of ["id", "name", "created", "description", "architecture", "endpoints"]) expect(data).toHaveProperty(key)
    const endpoints = data.endpoints as ReadonlyArray<Json>
    expect(endpoints.map((e) => e.tag)).toEqual(["fake", "fake-backup"])
    for (const endpoint of endpoints) for (const key of ENDPOINT_KEYS) expect(endpoint).toHaveProperty(key)
    expect(await expectError(await gw().fetch("/v1/models/demo/missing/endpoints"), 404)).toBe(
      `Model "demo/missing" does not exist in this gateway's catalog`,
    )
  })

  test("after requests through the fake provider: uptime, status and 30-minute percentiles from the router", async () => {
    const before = (await endpointsOf("test/stats"))[0]
    expect(before).toMatchObject({ provider_name: "Stats A", status: 0, uptime_last_5m: null, latency_last_30m: null, throughput_last_30m: null })
    for (let i = 0; i < 3; i++) {
      const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "test/stats", input: "count these words please", stream: true } })
      expect(res.status).toBe(200)
      await res.text()
    }
    const after = (await endpointsOf("test/stats"))[0]
    expect(after).toMatchObject({ status: 0, uptime_last_5m: 100, uptime_last_30m: 100, uptime_last_1d: 100 })
    // The fake waits 40 ms before its first token, then 5 ms between words (so the output takes time: a throughput).
    expect(after.latency_last_30m?.p50).toBeGreaterThanOrEqual(35)
    expect(after.latency_last_30m!.p99).toBeGreaterThanOrEqual(after.latency_last_30m!.p50)
    expect(after.throughput_last_30m?.p50).toBeGreaterThan(0)

    const failed = await gw().fetch("/v1/responses", { method: "POST", json: { model: "test/down", input: "hello" } })
    // The endpoint's 503 is a server error: 502 (docs/providers.md, "Errors").
    expect(failed.status).toBe(502)
    const down = (await endpointsOf("test/down"))[0]
    expect(down).toMatchObject({ status: -1, uptime_last_5m: 0, uptime_last_30m: 0, uptime_last_1d: 0, latency_last_30m: null })
  })
})

describe("who may read the listings", () => {
  const paths = ["/v1/models", "/v1/models/count", "/v1/model/demo/echo", "/v1/models/demo/echo/endpoints", "/v1/providers"]

  test("an inference key reads all five", async () => {
    const key = await inferenceKey()
    for (const path of paths) expect((await get(path, key)).status).toBe(200)
  })

  test("no key or a wrong key is a 401", async () => {
    for (const path of paths) {
      await expectError(await gw().fetch(path, { key: null }), 401)
      await expectError(await gw().fetch(path, { key: "sk-gw-v1-wrong" }), 401)
    }
  })

  test("a method other than GET is a 405", async () => {
    await expectError(await gw().fetch("/v1/models", { method: "POST", json: {} }), 405)
  })
})
