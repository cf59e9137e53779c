/**
 * POST /v1/embeddings served by the cloud kinds (gemini, vertex, azure-openai) through the
 * gateway, with the official `openai` SDK (float and base64): the vectors in order, the call each
 * upstream got, usage with its cost; token-id inputs are a 400 for these text-only upstreams.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type OpenAI from "openai"
import { type MockClouds, mockVector, startMockClouds } from "../../scripts/mock-clouds"
import type { ConfigFile } from "../../src/config/file.js"
import { makeServiceAccount, type ServiceAccount } from "../providers/service-account"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { openaiAt } from "../support/sdk.js"

let clouds: MockClouds
let account: ServiceAccount
let gw: TestGateway & { stop: () => Promise<void> }
let client: OpenAI

beforeAll(async () => {
  account = await makeServiceAccount()
  clouds = await startMockClouds({ geminiKey: "gm-key", azureKey: "az-key", publicKey: account.publicKey })
  process.env["GW_TEST_GEMINI_KEY"] = "gm-key"
  process.env["GW_TEST_AZURE_KEY"] = "az-key"
  const embedding = (id: string, provider: string, upstream: string) => ({
    id,
    kind: "embedding",
    context_length: 8192,
    endpoints: [{ provider, upstream_model: upstream, pricing: { prompt: 0.1, completion: 0 } }],
  })
  const catalog = {
    providers: [
      { id: "gem", kind: "gemini", base_url: `${clouds.url}/v1beta`, api_key_env: "GW_TEST_GEMINI_KEY" },
      { id: "vtx", kind: "vertex", base_url: `${clouds.url}/v1`, project: "p", location: "us-central1", credentials_file: account.file, token_url: `${clouds.url}/token` },
      { id: "az", kind: "azure-openai", base_url: clouds.url, api_key_env: "GW_TEST_AZURE_KEY", api_version: "2024-10-21" },
    ],
    models: [
      embedding("google/text-embedding-004", "gem", "text-embedding-004"),
      embedding("google/text-embedding-005", "vtx", "text-embedding-005"),
      embedding("openai/text-embedding-3-small", "az", "emb-dep"),
    ],
  } as unknown as ConfigFile
  gw = await startTestGateway({ catalog })
  client = openaiAt(gw)
}, 30_000)
afterAll(async () => {
  await gw?.stop()
  await clouds?.stop()
})

describe("embeddings through the cloud kinds", () => {
  for (const [model, path] of [
    ["google/text-embedding-004", "/v1beta/models/text-embedding-004:batchEmbedContents"],
    ["google/text-embedding-005", "/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict"],
    ["openai/text-embedding-3-small", "/openai/deployments/emb-dep/embeddings"],
  ] as const) {
    test(`${model}: the openai SDK gets the vectors in order (float and base64), charged`, async () => {
      clouds.reset()
      const inputs = ["first input", "second input", "third"]
      const floats = await client.embeddings.create({ model, input: inputs, encoding_format: "float" })
      expect(floats.data.map((d) => d.index)).toEqual([0, 1, 2])
      expect(floats.data.map((d) => d.embedding.length)).toEqual(inputs.map((t) => mockVector(t).length))
      for (const [i, d] of floats.data.entries()) {
        const expected = mockVector(inputs[i] as string)
        for (const [j, v] of d.embedding.entries()) expect(v).toBeCloseTo(expected[j] as number, 5)
      }
      expect(floats.usage.prompt_tokens).toBeGreaterThan(0)
      expect((floats.usage as unknown as { cost: number }).cost).toBeGreaterThan(0)
      expect(clouds.requests.some((r) => r.path.split("?")[0] === path)).toBe(true)
      // The SDK's default: base64, decoded by the SDK into the same floats.
      const decoded = await client.embeddings.create({ model, input: inputs })
      expect(decoded.data[1]?.embedding[0]).toBeCloseTo(floats.data[1]?.embedding[0] as number, 5)
    })
  }

  test("token-id inputs are refused for a text-only upstream, naming the field", async () => {
    const res = await gw.fetch("/v1/embeddings", { method: "POST", json: { model: "google/text-embedding-004", input: [[1, 2, 3]] } })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("token ids")
  })
})
