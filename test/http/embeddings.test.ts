/**
 * POST /v1/embeddings, GET /v1/embeddings/models and POST /v1/rerank: the official `openai` SDK
 * and the API family's SDK unchanged; bad input refused with a 400 naming the field; usage, cost,
 * the key's limit and the generation record; each upstream kind (the fake, an OpenAI-compatible
 * host, Bedrock's InvokeModel) with fallbacks and batches split at the upstream's per-call limit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { MOCK_ACCESS_KEY_ID, MOCK_SECRET_ACCESS_KEY, type MockBedrock, mockVector, startMockBedrock } from "../../scripts/mock-bedrock.js"
import { type MockEmbeddings, startMockEmbeddings } from "../../scripts/mock-embeddings.js"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { base64Float32, EmbeddingsResponse, RerankResponse } from "../../src/domain/embeddings.js"
import { fakeVector } from "../../src/providers/embeddings/fake.js"
import { Schema } from "effect"
import { expectError, startTestGateway, type TestGateway } from "../support/gateway.js"
import { openaiAt, openRouterAt } from "../support/sdk.js"

let bedrock: MockBedrock
let host: MockEmbeddings
let gw: TestGateway & { stop: () => Promise<void> }

/** Counts an upstream may send that are none (each a JSON value): negative, fractional, null, a string. */
const MISCOUNTS = ["-1000000000", "2.5", "null", '"7"']

const catalogFor = (bedrockUrl: string, hostUrl: string): ConfigFile => ({
  ...demoCatalog,
  providers: [
    ...demoCatalog.providers,
    { id: "oa", kind: "openai-chat", base_url: hostUrl, api_key_env: "EMBED_HOST_KEY" },
    { id: "oa-throttled", kind: "openai-chat", base_url: hostUrl, api_key_env: "EMBED_HOST_KEY", headers: { "x-mock-error": "429" } },
    { id: "aws", kind: "bedrock", base_url: bedrockUrl, region: "us-east-1", access_key_id_env: "EMBED_AWS_KEY", secret_access_key_env: "EMBED_AWS_SECRET" },
    ...MISCOUNTS.map((count, i) => ({ id: `oa-miscount-${i}`, kind: "openai-chat" as const, base_url: hostUrl, api_key_env: "EMBED_HOST_KEY", headers: { "x-mock-count": count } })),
  ],
  models: [
    ...demoCatalog.models,
    { id: "test/oa-embed", kind: "embedding", context_length: 8192, endpoints: [{ provider: "oa", upstream_model: "text-embedding-3-small", pricing: { prompt: 0.02, completion: 0 } }] },
    {
      id: "test/fallback-embed",
      kind: "embedding",
      context_length: 8192,
      endpoints: [
        { provider: "oa-throttled", upstream_model: "text-embedding-3-small", pricing: { prompt: 0.02, completion: 0 } },
        { provider: "oa", upstream_model: "text-embedding-3-large", pricing: { prompt: 0.13, completion: 0 } },
      ],
    },
    { id: "test/batch-embed", kind: "embedding", context_length: 8192, endpoints: [{ provider: "fake", upstream_model: "embed[batch:3]", pricing: { prompt: 1, completion: 0 } }] },
    { id: "test/titan", kind: "embedding", context_length: 8192, endpoints: [{ provider: "aws", upstream_model: "amazon.titan-embed-text-v2:0", pricing: { prompt: 0.02, completion: 0 } }] },
    { id: "test/cohere-embed", kind: "embedding", context_length: 512, endpoints: [{ provider: "aws", upstream_model: "cohere.embed-english-v3", pricing: { prompt: 0.1, completion: 0 } }] },
    { id: "test/oa-rerank", kind: "rerank", context_length: 8192, endpoints: [{ provider: "oa", upstream_model: "rerank-v1", pricing: { prompt: 0, completion: 0, request: 0.001 } }] },
    { id: "test/aws-rerank", kind: "rerank", context_length: 8192, endpoints: [{ provider: "aws", upstream_model: "cohere.rerank-v3-5:0", pricing: { prompt: 0, completion: 0, request: 0.002 } }] },
    ...MISCOUNTS.flatMap((_, i): ConfigFile["models"] => [
      { id: `test/miscount-embed-${i}`, kind: "embedding", context_length: 8192, endpoints: [{ provider: `oa-miscount-${i}`, upstream_model: "e", pricing: { prompt: 1000, completion: 0 } }] },
      { id: `test/miscount-rerank-${i}`, kind: "rerank", context_length: 8192, endpoints: [{ provider: `oa-miscount-${i}`, upstream_model: "r", pricing: { prompt: 0, completion: 0, request: 0.001 } }] },
    ]),
  ],
})

