#!/usr/bin/env bun
/**
 * A fake Amazon Bedrock runtime for tests and benchmarks: Converse (`POST /model/{id}/converse`),
 * ConverseStream (`/converse-stream`, AWS's binary event-stream framing, written with
 * @smithy/eventstream-codec) and InvokeModel (`/invoke`) for Titan and Cohere embedding models
 * and Cohere rerank. Every request's SigV4 signature is checked by an implementation of its own
 * (node:crypto, the canonical request built from the path as received), or its bearer API key.
 *
 * Per-request knobs (headers; the gateway sends a provider's `headers` unsigned):
 *   x-mock-scenario   text (default) | tool_call | reasoning
 *   x-mock-tokens     text deltas of a streamed answer (default 5); x-mock-chunk their text, percent-encoded (default "tok ")
 *   x-mock-split      write the stream in pieces of this many bytes, one write each (frames span writes)
 *   x-mock-error      throttling | validation | context | denied | unavailable | internal | mid-stream | stream-first
 * The last request is in `requests` (path, headers, body, whether the signature checked out).
 */
import { createHash, createHmac } from "node:crypto"
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"

export const MOCK_ACCESS_KEY_ID = "AKIDMOCKBEDROCK"
export const MOCK_SECRET_ACCESS_KEY = "mock/secret+KEY"
export const MOCK_BEDROCK_API_KEY = "bedrock-api-key-mock"

export interface MockBedrockRequest {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: unknown
  /** "sigv4" with a signature that checked out, "bearer" with the mock's API key, else why not. */
  readonly auth: "sigv4" | "bearer" | string
}

export interface MockBedrock {
  readonly url: string
  readonly requests: Array<MockBedrockRequest>
  readonly stop: () => Promise<void>
}

const codec = new EventStreamCodec(toUtf8, fromUtf8)

/** One event-stream frame as ConverseStream writes it. */
export const eventFrame = (eventType: string, payload: unknown): Uint8Array =>
  codec.encode({
    headers: {
      ":event-type": { type: "string", value: eventType },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "event" },
    },
    body: fromUtf8(JSON.stringify({ ...(payload as object), p: "abcdefgh" })),
  })

const exceptionFrame = (type: string, message: string): Uint8Array =>
  codec.encode({
    headers: {
      ":exception-type": { type: "string", value: type },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "exception" },
    },
    body: fromUtf8(JSON.stringify({ message })),
  })

// ------------------------------------------------------------------ SigV4, checked independently

const sha256 = (data: string) => createHash("sha256").update(data).digest("hex")
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest()

