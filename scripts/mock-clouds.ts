#!/usr/bin/env bun
/**
 * A fake of the clouds' model APIs, for tests and manual runs: the Gemini API, Vertex AI (Google
 * models, Anthropic models by rawPredict, and Google's OAuth token endpoint) and Azure OpenAI.
 * Each checks what the real one checks first (path, auth, body shape) and answers in its format;
 * the OpenAI- and Anthropic-format answers (Azure, Anthropic on Vertex) come from an inner
 * `mock-upstream.ts`, so its `x-mock-*` headers work there as they do on it.
 *
 *   POST /v1beta/models/{m}:generateContent | :streamGenerateContent?alt=sse | :batchEmbedContents
 *        key: `x-goog-api-key` = options.geminiKey (else 400 API_KEY_INVALID, as Gemini answers)
 *   POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent | :streamGenerateContent | :predict
 *   POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict | :streamRawPredict
 *        auth: `authorization: Bearer <a token this fake issued>` (else 401 UNAUTHENTICATED)
 *   POST /token   the JWT bearer grant: the assertion's RS256 signature is checked with
 *                 options.publicKey, its claims (iss, scope, aud = this URL, iat/exp); answers
 *                 `{access_token: "ya29.mock-N", expires_in: options.tokenLifetimeSeconds}`
 *   POST /openai/deployments/{d}/chat/completions?api-version=… | /openai/deployments/{d}/embeddings?api-version=…
 *   POST /openai/v1/chat/completions | /openai/v1/responses | /openai/v1/embeddings | /openai/responses?api-version=…
 *        auth: `api-key` = options.azureKey or `authorization: Bearer <options.azureToken>` (else 401)
 *
 * Google-format knobs (request headers): x-mock-scenario text | tool_call | reasoning,
 * x-mock-tokens (deltas, default 5), x-mock-error 400 401 403 429 500 503 context_length mid-stream-error.
 * A tool call carries `thoughtSignature` MOCK_SIGNATURE; a request that sends a function response
 * is answered "Tool output: <response JSON>", and refused (400, as Gemini 3 does) when the
 * function call before it lacks that signature.
 * Embeddings are deterministic: `mockVector(text, dimensions)`.
 */
import { type MockUpstream, startMockUpstream } from "./mock-upstream"

export interface MockCloudsOptions {
  readonly port?: number
  readonly geminiKey?: string
  readonly azureKey?: string
  readonly azureToken?: string
  /** The service account's public key: the token endpoint verifies assertions with it. */
  readonly publicKey?: CryptoKey
  readonly tokenLifetimeSeconds?: number
}

export interface MockCloudRequest {
  /** Path and query. */
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: unknown
}

export interface MockClouds {
  readonly url: string
  readonly requests: Array<MockCloudRequest>
  /** Token exchanges answered (the assertions it accepted); `reset` clears them, the tokens and their numbering. */
  readonly exchanges: Array<{ readonly claims: Record<string, unknown>; readonly header: Record<string, unknown> }>
  /** Tokens issued and still accepted. */
  readonly tokens: Set<string>
  /** Changes the lifetime of the next tokens. */
  tokenLifetimeSeconds: number
  readonly inner: MockUpstream
  readonly reset: () => void
  readonly stop: () => Promise<void>
}

/** The base64 signature the fake puts on function calls: `+` and `/` in it test the id's base64url form. */
export const MOCK_SIGNATURE = Buffer.from([0xfb, 0xef, 0xff, 0x6d, 0x6f, 0x63, 0x6b, 0x3f]).toString("base64")

/** A deterministic embedding of `text`: `dimensions` numbers in [0, 1). */
export const mockVector = (text: string, dimensions = 4): Array<number> =>
  Array.from({ length: dimensions }, (_, k) => ((text.length * 31 + k * 7 + (text.charCodeAt(k % Math.max(1, text.length)) || 0)) % 97) / 97)

const JSON_HEADERS = { "content-type": "application/json" }
const encoder = new TextEncoder()

const recordOf = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
const arrayOf = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