beforeAll(async () => {
  Object.assign(process.env, { EMBED_HOST_KEY: "sk-host-secret", EMBED_AWS_KEY: MOCK_ACCESS_KEY_ID, EMBED_AWS_SECRET: MOCK_SECRET_ACCESS_KEY })
  bedrock = await startMockBedrock()
  host = await startMockEmbeddings()
  gw = await startTestGateway({ catalog: catalogFor(bedrock.url, host.url) })
})
afterAll(async () => {
  await gw?.stop()
  await bedrock?.stop()
  await host?.stop()
})

const post = (path: string, json: unknown, key?: string) => gw.fetch(path, { method: "POST", json, ...(key === undefined ? {} : { key }) })
const openai = () => openaiAt(gw)
const sdk = () => openRouterAt(gw)
const decodeEmbeddings = Schema.decodeUnknownSync(EmbeddingsResponse)
const decodeRerank = Schema.decodeUnknownSync(RerankResponse)
const embed = async (json: Record<string, unknown>, key?: string) => {
  const res = await post("/v1/embeddings", json, key)
  expect(res.status).toBe(200)
  return decodeEmbeddings(await res.json())
}

describe("POST /v1/embeddings through the openai SDK", () => {
  test("embeddings.create with float: one vector per input, in order", async () => {
    const answer = await openai().embeddings.create({ model: "demo/embed", input: ["first", "second"], encoding_format: "float" })
    expect(answer.object).toBe("list")
    expect(answer.data.map((d) => d.index)).toEqual([0, 1])
    expect(answer.data.map((d) => d.embedding)).toEqual([fakeVector("first"), fakeVector("second")])
    expect(answer.usage).toMatchObject({ prompt_tokens: 4, total_tokens: 4 })
  })

  test("embeddings.create without a format asks for base64 and decodes the same float32 values", async () => {
    const answer = await openai().embeddings.create({ model: "demo/embed", input: "hello base64" })
    expect(answer.data[0]?.embedding).toEqual(fakeVector("hello base64"))
  })

  test("base64 is the little-endian float32 bytes of the vector", async () => {
    const answer = await embed({ model: "demo/embed", input: "bytes", encoding_format: "base64" })
    expect(answer.data[0]?.embedding).toBe(base64Float32(fakeVector("bytes")))
    const bytes = Buffer.from(answer.data[0]?.embedding as string, "base64")
    expect(bytes.length).toBe(8 * 4)
    expect(bytes.readFloatLE(0)).toBe(fakeVector("bytes")[0] as number)
  })

  test("dimensions reaches the upstream: the vectors have that many components", async () => {
    const answer = await openai().embeddings.create({ model: "demo/embed", input: "short", dimensions: 3, encoding_format: "float" })
    expect(answer.data[0]?.embedding).toHaveLength(3)
  })

  test("dimensions the fake model does not write are the upstream's 400 naming them, not an answer that grows without end", async () => {
    const message = await expectError(await post("/v1/embeddings", { model: "demo/embed", input: "hi", dimensions: 1_000_000_000 }), 400)
    expect(message).toContain("dimensions 1000000000 for 1 input(s) is more than this model writes")
    expect((await embed({ model: "demo/embed", input: "hi", dimensions: 1024 })).data[0]?.embedding).toHaveLength(1024)
  })

  test("token id arrays are embedded as inputs of their own", async () => {
    const answer = await embed({ model: "demo/embed", input: [[1, 2, 3], [4, 5]] })
    expect(answer.data.map((d) => d.embedding)).toEqual([fakeVector("1,2,3"), fakeVector("4,5")])
  })
})

