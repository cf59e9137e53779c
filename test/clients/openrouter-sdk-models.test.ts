/**
 * The official SDK of this API family (`@openrouter/sdk`, pinned) reading the models and
 * providers endpoints: `models.list` (with its default `offset=0&limit=500` and with filters),
 * `models.count`, `models.get`, `endpoints.list` and `providers.list`. Every answer must pass the
 * SDK's own zod schemas (a missing required key is a `ResponseValidationError`), and refusals
 * come back as the SDK's typed error for their status.
 */
import { describe, expect, test } from "bun:test"
import * as errors from "@openrouter/sdk/models/errors"
import { demoCatalog } from "../../src/config/Config.js"
import { useGateway } from "../support/gateway.js"
import { caught, expectTyped, openRouterAt, validated } from "../support/sdk.js"

/** The models the listing shows by default: text ones (embedding and rerank models have GET /v1/embeddings/models). */
const textModels = demoCatalog.models.filter((m) => m.kind === undefined || m.kind === "chat")
const gw = useGateway()

const sdk = (apiKey: string = gw().adminKey) => openRouterAt(gw(), apiKey)

const inferenceKey = async () => (await sdk().apiKeys.create({ requestBody: { name: "models reader" } })).key

describe("models", () => {
  test("list validates, with the SDK's default page (offset 0, limit 500): the whole catalog", async () => {
    const page = await validated(sdk().models.list())
    expect(page.result.data.map((m) => m.id)).toEqual(textModels.map((m) => m.id))
    expect(page.result.totalCount).toBe(textModels.length)
    expect(page.result.links.next).toBeNull()
    const echo = page.result.data[0]
    expect(echo.pricing.prompt).toBe("0.000001")
    expect(echo.topProvider.maxCompletionTokens).toBe(4096)
    expect(echo.architecture.outputModalities).toEqual(["text"])
    expect(echo.supportedParameters).toContain("tools")
    expect(echo.defaultParameters).toEqual({ temperature: 1 })
  })

  test("list with filters and a page, for an inference key", async () => {
    const client = sdk(await inferenceKey())
    const tools = await validated(client.models.list({ supportedParameters: "tools", category: "programming" }))
    expect(tools.result.data.map((m) => m.id)).toEqual(["demo/echo"])
    const page = await validated(client.models.list({ limit: 2, offset: 0, sort: "context-high-to-low" }))
    expect(page.result.data.map((m) => m.id)).toEqual(["demo/echo", "demo/free"])
    expect(page.result.links.next).not.toBeNull()
  })

  test("count and get validate", async () => {
    const count = await validated(sdk().models.count())
    expect(count.data.count).toBe(textModels.length)
    const one = await validated(sdk().models.get({ author: "demo", slug: "free" }))
    expect(one.data.id).toBe("demo/free")
    expect(one.data.pricing).toMatchObject({ prompt: "0", completion: "0" })
  })

  test("refusals are typed: a filter the gateway cannot do is BadRequest, an unknown model NotFound, a bad key 401", async () => {
    expectTyped(await caught(sdk().models.list({ region: "eu" })), errors.BadRequestResponseError, 400)
    expectTyped(await caught(sdk().models.get({ author: "demo", slug: "missing" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").models.list()), errors.OpenRouterDefaultError, 401)
  })
})

describe("endpoints and providers", () => {
  test("endpoints.list validates, after a request has given the router something to report", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/free", input: "hello" } })
    expect(res.status).toBe(200)
    const listed = await validated(sdk().endpoints.list({ author: "demo", slug: "free" }))
    expect(listed.data.id).toBe("demo/free")
    const [endpoint] = listed.data.endpoints
    expect(String(endpoint.providerName)).toBe("Offline fake")
    expect(endpoint.tag).toBe("fake")
    expect(endpoint.uptimeLast5m).toBe(100)
    expect(endpoint.latencyLast30m).not.toBeNull()
    expectTyped(await caught(sdk().endpoints.list({ author: "demo", slug: "missing" })), errors.NotFoundResponseError, 404)
  })

  test("providers.list validates", async () => {
    const providers = await validated(sdk(await inferenceKey()).providers.list())
    expect(providers.data.map((p) => p.slug)).toEqual(demoCatalog.providers.map((p) => p.id))
    expect(providers.data[0]).toMatchObject({ name: "Offline fake", privacyPolicyUrl: "https://example.com/privacy" })
  })
})
