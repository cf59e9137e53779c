#!/usr/bin/env bun
/**
 * A fake OpenAI-compatible embeddings host for tests and benchmarks: `POST /v1/embeddings`
 * (OpenAI's shape, float vectors from the text, usage counted as characters ÷ 4) and
 * `POST /v1/rerank` (Cohere's shape, as Jina, Voyage and vLLM serve it). It refuses a batch over
 * `maxInputs` the way OpenAI does, so a split is seen. `requests` logs every call.
 * Headers: x-mock-error 429 | 500 | 401 fails the call; x-mock-count <JSON> answers that value as
 * the count (`usage.prompt_tokens`, rerank's `search_units`), as an upstream that miscounts would.
 */
import { mockVector } from "./mock-bedrock"

export interface MockEmbeddings {
  readonly url: string
  readonly requests: Array<{ readonly path: string; readonly authorization: string | null; readonly body: Record<string, unknown> }>
  readonly stop: () => Promise<void>
}

const json = (value: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json", ...headers } })

const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4))

export const startMockEmbeddings = async (options: { readonly port?: number; readonly maxInputs?: number } = {}): Promise<MockEmbeddings> => {
  const requests: MockEmbeddings["requests"] = []
  const maxInputs = options.maxInputs ?? 2048
  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const path = new URL(req.url).pathname
      const body = (await req.json()) as Record<string, unknown>
      requests.push({ path, authorization: req.headers.get("authorization"), body })
      if (requests.length > 1000) requests.shift()
      const error = req.headers.get("x-mock-error")
      if (error === "429") return json({ error: { message: "Rate limit reached", type: "rate_limit_error" } }, 429, { "retry-after": "2" })
      if (error === "500") return json({ error: { message: "The server had an error" } }, 500)
      if (error === "401") return json({ error: { message: "Incorrect API key provided" } }, 401)
      const count = req.headers.get("x-mock-count")
      const counted = (n: number): unknown => (count === null ? n : JSON.parse(count))
      if (path.endsWith("/embeddings")) {
        const input = body["input"]
        const inputs = (typeof input === "string" ? [input] : (input as Array<string | Array<number>>)).map((i) => (typeof i === "string" ? i : i.join(",")))
        if (inputs.length > maxInputs) return json({ error: { message: `'$.input' is invalid: at most ${maxInputs} items`, type: "invalid_request_error" } }, 400)
        const dimensions = typeof body["dimensions"] === "number" ? body["dimensions"] : 8
        return json({
          object: "list",
          data: inputs.map((text, index) => ({ object: "embedding", index, embedding: mockVector(text, dimensions) })),
          model: body["model"],
          usage: { prompt_tokens: counted(inputs.reduce((n, t) => n + tokens(t), 0)), total_tokens: inputs.reduce((n, t) => n + tokens(t), 0) },
        })
      }
      if (path.endsWith("/rerank")) {
        const query = String(body["query"])
        const documents = body["documents"] as Array<string>
        const words = new Set(query.toLowerCase().split(/\W+/).filter(Boolean))
        const results = documents
          .map((doc, index) => ({ index, relevance_score: doc.toLowerCase().split(/\W+/).filter((w) => words.has(w)).length / (words.size || 1) }))
          .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
          .slice(0, typeof body["top_n"] === "number" ? body["top_n"] : documents.length)
        return json({ id: "rr-1", results, meta: { billed_units: { search_units: counted(1) } } })
      }
      return json({ error: { message: `no route ${path}` } }, 404)
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    requests,
    stop: async () => {
      await server.stop(true)
    },
  }
}

if (import.meta.main) {
  const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 9200)
  const mock = await startMockEmbeddings({ port })
  console.log(`mock embeddings on ${mock.url}`)
}
