/**
 * The embedding functions of the gemini, vertex and azure-openai adapters against the fake
 * clouds: where each call goes and with what, the vectors in the inputs' order (across the
 * batches a large input is split into, at each upstream's per-call limit), the prompt tokens,
 * and errors as the chat calls map them.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockClouds, mockVector, startMockClouds } from "../../scripts/mock-clouds"
import { embed as azureEmbed } from "../../src/providers/azure-openai/embed"
import { estimateTokens } from "../../src/domain/pricing"
import { embed as geminiEmbed } from "../../src/providers/gemini/embed"
import type { ProviderConfig } from "../../src/providers/types"
import { embed as vertexEmbed } from "../../src/providers/vertex/embed"
import { providerErrorOf } from "./helpers"
import { makeServiceAccount, type ServiceAccount } from "./service-account"

let clouds: MockClouds
let account: ServiceAccount
beforeAll(async () => {
  account = await makeServiceAccount()
  clouds = await startMockClouds({ geminiKey: "gm-key", azureKey: "az-key", publicKey: account.publicKey })
  // An RSA key is made: slow on a loaded machine.
}, 30_000)
afterAll(async () => {
  await clouds.stop()
})
beforeEach(() => clouds.reset())

const signal = () => new AbortController().signal
const texts = (n: number) => Array.from({ length: n }, (_, i) => `input number ${i} ${"x".repeat(i % 13)}`)

describe("gemini embed (batchEmbedContents)", () => {
  const gemini = (headers: Record<string, string> = {}): ProviderConfig => ({ id: "gem", kind: "gemini", base_url: `${clouds.url}/v1beta`, headers })

  test("one call for the batch, each input a request of the model with the dimensions; tokens estimated from the text", async () => {
    const inputs = ["hello world", "second"]
    const out = await geminiEmbed("text-embedding-004", inputs, 8, signal(), { config: gemini(), apiKey: "gm-key" })
    expect(out.vectors).toEqual(inputs.map((t) => mockVector(t, 8)))
    expect(out.promptTokens).toBe(estimateTokens(11) + estimateTokens(6))
    expect(clouds.requests).toHaveLength(1)
    expect(clouds.requests[0]?.path).toBe("/v1beta/models/text-embedding-004:batchEmbedContents")
    expect(clouds.requests[0]?.headers["x-goog-api-key"]).toBe("gm-key")
    expect((clouds.requests[0]?.body as { requests: Array<unknown> } | undefined)?.requests[1]).toEqual({
      model: "models/text-embedding-004",
      content: { parts: [{ text: "second" }] },
      outputDimensionality: 8,
    })
  })

  test("250 inputs go as calls of 100, 100 and 50, the vectors joined in order", async () => {
    const inputs = texts(250)
    const out = await geminiEmbed("text-embedding-004", inputs, undefined, signal(), { config: gemini(), apiKey: "gm-key" })
    expect(out.vectors).toEqual(inputs.map((t) => mockVector(t)))
    expect(clouds.requests.map((r) => (r.body as { requests: Array<unknown> }).requests.length).sort()).toEqual([100, 100, 50].sort())
  })

  test("a refused key is an auth failure", async () => {
    expect((await providerErrorOf(geminiEmbed("m", ["a"], undefined, signal(), { config: gemini(), apiKey: "wrong" }))).kind).toBe("auth")
  })
})

describe("vertex embed (:predict)", () => {
  let ids = 0
  const vertex = (): ProviderConfig => ({
    id: `vtx-embed-${++ids}`,
    kind: "vertex",
    base_url: `${clouds.url}/v1`,
    project: "proj",
    location: "europe-west4",
    credentials_file: account.file,
    token_url: `${clouds.url}/token`,
  })

  test("text-embedding models: instances of the inputs with the dimensions, the tokens as Vertex counts them", async () => {
    const inputs = ["one two three", "four"]
    const out = await vertexEmbed("text-embedding-005", inputs, 16, signal(), { config: vertex() })
    expect(out).toEqual({ vectors: inputs.map((t) => mockVector(t, 16)), promptTokens: 4 })
    const sent = clouds.requests[0]
    expect(sent?.path).toBe("/v1/projects/proj/locations/europe-west4/publishers/google/models/text-embedding-005:predict")
    expect(sent?.headers["authorization"]).toBe("Bearer ya29.mock-1")
    expect(sent?.body).toEqual({ instances: [{ content: "one two three" }, { content: "four" }], parameters: { outputDimensionality: 16 } })
  })

  test("gemini-embedding models take one instance a call: three inputs are three calls, in order, one token exchange", async () => {
    const inputs = ["alpha", "beta gamma", "delta"]
    const out = await vertexEmbed("gemini-embedding-001", inputs, undefined, signal(), { config: vertex() })
    expect(out).toEqual({ vectors: inputs.map((t) => mockVector(t)), promptTokens: 4 })
    expect(clouds.requests).toHaveLength(3)
    expect(clouds.exchanges).toHaveLength(1)
  })

  test("an answer without token counts leaves the count unknown (estimated by the gateway), never 0", async () => {
    const out = await vertexEmbed("text-embedding-005-uncounted", ["one two"], undefined, signal(), { config: vertex() })
    expect(out.promptTokens).toBeUndefined()
    // A count that is no number is no count either: the vectors still answer.
    const miscounted = await vertexEmbed("text-embedding-005-miscounted", ["one two"], undefined, signal(), { config: vertex() })
    expect([miscounted.vectors.length, miscounted.promptTokens]).toEqual([1, undefined])
  })

  test("an endpoint of Anthropic's models does not embed: a bad request, no call", async () => {
    const failure = await providerErrorOf(vertexEmbed("claude", ["a"], undefined, signal(), { config: { ...vertex(), publisher: "anthropic" } }))
    expect(failure.kind).toBe("bad_request")
    expect(clouds.requests).toHaveLength(0)
  })
})

describe("azure-openai embed (/embeddings)", () => {
  const azure = (overrides: Partial<ProviderConfig> = {}): ProviderConfig => ({ id: "az", kind: "azure-openai", base_url: clouds.url, api_key_env: "AZ", ...overrides })

  test("deployments path with api-version: the inputs and dimensions, usage's prompt tokens", async () => {
    const inputs = ["a b", "c"]
    const out = await azureEmbed("emb-dep", inputs, 3, signal(), { config: azure({ api_version: "2024-10-21" }), apiKey: "az-key" })
    expect(out).toEqual({ vectors: inputs.map((t) => mockVector(t, 3)), promptTokens: 3 })
    expect(clouds.requests[0]?.path).toBe("/openai/deployments/emb-dep/embeddings?api-version=2024-10-21")
    expect(clouds.requests[0]?.headers["api-key"]).toBe("az-key")
    expect(clouds.requests[0]?.body).toEqual({ model: "emb-dep", input: inputs, dimensions: 3 })
  })

  test("an answer without usage leaves the count unknown (estimated by the gateway), never 0; so do two batches of which one lacks it", async () => {
    const out = await azureEmbed("emb-dep-uncounted", ["a b"], undefined, signal(), { config: azure({ api_version: "2024-10-21" }), apiKey: "az-key" })
    expect(out.promptTokens).toBeUndefined()
    const miscounted = await azureEmbed("emb-dep-miscounted", ["a b"], undefined, signal(), { config: azure({ api_version: "2024-10-21" }), apiKey: "az-key" })
    expect([miscounted.vectors.length, miscounted.promptTokens]).toEqual([1, undefined])
    const { inBatches } = await import("../../src/providers/embed-call.js")
    const joined = await inBatches(["a", "b"], 1, async (slice) => ({ vectors: [[1]], promptTokens: slice[0] === "a" ? 2 : undefined }))
    expect(joined.promptTokens).toBeUndefined()
  })

  test("v1 path: the deployment as the model; 2049 inputs are two calls joined in order", async () => {
    const inputs = texts(2049)
    const out = await azureEmbed("emb-dep", inputs, undefined, signal(), { config: azure(), apiKey: "az-key" })
    expect(out.vectors).toEqual(inputs.map((t) => mockVector(t)))
    expect(clouds.requests.map((r) => r.path)).toEqual(["/openai/v1/embeddings", "/openai/v1/embeddings"])
  })

  test("a refused key is an auth failure", async () => {
    expect((await providerErrorOf(azureEmbed("emb-dep", ["a"], undefined, signal(), { config: azure(), apiKey: "nope" }))).kind).toBe("auth")
  })
})

describe("embed and the caller's signal", () => {
  test("an aborted signal makes no call", async () => {
    const controller = new AbortController()
    controller.abort()
    const failure = await providerErrorOf(
      azureEmbed("emb-dep", ["a"], undefined, controller.signal, { config: { id: "az", kind: "azure-openai", base_url: clouds.url }, apiKey: "az-key" }),
    )
    expect(failure.kind).toBe("connection")
    expect(clouds.requests).toHaveLength(0)
  })
})