describe("the API family's SDK", () => {
  test("embeddings.generate passes the SDK's own schema, multimodal text parts included", async () => {
    const answer = await sdk().embeddings.generate({ requestBody: { model: "demo/embed", input: [{ content: [{ type: "text", text: "a caption" }] }] } })
    if (typeof answer === "string") throw new Error(`a string answer: ${answer}`)
    expect(answer.data[0]?.embedding).toEqual(fakeVector("a caption"))
    expect(answer.usage?.promptTokens).toBe(3)
  })

  test("embeddings.listModels lists the embedding models and no chat model", async () => {
    const page = await sdk().embeddings.listModels()
    const ids = page.result.data.map((m) => m.id)
    expect(ids).toContain("demo/embed")
    expect(ids).toContain("test/titan")
    expect(ids).not.toContain("demo/echo")
    expect(ids).not.toContain("demo/rerank")
  })

  test("rerank.rerank passes the SDK's own schema: results best first, each with its document", async () => {
    const answer = await sdk().rerank.rerank({ requestBody: { model: "demo/rerank", query: "red fox", documents: ["a red car", "the quick red fox", "blue sky"], topN: 2 } })
    if (typeof answer === "string") throw new Error(`a string answer: ${answer}`)
    expect(answer.results.map((r) => [r.index, r.relevanceScore, r.document.text])).toEqual([
      [1, 1, "the quick red fox"],
      [0, 0.5, "a red car"],
    ])
    expect(answer.usage).toMatchObject({ searchUnits: 1, cost: 0.002 })
  })

  test("GET /v1/models leaves embedding and rerank models out by default", async () => {
    const ids = ((await (await gw.fetch("/v1/models")).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)
    expect(ids).toContain("demo/echo")
    expect(ids).not.toContain("demo/embed")
    expect(ids).not.toContain("demo/rerank")
  })
})

describe("bad input is a 400 naming the field, and calls nothing", () => {
  const cases: ReadonlyArray<[string, Record<string, unknown>, string]> = [
    ["an empty string", { model: "demo/embed", input: "" }, "input: must not be empty"],
    ["an empty list", { model: "demo/embed", input: [] }, "input: must have at least one item"],
    ["an empty item", { model: "demo/embed", input: ["a", ""] }, "input[1]: must not be empty"],
    ["too many items", { model: "demo/embed", input: Array.from({ length: 2049 }, () => "x") }, "input: at most 2048 items"],
    ["a chat model", { model: "demo/echo", input: "x" }, 'model: "demo/echo" is a chat model'],
    ["an unknown format", { model: "demo/embed", input: "x", encoding_format: "int8" }, "encoding_format: one of float, base64"],
    ["no model", { input: "x" }, "model: is missing"],
    ["an image part", { model: "demo/embed", input: [{ content: [{ type: "image_url", image_url: { url: "data:," } }] }] }, "input[0].content[0]: image_url parts are not supported"],
    ["trace", { model: "demo/embed", input: "x", trace: { trace_id: "t" } }, "trace: not supported on this endpoint"],
    ["a bad provider preference", { model: "demo/embed", input: "x", provider: { sort: "fastest" } }, "provider.sort"],
  ]
  for (const [what, body, message] of cases) {
    test(`${what}: ${message}`, async () => {
      expect(await expectError(await post("/v1/embeddings", body), 400)).toContain(message)
    })
  }
  test("an x-session-id over 256 characters", async () => {
    const res = await gw.fetch("/v1/embeddings", { method: "POST", json: { model: "demo/embed", input: "x" }, headers: { "x-session-id": "s".repeat(257) } })
    expect(await expectError(res, 400)).toContain("x-session-id: at most 256 characters")
  })
  test("an unknown model is 404", async () => {
    expect(await expectError(await post("/v1/embeddings", { model: "demo/nope", input: "x" }), 404)).toContain("demo/nope")
  })
  test("rerank: no documents, an image document, a chat model", async () => {
    expect(await expectError(await post("/v1/rerank", { model: "demo/rerank", query: "q", documents: [] }), 400)).toContain("documents: must have at least one document")
    expect(await expectError(await post("/v1/rerank", { model: "demo/rerank", query: "q", documents: [{ image: "data:," }] }), 400)).toContain("documents[0].image")
    expect(await expectError(await post("/v1/rerank", { model: "demo/embed", query: "q", documents: ["d"] }), 400)).toContain("is an embedding model")
    expect(await expectError(await post("/v1/rerank", { model: "demo/rerank", documents: ["d"] }), 400)).toContain("query: is missing")
  })
  test("a model request naming an embedding model is refused", async () => {
    expect(await expectError(await post("/v1/chat/completions", { model: "demo/embed", messages: [{ role: "user", content: "x" }] }), 400)).toContain("served by POST /v1/embeddings")
  })
  test("a model request naming a one-endpoint rerank model is refused too (the router's short path)", async () => {
    expect(await expectError(await post("/v1/responses", { model: "demo/rerank", input: "x" }), 400)).toContain('model: "demo/rerank" is a rerank model, served by POST /v1/rerank')
  })
  test("no key is 401", async () => {
    await expectError(await gw.fetch("/v1/embeddings", { method: "POST", json: { model: "demo/embed", input: "x" }, key: null }), 401)
  })
})

describe("usage, cost, the generation record and the key's limit", () => {
  test("usage carries the cost at the endpoint's prompt price, and the record says the same", async () => {
    const res = await post("/v1/embeddings", { model: "test/oa-embed", input: ["twelve chars", "abcd"], session_id: "embed-session" })
    const answer = decodeEmbeddings(await res.json())
    // The host counts ceil(12/4) + ceil(4/4) = 4 tokens, at $0.02 per million.
    expect(answer.usage).toEqual({ prompt_tokens: 4, total_tokens: 4, cost: (4 * 0.02) / 1e6 })
    await gw.server.drain()
    const record = (await (await gw.fetch(`/v1/generation?id=${res.headers.get("x-generation-id")}`)).json()) as { data: Record<string, unknown> }
    expect(record.data).toMatchObject({ model: "test/oa-embed", provider_name: "oa", tokens_prompt: 4, tokens_completion: 0, total_cost: (4 * 0.02) / 1e6, session_id: "embed-session" })
  })

  test("a count the upstream sends that is no count (negative, fractional, null, a string) is estimated: never a negative cost or a failed answer", async () => {
    const created = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "embed-miscounted", limit: 100 } })).json()) as { key: string; data: { hash: string } }
    let charged = 0
    for (const [i, count] of MISCOUNTS.entries()) {
      const res = await post("/v1/embeddings", { model: `test/miscount-embed-${i}`, input: "x".repeat(40) }, created.key)
      expect(res.status).toBe(200)
      const answer = decodeEmbeddings(await res.json())
      // The gateway's estimate: 40 characters, 10 tokens, at $1,000 per million.
      expect([count, answer.usage]).toEqual([count, { prompt_tokens: 10, total_tokens: 10, cost: 0.01 }])
      await gw.server.drain()
      const record = (await (await gw.fetch(`/v1/generation?id=${res.headers.get("x-generation-id")}`)).json()) as { data: Record<string, unknown> }
      expect(record.data).toMatchObject({ tokens_prompt: 10, total_cost: 0.01, usage_estimated: true })
      charged += 0.01
      // Search units that are none are Cohere's own count for the documents: one search.
      const reranked = decodeRerank(await (await post("/v1/rerank", { model: `test/miscount-rerank-${i}`, query: "q", documents: ["a", "b"] }, created.key)).json())
      expect([count, reranked.usage]).toMatchObject([count, { search_units: 1, cost: 0.001 }])
      charged += 0.001
    }
    await gw.server.drain()
    const key = (await (await gw.fetch(`/v1/keys/${created.data.hash}`)).json()) as { data: { usage: number } }
    expect(key.data.usage).toBeCloseTo(charged, 9)
  })

  test("a key's spend grows by the cost; a key with no budget left is refused with 402", async () => {
    const created = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "embed-limited", limit: 1 } })).json()) as { key: string; data: { hash: string } }
    const answer = await embed({ model: "test/batch-embed", input: ["a".repeat(40), "b".repeat(40)] }, created.key)
    expect(answer.usage.cost).toBe((20 * 1) / 1e6)
    await gw.server.drain()
    const key = (await (await gw.fetch(`/v1/keys/${created.data.hash}`)).json()) as { data: { usage: number } }
    expect(key.data.usage).toBeCloseTo(answer.usage.cost, 12)
    const broke = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "embed-broke", limit: 0 } })).json()) as { key: string }
    await expectError(await post("/v1/embeddings", { model: "demo/embed", input: "x" }, broke.key), 402)
  })
})