const googleError = (status: number, code: string, message: string, details?: ReadonlyArray<unknown>): Response =>
  new Response(JSON.stringify({ error: { code: status, message, status: code, ...(details === undefined ? {} : { details }) } }), { status, headers: JSON_HEADERS })

const GOOGLE_ERRORS: Record<string, () => Response> = {
  "400": () => googleError(400, "INVALID_ARGUMENT", "mock: invalid request"),
  "401": () => googleError(401, "UNAUTHENTICATED", "mock: request had invalid authentication credentials"),
  "403": () => googleError(403, "PERMISSION_DENIED", "mock: permission denied on the project"),
  "429": () =>
    googleError(429, "RESOURCE_EXHAUSTED", "mock: quota exceeded", [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "7s" }]),
  "500": () => googleError(500, "INTERNAL", "mock: internal error"),
  "503": () => googleError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
  context_length: () => googleError(400, "INVALID_ARGUMENT", "The input token count (2000000) exceeds the maximum number of tokens allowed (1048576)."),
}

const fromBase64url = (text: string): Uint8Array<ArrayBuffer> => Uint8Array.from(Buffer.from(text, "base64url"))

interface GoogleAnswer {
  readonly chunks: ReadonlyArray<Record<string, unknown>>
  readonly whole: Record<string, unknown>
}

/** The Gemini answer for a request: its parts, streamed one per chunk, or whole. */
const googleAnswer = (body: Record<string, unknown>, headers: Headers, model: string): GoogleAnswer | Response => {
  const scenario = headers.get("x-mock-scenario") ?? "text"
  const tokens = Number(headers.get("x-mock-tokens") ?? "5")
  const contents = arrayOf(body["contents"]).map((c) => recordOf(c) ?? {})
  const parts: Array<Record<string, unknown>> = []
  let thoughts = 0
  // A tool round trip: the function response is answered, if its call kept its signature.
  const lastParts = arrayOf(recordOf(contents[contents.length - 1])?.["parts"]).map((p) => recordOf(p) ?? {})
  const response = lastParts.find((p) => p["functionResponse"] !== undefined)
  if (response !== undefined) {
    const previous = arrayOf(recordOf(contents[contents.length - 2])?.["parts"]).map((p) => recordOf(p) ?? {})
    const call = previous.find((p) => p["functionCall"] !== undefined)
    if (call === undefined || call["thoughtSignature"] !== MOCK_SIGNATURE) {
      return googleError(400, "INVALID_ARGUMENT", "Function call is missing a thought_signature in functionCall parts.")
    }
    parts.push({ text: `Tool output: ${JSON.stringify(recordOf(response["functionResponse"])?.["response"])}` })
  } else if (scenario === "tool_call") {
    const declarations = arrayOf(recordOf(arrayOf(body["tools"])[0])?.["functionDeclarations"])
    const name = String(recordOf(declarations[0])?.["name"] ?? "mock_tool")
    parts.push({ functionCall: { name, args: { input: "tok ".repeat(tokens) } }, thoughtSignature: MOCK_SIGNATURE })
  } else {
    if (scenario === "reasoning") {
      for (let i = 0; i < tokens; i++) parts.push({ text: "think ", thought: true })
      thoughts = tokens
    }
    for (let i = 0; i < tokens; i++) parts.push({ text: "tok " })
  }
  const candidates = parts.length - thoughts
  const usage = { promptTokenCount: 10, candidatesTokenCount: candidates, totalTokenCount: 10 + parts.length, ...(thoughts > 0 ? { thoughtsTokenCount: thoughts } : {}) }
  const chunks = parts.map((part, i) => ({
    candidates: [{ content: { role: "model", parts: [part] }, index: 0, ...(i === parts.length - 1 ? { finishReason: "STOP" } : {}) }],
    usageMetadata: i === parts.length - 1 ? usage : { promptTokenCount: 10, totalTokenCount: 10 },
    modelVersion: model,
  }))
  const merged: Array<Record<string, unknown>> = []
  for (const part of parts) {
    const last = merged[merged.length - 1]
    if (last !== undefined && typeof last["text"] === "string" && typeof part["text"] === "string" && last["thought"] === part["thought"]) {
      merged[merged.length - 1] = { ...last, text: `${last["text"]}${part["text"]}` }
    } else {
      merged.push(part)
    }
  }
  return { chunks, whole: { candidates: [{ content: { role: "model", parts: merged }, finishReason: "STOP", index: 0 }], usageMetadata: usage, modelVersion: model } }
}