/** RFC 3986: every byte but the unreserved ones (and `/`) as %XX, applied to the path as received. */
const uriEncodePath = (path: string): string => {
  let out = ""
  for (const byte of Buffer.from(path, "utf8")) {
    const c = String.fromCharCode(byte)
    out += /[A-Za-z0-9\-._~/]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`
  }
  return out
}

/** Whether `req` carries a valid SigV4 signature of the mock's key pair for bedrock; the reason when not. */
const checkSigV4 = (req: Request, rawPath: string, body: string): string => {
  const authorization = req.headers.get("authorization") ?? ""
  const match = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(authorization)
  if (match === null) return "no SigV4 authorization"
  const [, keyId, date, region, service, signedHeaders, signature] = match as unknown as [string, string, string, string, string, string, string]
  if (keyId !== MOCK_ACCESS_KEY_ID) return `unknown access key ${keyId}`
  if (service !== "bedrock") return `signed for service ${service}`
  const amzDate = req.headers.get("x-amz-date") ?? ""
  if (!amzDate.startsWith(date)) return "x-amz-date does not match the credential's date"
  const names = signedHeaders.split(";")
  if (!names.includes("host") || !names.includes("x-amz-date")) return "host and x-amz-date must be signed"
  const canonicalHeaders = names.map((name) => `${name}:${(req.headers.get(name) ?? "").trim().replace(/\s+/g, " ")}\n`).join("")
  const canonical = ["POST", uriEncodePath(rawPath), "", canonicalHeaders, signedHeaders, sha256(body)].join("\n")
  const scope = `${date}/${region}/${service}/aws4_request`
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n")
  const key = hmac(hmac(hmac(hmac(`AWS4${MOCK_SECRET_ACCESS_KEY}`, date), region), service), "aws4_request")
  const expected = createHmac("sha256", key).update(toSign).digest("hex")
  return expected === signature ? "sigv4" : "signature does not match"
}

// ------------------------------------------------------------------ answers

const ERRORS: Record<string, { status: number; type: string; message: string }> = {
  throttling: { status: 429, type: "ThrottlingException", message: "Too many requests, please wait before trying again." },
  validation: { status: 400, type: "ValidationException", message: "Malformed input request: messages: must not be empty" },
  context: { status: 400, type: "ValidationException", message: "Input is too long for requested model." },
  denied: { status: 403, type: "AccessDeniedException", message: "You don't have access to the model with the specified model ID." },
  unavailable: { status: 503, type: "ServiceUnavailableException", message: "Bedrock is unable to process your request." },
  internal: { status: 500, type: "InternalServerException", message: "The server encountered an internal error." },
}

const json = (value: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json", ...headers } })

const lastUserText = (body: { messages?: Array<{ role: string; content: Array<{ text?: string; toolResult?: { content: Array<{ text: string }> } }> }> }): string => {
  const messages = body.messages ?? []
  const last = messages[messages.length - 1]
  let text = ""
  for (const block of last?.content ?? []) text += block.text ?? block.toolResult?.content.map((c) => c.text).join("") ?? ""
  return text
}

const hasToolResult = (body: { messages?: Array<{ content: Array<{ toolResult?: unknown }> }> }): boolean =>
  (body.messages?.at(-1)?.content ?? []).some((block) => block.toolResult !== undefined)

/** The tool the request forces or offers first (structured output forces its answer tool). */
const forcedTool = (body: { toolConfig?: { tools: Array<{ toolSpec: { name: string } }>; toolChoice?: { tool?: { name: string } } } }): string | undefined =>
  body.toolConfig?.toolChoice?.tool?.name ?? body.toolConfig?.tools[0]?.toolSpec.name

const USAGE = { inputTokens: 11, outputTokens: 7, totalTokens: 18, cacheReadInputTokens: 2, cacheWriteInputTokens: 0 }

/** Deterministic unit vectors from the text (FNV-1a seeded steps). */
export const mockVector = (text: string, dimensions: number): Array<number> => {
  let h = 2166136261
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0
  const out: Array<number> = []
  let norm = 0
  for (let i = 0; i < dimensions; i++) {
    h = Math.imul(h ^ (i + 1), 2654435761) >>> 0
    const v = (h / 4294967296) * 2 - 1
    out.push(v)
    norm += v * v
  }
  const scale = 1 / Math.sqrt(norm)
  return out.map((v) => Math.fround(v * scale))
}

const invoke = (model: string, body: Record<string, unknown>): Response => {
  if (model.startsWith("amazon.titan-embed")) {
    const text = String(body["inputText"] ?? "")
    return json({ embedding: mockVector(text, Number(body["dimensions"] ?? 8)), inputTextTokenCount: Math.max(1, Math.ceil(text.length / 4)) })
  }
  if (model.startsWith("cohere.embed")) {
    const texts = (body["texts"] as Array<string>) ?? []
    // Cohere on Bedrock takes at most 96 texts a call.
    if (texts.length > 96) return json({ message: "Malformed input request: #/texts: expected maxItems: 96" }, 400, { "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/" })
    return json({ id: "emb-1", response_type: "embeddings_floats", texts, embeddings: texts.map((t) => mockVector(`${body["input_type"]}:${t}`, 8)) }, 200, {
      "x-amzn-bedrock-input-token-count": String(texts.reduce((n, t) => n + Math.max(1, Math.ceil(t.length / 4)), 0)),
    })
  }
  if (model.startsWith("cohere.rerank")) {
    const query = String(body["query"] ?? "")
    const documents = (body["documents"] as Array<string>) ?? []
    const words = new Set(query.toLowerCase().split(/\W+/).filter(Boolean))
    const results = documents
      .map((doc, index) => {
        const overlap = doc.toLowerCase().split(/\W+/).filter((w) => words.has(w)).length
        return { index, relevance_score: Math.round((overlap / (words.size || 1)) * 1000) / 1000 }
      })
      .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    const topN = typeof body["top_n"] === "number" ? body["top_n"] : results.length
    return json({ id: "rerank-1", results: results.slice(0, topN) })
  }
  return json({ message: `The provided model identifier is invalid: ${model}` }, 400, { "x-amzn-errortype": "ValidationException" })
}

type Body = Parameters<typeof lastUserText>[0] & Parameters<typeof forcedTool>[0]

const converse = (body: Body, scenario: string): Response => {
  const forced = forcedTool(body)
  const content: Array<unknown> = []
  let stopReason = "end_turn"
  if (scenario === "reasoning") content.push({ reasoningContent: { reasoningText: { text: "Thinking it over.", signature: "sig-1" } } })
  if (forced === "json_response") {
    content.push({ toolUse: { toolUseId: "tooluse_json", name: "json_response", input: { answer: "yes" } } })
    stopReason = "tool_use"
  } else if (scenario === "tool_call" && !hasToolResult(body) && forced !== undefined) {
    content.push({ text: "Let me check." }, { toolUse: { toolUseId: "tooluse_1", name: forced, input: { city: "Paris" } } })
    stopReason = "tool_use"
  } else content.push({ text: `Echo: ${lastUserText(body)}` })
  return json({ output: { message: { role: "assistant", content } }, stopReason, usage: USAGE, metrics: { latencyMs: 12 } })
}

const streamFrames = (body: Body, scenario: string, tokens: number, chunk: string, error: string | undefined): Array<Uint8Array> => {
  const frames: Array<Uint8Array> = [eventFrame("messageStart", { role: "assistant" })]
  // Overloaded after the 200, before anything of the answer.
  if (error === "stream-first") return [...frames, exceptionFrame("serviceUnavailableException", "Bedrock is unable to process your request.")]
  const forced = forcedTool(body)
  let stopReason = "end_turn"
  let index = 0
  if (scenario === "reasoning") {
    frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text: "Thinking " } } }))
    frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text: "it over." } } }))
    frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { signature: "sig-1" } } }))
    frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index++ }))
  }
  if (forced === "json_response" || (scenario === "tool_call" && !hasToolResult(body) && forced !== undefined)) {
    const name = forced as string
    const input = name === "json_response" ? '{"answer":"yes"}' : '{"city":"Paris"}'
    frames.push(eventFrame("contentBlockStart", { contentBlockIndex: index, start: { toolUse: { toolUseId: `tooluse_${index}`, name } } }))
    frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: input.slice(0, 5) } } }))
    frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: input.slice(5) } } }))
    frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index }))
    stopReason = "tool_use"
  } else {
    const text = hasToolResult(body) ? [`Echo: ${lastUserText(body)}`] : Array.from({ length: tokens }, () => chunk)
    for (let i = 0; i < text.length; i++) {
      if (error === "mid-stream" && i === 2) {
        frames.push(exceptionFrame("throttlingException", "Too many tokens per minute."))
        return frames
      }
      frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { text: text[i] } }))
    }
    frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index }))
  }
  frames.push(eventFrame("messageStop", { stopReason }))
  frames.push(eventFrame("metadata", { usage: USAGE, metrics: { latencyMs: 12 } }))
  return frames
}

/** The frames as one byte string, cut into pieces of `split` bytes (0: one piece). */
export const piecesOf = (frames: ReadonlyArray<Uint8Array>, split: number): Array<Uint8Array> => {
  const all = Buffer.concat(frames)
  if (split <= 0) return [all]
  const pieces: Array<Uint8Array> = []
  for (let at = 0; at < all.length; at += split) pieces.push(all.subarray(at, at + split))
  return pieces
}

/**
 * A plain text stream in one piece (the benchmark's answer) is the same bytes for the same deltas:
 * encoded once (the codec's CRCs in JS cost ~1-2 ms a 200-delta stream, which paced the bench's
 * Bedrock row at a third of its OpenAI row's streams per second), as mock-upstream.ts does.
 */
const plainStream = (body: Body, scenario: string, error: string | undefined, split: number): boolean =>
  scenario === "text" && error === undefined && split <= 0 && !hasToolResult(body) && forcedTool(body) === undefined
const encodedStreams = new Map<string, Array<Uint8Array>>()
const plainPieces = (tokens: number, chunk: string): Array<Uint8Array> => {
  const key = `${tokens}:${chunk}`
  let pieces = encodedStreams.get(key)
  if (pieces === undefined) {
    pieces = piecesOf(streamFrames({}, "text", tokens, chunk, undefined), 0)
    if (encodedStreams.size > 64) encodedStreams.clear()
    encodedStreams.set(key, pieces)
  }
  return pieces
}

export const startMockBedrock = async (options: { readonly port?: number } = {}): Promise<MockBedrock> => {
  const requests: Array<MockBedrockRequest> = []
  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const url = new URL(req.url)
      const rawPath = url.pathname
      const text = await req.text()
      const bearer = req.headers.get("authorization")
      const auth = bearer === `Bearer ${MOCK_BEDROCK_API_KEY}` ? "bearer" : checkSigV4(req, rawPath, text)
      const headers: Record<string, string> = {}
      req.headers.forEach((value, name) => {
        headers[name] = value
      })
      let body: Record<string, unknown> = {}
      try {
        body = JSON.parse(text) as Record<string, unknown>
      } catch {
        // Kept as {}: the log shows what came.
      }
      requests.push({ path: rawPath, headers, body, auth })
      if (requests.length > 1000) requests.shift()
      if (auth !== "sigv4" && auth !== "bearer") {
        return json({ message: `The request signature we calculated does not match the signature you provided: ${auth}` }, 403, { "x-amzn-errortype": "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/" })
      }
      const match = /^\/model\/([^/]+)\/(converse|converse-stream|invoke)$/.exec(rawPath)
      if (match === null) return json({ message: `Unknown operation ${rawPath}` }, 404, { "x-amzn-errortype": "UnknownOperationException" })
      const model = decodeURIComponent(match[1] as string)
      const operation = match[2]
      const error = req.headers.get("x-mock-error") ?? undefined
      const failure = error === undefined ? undefined : ERRORS[error]
      if (failure !== undefined) {
        return json({ message: failure.message }, failure.status, { "x-amzn-errortype": `${failure.type}:http://internal.amazon.com/coral/com.amazon.bedrock/`, ...(failure.status === 429 ? { "retry-after": "3" } : {}) })
      }
      if (operation === "invoke") return invoke(model, body)
      const scenario = req.headers.get("x-mock-scenario") ?? "text"
      if (operation === "converse") return converse(body as Body, scenario)
      const tokens = Number(req.headers.get("x-mock-tokens") ?? 5)
      const chunk = decodeURIComponent(req.headers.get("x-mock-chunk") ?? "tok ")
      const split = Number(req.headers.get("x-mock-split") ?? 0)
      const pieces = plainStream(body as Body, scenario, error, split) ? plainPieces(tokens, chunk) : piecesOf(streamFrames(body as Body, scenario, tokens, chunk, error), split)
      let i = 0
      const stream = new ReadableStream<Uint8Array>({
        type: "direct",
        async pull(controller: { write: (bytes: Uint8Array) => void; flush: () => Promise<void> | number; close: () => void }) {
          // One write and flush per piece: a frame spans the gateway's reads.
          for (; i < pieces.length; i++) {
            controller.write(pieces[i] as Uint8Array)
            await controller.flush()
            if (pieces.length > 1) await Bun.sleep(1)
          }
          controller.close()
        },
      } as unknown as UnderlyingDefaultSource<Uint8Array>)
      return new Response(stream, { headers: { "content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "req-1" } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    stop: async () => {
      await server.stop(true)
    },
  }
}

if (import.meta.main) {
  const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 9100)
  const mock = await startMockBedrock({ port })
  console.log(`mock bedrock on ${mock.url}`)
}