describe("upstreams", () => {
  test("openai-chat: POST {base_url}/embeddings with the key, the model, the inputs and the options", async () => {
    await embed({ model: "test/oa-embed", input: ["x"], dimensions: 4, input_type: "search_query", user: "u1" })
    expect(host.requests.at(-1)).toEqual({
      path: "/v1/embeddings",
      authorization: "Bearer sk-host-secret",
      body: { model: "text-embedding-3-small", input: ["x"], encoding_format: "float", dimensions: 4, user: "u1", input_type: "search_query" },
    })
  })

  test("a rate-limited endpoint fails over to the next, and the answer is the second's", async () => {
    const answer = await embed({ model: "test/fallback-embed", input: "x", provider: { order: ["oa-throttled", "oa"] } })
    expect(host.requests.at(-1)?.body["model"]).toBe("text-embedding-3-large")
    expect(answer.usage.cost).toBe((1 * 0.13) / 1e6)
  })

  test("only a rate-limited endpoint: 429 with Retry-After", async () => {
    const res = await post("/v1/embeddings", { model: "test/fallback-embed", input: "x", provider: { only: ["oa-throttled"] } })
    expect(res.status).toBe(429)
    expect(res.headers.get("retry-after")).toBe("2")
  })

  test("a batch over the upstream's per-call limit is split and joined in order", async () => {
    const inputs = Array.from({ length: 10 }, (_, i) => `text number ${i}`)
    const answer = await embed({ model: "test/batch-embed", input: inputs })
    expect(answer.data.map((d) => d.index)).toEqual([...inputs.keys()])
    expect(answer.data.map((d) => d.embedding)).toEqual(inputs.map((t) => fakeVector(t)))
  })

  test("bedrock Titan: one signed InvokeModel per input, in order", async () => {
    const before = bedrock.requests.length
    const answer = await embed({ model: "test/titan", input: ["one", "two", "three"], dimensions: 4 })
    const calls = bedrock.requests.slice(before)
    expect(calls.map((c) => c.path)).toEqual(Array(3).fill("/model/amazon.titan-embed-text-v2%3A0/invoke"))
    expect(calls.every((c) => c.auth === "sigv4")).toBe(true)
    const bodies = calls.map((c) => c.body as Record<string, unknown>)
    expect(bodies.sort((a, b) => String(a["inputText"]).localeCompare(String(b["inputText"])))).toEqual([
      { inputText: "one", dimensions: 4 },
      { inputText: "three", dimensions: 4 },
      { inputText: "two", dimensions: 4 },
    ])
    expect(answer.data.map((d) => d.embedding)).toEqual(["one", "two", "three"].map((t) => mockVector(t, 4)))
  })

  test("bedrock Cohere: 200 texts in calls of 96, joined in order, tokens from the upstream's count", async () => {
    const before = bedrock.requests.length
    const inputs = Array.from({ length: 200 }, (_, i) => `doc ${i}`)
    const answer = await embed({ model: "test/cohere-embed", input: inputs, input_type: "search_query" })
    const calls = bedrock.requests.slice(before)
    const bodies = calls.map((c) => c.body as { texts: Array<string>; input_type: string })
    expect(bodies.map((b) => b.texts.length).sort((a, b) => a - b)).toEqual([8, 96, 96])
    expect(bodies.every((b) => b.input_type === "search_query")).toBe(true)
    expect(answer.data.map((d) => d.embedding)).toEqual(inputs.map((t) => mockVector(`search_query:${t}`, 8)))
    expect(answer.usage.prompt_tokens).toBe(inputs.reduce((n, t) => n + Math.ceil(t.length / 4), 0))
  })

  test("rerank on an OpenAI-compatible host: POST {base_url}/rerank, charged per search", async () => {
    const res = await post("/v1/rerank", { model: "test/oa-rerank", query: "red fox", documents: ["red", "fox red", "none"], top_n: 2, return_documents: false })
    const answer = decodeRerank(await res.json())
    expect(host.requests.at(-1)).toMatchObject({ path: "/v1/rerank", body: { model: "rerank-v1", query: "red fox", documents: ["red", "fox red", "none"], top_n: 2 } })
    expect(answer.results).toEqual([
      { index: 1, relevance_score: 1, document: {} },
      { index: 0, relevance_score: 0.5, document: {} },
    ])
    expect(answer.usage).toMatchObject({ search_units: 1, cost: 0.001 })
  })

  test("rerank on bedrock: Cohere rerank through a signed InvokeModel", async () => {
    const answer = decodeRerank(await (await post("/v1/rerank", { model: "test/aws-rerank", query: "blue sky", documents: ["green", "the blue sky"] })).json())
    expect(bedrock.requests.at(-1)).toMatchObject({ path: "/model/cohere.rerank-v3-5%3A0/invoke", auth: "sigv4", body: { query: "blue sky", documents: ["green", "the blue sky"], api_version: 2 } })
    expect(answer.results[0]).toEqual({ index: 1, relevance_score: 1, document: { text: "the blue sky" } })
    expect(answer.provider).toBe("aws")
    expect(answer.usage.cost).toBe(0.002)
  })
})