const sseOf = (chunks: ReadonlyArray<Record<string, unknown>>, failAfter?: number): Response => {
  const frames = chunks.map((chunk) => encoder.encode(`data: ${JSON.stringify(chunk)}\r\n\r\n`))
  if (failAfter !== undefined) {
    frames.length = Math.min(frames.length, failAfter)
    frames.push(encoder.encode(`data: ${JSON.stringify({ error: { code: 503, message: "mock: overloaded mid-stream", status: "UNAVAILABLE" } })}\r\n\r\n`))
  }
  let next = 0
  const body = new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      const frame = frames[next++]
      if (frame === undefined) return controller.close()
      controller.enqueue(frame)
      // One frame per read where the reader keeps up.
      await Bun.sleep(1)
    },
  })
  return new Response(body, { headers: { "content-type": "text/event-stream" } })
}

const wordsOf = (text: string): number => Math.max(1, text.split(/\s+/).filter((w) => w.length > 0).length)

export const startMockClouds = async (options: MockCloudsOptions = {}): Promise<MockClouds> => {
  const inner = await startMockUpstream({ port: 0 })
  const requests: Array<MockCloudRequest> = []
  const exchanges: MockClouds["exchanges"] = []
  const tokens = new Set<string>()
  let issued = 0
  let url = ""

  const generate = (body: Record<string, unknown>, headers: Headers, model: string, stream: boolean): Response => {
    const error = headers.get("x-mock-error")
    const prepared = error === null ? undefined : GOOGLE_ERRORS[error]
    if (prepared !== undefined) return prepared()
    if (!Array.isArray(body["contents"])) return googleError(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
    const answer = googleAnswer(body, headers, model)
    if (answer instanceof Response) return answer
    if (stream) return sseOf(answer.chunks, error === "mid-stream-error" ? 2 : undefined)
    return Response.json(answer.whole)
  }

  /** An answer of the inner mock in the OpenAI or Anthropic format, passed through as it streams. */
  const forward = async (path: string, body: unknown, headers: Headers): Promise<Response> => {
    const mockHeaders: Record<string, string> = { "content-type": "application/json" }
    headers.forEach((value, name) => {
      if (name.startsWith("x-mock-")) mockHeaders[name] = value
    })
    const res = await fetch(`${inner.url}${path}`, { method: "POST", headers: mockHeaders, body: JSON.stringify(body) })
    const out: Record<string, string> = { "content-type": res.headers.get("content-type") ?? "application/json" }
    const retry = res.headers.get("retry-after")
    if (retry !== null) out["retry-after"] = retry
    return new Response(res.body, { status: res.status, headers: out })
  }

  const tokenExchange = async (req: Request): Promise<Response> => {
    const form = new URLSearchParams(await req.text())
    const refuse = (description: string) => Response.json({ error: "invalid_grant", error_description: description }, { status: 400 })
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return Response.json({ error: "unsupported_grant_type" }, { status: 400 })
    const [head, payload, signature] = (form.get("assertion") ?? "").split(".")
    if (head === undefined || payload === undefined || signature === undefined) return refuse("Invalid JWT.")
    if (options.publicKey === undefined) return refuse("No key to verify with.")
    const valid = await crypto.subtle.verify("RSASSA-PKCS1-v1_5", options.publicKey, fromBase64url(signature), encoder.encode(`${head}.${payload}`))
    if (!valid) return refuse("Invalid JWT Signature.")
    const header = JSON.parse(Buffer.from(head, "base64url").toString("utf8")) as Record<string, unknown>
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<string, unknown>
    if (header["alg"] !== "RS256") return refuse("Invalid JWT: alg")
    if (claims["aud"] !== `${url}/token`) return refuse("Invalid JWT: Token must be a short-lived token and in a reasonable timeframe. Check aud.")
    if (claims["scope"] !== "https://www.googleapis.com/auth/cloud-platform") return refuse("Invalid scope.")
    if (typeof claims["iat"] !== "number" || claims["exp"] !== claims["iat"] + 3600) return refuse("Invalid JWT: iat/exp.")
    exchanges.push({ claims, header })
    const token = `ya29.mock-${++issued}`
    tokens.add(token)
    return Response.json({ access_token: token, expires_in: clouds.tokenLifetimeSeconds, token_type: "Bearer" })
  }

  const embedGemini = (body: Record<string, unknown>, model: string): Response => {
    const items = arrayOf(body["requests"]).map((r) => recordOf(r) ?? {})
    if (items.length > 100) return googleError(400, "INVALID_ARGUMENT", "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch")
    for (const item of items) if (item["model"] !== `models/${model}`) return googleError(400, "INVALID_ARGUMENT", "mock: each request must name the batch's model")
    const embeddings = items.map((item) => {
      const text = arrayOf(recordOf(item["content"])?.["parts"]).map((p) => String(recordOf(p)?.["text"] ?? "")).join("")
      return { values: mockVector(text, typeof item["outputDimensionality"] === "number" ? item["outputDimensionality"] : 4) }
    })
    return Response.json({ embeddings })
  }

  const embedVertex = (body: Record<string, unknown>, model: string): Response => {
    const instances = arrayOf(body["instances"]).map((i) => recordOf(i) ?? {})
    const limit = model.startsWith("gemini-embedding") ? 1 : 250
    if (instances.length > limit) return googleError(400, "INVALID_ARGUMENT", `mock: ${model} takes at most ${limit} instances per request`)
    const dimensions = recordOf(body["parameters"])?.["outputDimensionality"]
    const predictions = instances.map((instance) => {
      const text = String(instance["content"] ?? "")
      // A model named "…-uncounted" answers without token counts (an upstream that leaves them out), "…-miscounted" with a string.
      const count = model.endsWith("-miscounted") ? String(wordsOf(text)) : wordsOf(text)
      const statistics = model.endsWith("-uncounted") ? {} : { statistics: { token_count: count, truncated: false } }
      return { embeddings: { values: mockVector(text, typeof dimensions === "number" ? dimensions : 4), ...statistics } }
    })
    return Response.json({ predictions })
  }

  const embedAzure = (body: Record<string, unknown>, model: string): Response => {
    const input = body["input"]
    const texts = typeof input === "string" ? [input] : arrayOf(input).map(String)
    if (texts.length > 2048) return Response.json({ error: { message: "mock: too many inputs", code: "invalid_request" } }, { status: 400 })
    const dimensions = typeof body["dimensions"] === "number" ? body["dimensions"] : 4
    const tokensUsed = texts.reduce((sum, text) => sum + wordsOf(text), 0)
    return Response.json({
      object: "list",
      data: texts.map((text, index) => ({ object: "embedding", index, embedding: mockVector(text, dimensions) })),
      model,
      ...(model.endsWith("-uncounted") ? {} : { usage: { prompt_tokens: model.endsWith("-miscounted") ? null : tokensUsed, total_tokens: tokensUsed } }),
    })
  }

  const azureAuthorized = (headers: Headers): boolean =>
    (options.azureKey !== undefined && headers.get("api-key") === options.azureKey) ||
    (options.azureToken !== undefined && headers.get("authorization") === `Bearer ${options.azureToken}`)

  const handle = async (req: Request): Promise<Response> => {
    const at = new URL(req.url)
    const path = at.pathname
    if (path === "/token" && req.method === "POST") return tokenExchange(req)
    let body: Record<string, unknown> = {}
    const text = await req.text()
    try {
      body = recordOf(JSON.parse(text)) ?? {}
    } catch {
      body = {}
    }
    requests.push({ path: path + at.search, headers: Object.fromEntries(req.headers), body })
    const headers = req.headers

    const gemini = /^\/v1beta\/models\/([^/:]+):(\w+)$/.exec(path)
    if (gemini !== null) {
      if (headers.get("x-goog-api-key") !== options.geminiKey) {
        return googleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
          { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" },
        ])
      }
      const [, model, method] = gemini as unknown as [string, string, string]
      if (method === "generateContent") return generate(body, headers, model, false)
      if (method === "streamGenerateContent") {
        if (at.searchParams.get("alt") !== "sse") return googleError(400, "INVALID_ARGUMENT", "mock: only alt=sse streams")
        return generate(body, headers, model, true)
      }
      if (method === "batchEmbedContents") return embedGemini(body, model)
      return googleError(404, "NOT_FOUND", `mock: no method ${method}`)
    }

    const vertex = /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):(\w+)$/.exec(path)
    if (vertex !== null) {
      const token = (headers.get("authorization") ?? "").replace(/^Bearer /, "")
      if (!tokens.has(token)) return googleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
      const [, , , publisher, model, method] = vertex as unknown as [string, string, string, string, string, string]
      if (publisher === "google") {
        if (method === "generateContent") return generate(body, headers, model, false)
        if (method === "streamGenerateContent") return generate(body, headers, model, true)
        if (method === "predict") return embedVertex(body, model)
      } else if (method === "rawPredict" || method === "streamRawPredict") {
        if (body["anthropic_version"] !== "vertex-2023-10-16") return googleError(400, "INVALID_ARGUMENT", "anthropic_version: must be vertex-2023-10-16")
        if ("model" in body) return googleError(400, "INVALID_ARGUMENT", "model: Extra inputs are not permitted")
        if ((method === "streamRawPredict") !== (body["stream"] === true)) return googleError(400, "INVALID_ARGUMENT", "mock: stream must match the method")
        const { anthropic_version: _version, ...rest } = body
        return forward("/messages", { ...rest, model }, headers)
      }
      return googleError(404, "NOT_FOUND", `mock: no method ${method} for publisher ${publisher}`)
    }

    if (path.startsWith("/openai/")) {
      if (!azureAuthorized(headers)) {
        return Response.json({ error: { code: "401", message: "Access denied due to invalid subscription key or wrong API endpoint." } }, { status: 401 })
      }
      const version = at.searchParams.get("api-version")
      const deployment = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(path)
      if (deployment !== null) {
        if (version === null) return Response.json({ error: { code: "404", message: "Resource not found" } }, { status: 404 })
        const name = decodeURIComponent(deployment[1] as string)
        return deployment[2] === "embeddings" ? embedAzure(body, name) : forward("/chat/completions", body, headers)
      }
      if (path === "/openai/responses" && version !== null) return forward("/responses", body, headers)
      if (path.startsWith("/openai/v1/")) {
        if (version !== null && version !== "preview") return Response.json({ error: { code: "BadRequest", message: "API version not supported" } }, { status: 400 })
        if (path === "/openai/v1/chat/completions") return forward("/chat/completions", body, headers)
        if (path === "/openai/v1/responses") return forward("/responses", body, headers)
        if (path === "/openai/v1/embeddings") return embedAzure(body, String(body["model"] ?? ""))
      }
      return Response.json({ error: { code: "404", message: "Resource not found" } }, { status: 404 })
    }
    return Response.json({ error: { message: `mock: no route ${path}` } }, { status: 404 })
  }

  const server = Bun.serve({ port: options.port ?? 0, hostname: "127.0.0.1", development: false, idleTimeout: 0, fetch: handle })
  url = `http://127.0.0.1:${server.port}`
  const clouds: MockClouds = {
    url,
    requests,
    exchanges,
    tokens,
    tokenLifetimeSeconds: options.tokenLifetimeSeconds ?? 3600,
    inner,
    reset: () => {
      requests.length = 0
      exchanges.length = 0
      tokens.clear()
      issued = 0
      inner.reset()
    },
    stop: async () => {
      await server.stop(true)
      await inner.stop()
    },
  }
  return clouds
}

if (import.meta.main) {
  const clouds = await startMockClouds({ port: 9100, geminiKey: "mock-gemini-key", azureKey: "mock-azure-key" })
  console.log(`mock clouds listening on ${clouds.url} (Gemini key mock-gemini-key, Azure key mock-azure-key)`)
  const shutdown = (): void => {
    void clouds.stop().then(() => process.exit(0))
  }
  process.on("SIGINT", shutdown)
  process.on("SIGTERM", shutdown)
}
