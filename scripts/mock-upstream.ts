#!/usr/bin/env bun
/**
 * A mock upstream speaking the three wire formats the gateway calls: Chat Completions
 * (`/v1/chat/completions`), Responses (`/v1/responses`) and Anthropic Messages (`/v1/messages`),
 * as JSON and as SSE in each format's real event sequence. For tests, manual runs and
 * benchmarks (so constant bytes are encoded once, and a repeated delta is encoded once per request).
 *
 * Defaults come from the options (or CLI flags); each request may override them with headers,
 * which is how several configured "providers" with different behaviour share one mock:
 *   x-mock-delay-ms       delay before the response head
 *   x-mock-ttft-ms        delay before the first token
 *   x-mock-tokens         number of deltas (default 5)
 *   x-mock-interval-ms    delay between deltas
 *   x-mock-chunk          text of each delta (default "tok ")
 *   x-mock-chunk-uri      the same, percent-encoded (for text with newlines or non-ASCII)
 *   x-mock-finish         length: the Chat answer ends with finish_reason "length" (cut by the token limit)
 *   x-mock-error          400 401 403 429 500 503 529 context_length overloaded
 *                         reset-mid-stream (socket closed after 2 deltas)
 *                         mid-stream-error (the format's error event after 2 deltas) hang
 *   x-mock-error-rate     probability (0..1) of a 500
 *   x-mock-scenario       text | tool_call | reasoning
 *   x-mock-server-tool-calls  offered datetime/web_search/web_fetch/fusion: calls to make before answering (default each once)
 *   x-mock-after-tools    chunk: once done with server tools, answer the chunk (x-mock-chunk…), not "Tool output: …"
 *   x-mock-usage-input / x-mock-usage-output / x-mock-usage-cached / x-mock-usage-cache-write
 *
 * CLI: bun scripts/mock-upstream.ts --port 9000 [--host 127.0.0.1] [--ttft-ms N] [--delay-ms N]
 *      [--tokens N] [--interval-ms N] [--chunk S] [--error E] [--error-rate P] [--scenario S]
 *      [--usage-input N] [--usage-output N] [--log N]
 * POST /v1/moderations answers as OpenAI's moderation API: an input containing "FLAG:<category>"
 * (e.g. FLAG:violence) is flagged in that category; x-mock-error 500/503/hang fail it;
 * x-mock-delay-ms delays its answer.
 * GET /__mock/requests, GET /__mock/stats and POST /__mock/reset expose the log and the counts.
 */

export type MockScenario = "text" | "tool_call" | "reasoning"

export type MockError =
  | "400"
  | "401"
  | "403"
  | "429"
  | "500"
  | "503"
  | "529"
  | "context_length"
  | "overloaded"
  | "reset-mid-stream"
  | "mid-stream-error"
  | "hang"

export interface MockUpstreamOptions {
  /** 0 (default) picks a free port. */
  readonly port?: number
  readonly hostname?: string
  readonly delayMs?: number
  readonly ttftMs?: number
  readonly tokens?: number
  readonly intervalMs?: number
  readonly chunk?: string
  readonly error?: MockError
  readonly errorRate?: number
  readonly scenario?: MockScenario
  readonly usageInput?: number
  readonly usageOutput?: number
  readonly usageCached?: number
  readonly usageCacheWrite?: number
  /** How many requests the log keeps (the newest); 0 turns logging off. Default 1000. */
  readonly maxLoggedRequests?: number
}

export interface MockRequest {
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: unknown
}

export interface MockStats {
  /** Streams in progress now. */
  open: number
  completed: number
  /** Streams whose client went away before the end. */
  aborted: number
  /** Streams the mock broke on purpose (reset-mid-stream, mid-stream-error). */
  failed: number
  /** Bytes of stream bodies handed to the sockets (a reader that does not read holds this back). */
  sent: number
}

export interface MockUpstream {
  readonly port: number
  /** The base URL to configure as a provider's base_url, e.g. http://127.0.0.1:PORT/v1. */
  readonly url: string
  /** The live request log (oldest first). */
  readonly requests: Array<MockRequest>
  /** The live stream counters. */
  readonly stats: MockStats
  readonly reset: () => void
  readonly stop: () => Promise<void>
}

interface Knobs {
  readonly delayMs: number
  readonly ttftMs: number
  readonly tokens: number
  readonly intervalMs: number
  readonly chunk: string
  readonly finish: string | undefined
  readonly error: string | undefined
  readonly errorRate: number
  readonly scenario: string
  readonly usageInput: number
  readonly usageOutput: number | undefined
  readonly usageCached: number
  readonly usageCacheWrite: number
  /** `x-mock-server-tool-calls`: server-tool calls to make before answering (default: each offered tool once). */
  readonly serverToolCalls?: number | undefined
  /** `x-mock-after-tools: chunk`: the answer after server-tool calls is the usual chunk (e.g. a judge's JSON). */
  readonly chunkAfterTools?: boolean
}

/** What to answer, independent of the wire format. */
interface Answer {
  readonly model: string
  readonly created: number
  /** The delta text and the same as JSON string content (escaped, without quotes). */
  readonly chunk: string
  readonly chunkJson: string
  /** The Chat finish reason of a text answer (default "stop"). */
  readonly finish: string
  readonly reasoningDeltas: number
  readonly textDeltas: number
  readonly tool: { readonly name: string; readonly pieces: ReadonlyArray<string>; readonly args: string } | undefined
  readonly usage: {
    readonly input: number
    readonly output: number
    readonly reasoning: number
    readonly cached: number
    readonly cacheWrite: number
  }
}

/** A stream's bytes, one entry per event; `delta` marks the token frames that pacing applies to. */
class Frames {
  readonly bytes: Array<Uint8Array> = []
  readonly delta: Array<boolean> = []
  add(bytes: Uint8Array, delta = false): void {
    this.bytes.push(bytes)
    this.delta.push(delta)
  }
}

interface MockFormat {
  readonly json: (answer: Answer) => string
  readonly stream: (answer: Answer, body: Record<string, unknown>) => Frames
  /** The format's in-stream error event, placed as frame `index`. */
  readonly midStreamError: (index: number) => Uint8Array
  readonly errors: Record<string, PreparedError>
  readonly toolName: (body: Record<string, unknown>) => string | undefined
  /** The conversation as the server-tool behaviour reads it. */
  readonly conversation: (body: Record<string, unknown>) => Conversation
}

/** What a request says about tools: offered names, `tool_choice: none`, calls made, the last input if a tool's output, the last user text. */
interface Conversation {
  readonly offered: ReadonlyArray<string>
  readonly toolsOff: boolean
  readonly called: ReadonlyArray<string>
  readonly lastToolOutput: string | undefined
  readonly lastUserText: string
}

/** Function tools the mock calls when offered (the gateway's server tools): see `serverToolAnswer`. */
const SERVER_TOOL_NAMES: ReadonlySet<string> = new Set(["datetime", "web_search", "web_fetch", "fusion"])

const arrayOf = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

/** The text of a content value: a string, or the `text` of its parts. */
const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  let text = ""
  for (const part of arrayOf(content)) {
    const record = recordOf(part)
    if (typeof record?.["text"] === "string") text += record["text"]
    else if (record?.["type"] === "tool_result") text += textOf(record["content"])
  }
  return text
}

interface PreparedError {
  readonly status: number
  readonly body: Uint8Array<ArrayBuffer>
  readonly headers: Record<string, string>
}

const encoder = new TextEncoder()
const bytes = (text: string): Uint8Array => encoder.encode(text)

const REASONING_CHUNK = "think "
const REASONING_JSON = JSON.stringify(REASONING_CHUNK)
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" }
const JSON_HEADERS = { "content-type": "application/json" }
const DONE = bytes("data: [DONE]\n\n")
/** A stream body queues ~64 KB ahead of its socket, so a reader that stops reading stops the stream. */
const QUEUE: QueuingStrategy<Uint8Array> = { highWaterMark: 64 * 1024, size: (chunk) => chunk?.byteLength ?? 0 }

const recordOf = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined

const firstTool = (body: Record<string, unknown>): Record<string, unknown> | undefined => {
  const tools = body["tools"]
  return Array.isArray(tools) ? recordOf(tools[0]) : undefined
}

const stringOf = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

// ---------------------------------------------------------------- errors, per format

interface ErrorSpec {
  readonly status: number
  readonly message: string
  readonly openAiType: string
  readonly openAiCode: string | null
  readonly anthropicType: string
}

const ERROR_SPECS: Record<string, ErrorSpec> = {
  "400": { status: 400, message: "mock: invalid request", openAiType: "invalid_request_error", openAiCode: null, anthropicType: "invalid_request_error" },
  "401": { status: 401, message: "mock: invalid api key", openAiType: "invalid_request_error", openAiCode: "invalid_api_key", anthropicType: "authentication_error" },
  "403": { status: 403, message: "mock: forbidden", openAiType: "invalid_request_error", openAiCode: "forbidden", anthropicType: "permission_error" },
  "429": { status: 429, message: "mock: rate limit reached", openAiType: "requests", openAiCode: "rate_limit_exceeded", anthropicType: "rate_limit_error" },
  "500": { status: 500, message: "mock: internal server error", openAiType: "server_error", openAiCode: null, anthropicType: "api_error" },
  "503": { status: 503, message: "mock: service unavailable", openAiType: "server_error", openAiCode: null, anthropicType: "api_error" },
  "529": { status: 529, message: "mock: overloaded", openAiType: "overloaded_error", openAiCode: null, anthropicType: "overloaded_error" },
  overloaded: { status: 529, message: "Overloaded", openAiType: "overloaded_error", openAiCode: "overloaded_error", anthropicType: "overloaded_error" },
}

const OPENAI_CONTEXT_LENGTH =
  "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens. Please reduce the length of the messages."

const prepared = (status: number, body: unknown): PreparedError => ({
  status,
  // Copied once into its own ArrayBuffer: the type a Response body takes.
  body: new Uint8Array(bytes(JSON.stringify(body))),
  headers: status === 429 ? { ...JSON_HEADERS, "retry-after": "1" } : JSON_HEADERS,
})

const openAiErrors = (): Record<string, PreparedError> => {
  const out: Record<string, PreparedError> = {}
  for (const [name, spec] of Object.entries(ERROR_SPECS)) {
    // OpenAI never sends 529; its overload is a 503 with an overloaded code.
    const status = name === "overloaded" ? 503 : spec.status
    out[name] = prepared(status, { error: { message: spec.message, type: spec.openAiType, param: null, code: spec.openAiCode } })
  }
  out["context_length"] = prepared(400, {
    error: { message: OPENAI_CONTEXT_LENGTH, type: "invalid_request_error", param: "messages", code: "context_length_exceeded" },
  })
  return out
}

const anthropicErrors = (): Record<string, PreparedError> => {
  const out: Record<string, PreparedError> = {}
  for (const [name, spec] of Object.entries(ERROR_SPECS)) {
    out[name] = prepared(spec.status, { type: "error", error: { type: spec.anthropicType, message: spec.message } })
  }
  out["context_length"] = prepared(400, {
    type: "error",
    error: { type: "invalid_request_error", message: "prompt is too long: 200000 tokens > 199999 maximum" },
  })
  return out
}

// ---------------------------------------------------------------- Chat Completions

const chatUsageJson = (answer: Answer): string =>
  `{"prompt_tokens":${answer.usage.input},"completion_tokens":${answer.usage.output},"total_tokens":${answer.usage.input + answer.usage.output},` +
  `"prompt_tokens_details":{"cached_tokens":${answer.usage.cached}},"completion_tokens_details":{"reasoning_tokens":${answer.usage.reasoning}}}`

const chatFormat: MockFormat = {
  json: (answer) => {
    const message: Record<string, unknown> = {
      role: "assistant",
      content: answer.tool === undefined ? answer.chunk.repeat(answer.textDeltas) : null,
      refusal: null,
    }
    if (answer.reasoningDeltas > 0) message["reasoning_content"] = REASONING_CHUNK.repeat(answer.reasoningDeltas)
    if (answer.tool !== undefined) {
      message["tool_calls"] = [{ id: "call_mock_0", type: "function", function: { name: answer.tool.name, arguments: answer.tool.args } }]
    }
    return (
      `{"id":"chatcmpl-mock","object":"chat.completion","created":${answer.created},"model":${JSON.stringify(answer.model)},` +
      `"choices":[{"index":0,"message":${JSON.stringify(message)},"logprobs":null,"finish_reason":"${answer.tool === undefined ? answer.finish : "tool_calls"}"}],` +
      `"usage":${chatUsageJson(answer)}}`
    )
  },
  stream: (answer, body) => {
    const head = `data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":${answer.created},"model":${JSON.stringify(answer.model)},"choices":[`
    const frames = new Frames()
    frames.add(bytes(head + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`))
    if (answer.reasoningDeltas > 0) {
      const delta = bytes(head + `{"index":0,"delta":{"reasoning_content":${REASONING_JSON}},"finish_reason":null}]}\n\n`)
      for (let i = 0; i < answer.reasoningDeltas; i++) frames.add(delta, true)
    }
    if (answer.tool !== undefined) {
      const name = JSON.stringify(answer.tool.name)
      frames.add(
        bytes(
          head +
            `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_mock_0","type":"function","function":{"name":${name},"arguments":""}}]},"finish_reason":null}]}\n\n`,
        ),
      )
      for (const piece of answer.tool.pieces) {
        frames.add(bytes(head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":${JSON.stringify(piece)}}}]},"finish_reason":null}]}\n\n`), true)
      }
    } else {
      const delta = bytes(head + `{"index":0,"delta":{"content":"${answer.chunkJson}"},"finish_reason":null}]}\n\n`)
      for (let i = 0; i < answer.textDeltas; i++) frames.add(delta, true)
    }
    frames.add(bytes(head + `{"index":0,"delta":{},"finish_reason":"${answer.tool === undefined ? answer.finish : "tool_calls"}"}]}\n\n`))
    if (recordOf(body["stream_options"])?.["include_usage"] === true) frames.add(bytes(head + `],"usage":${chatUsageJson(answer)}}\n\n`))
    frames.add(DONE)
    return frames
  },
  midStreamError: () => CHAT_STREAM_ERROR,
  errors: openAiErrors(),
  toolName: (body) => stringOf(recordOf(firstTool(body)?.["function"])?.["name"]),
  conversation: (body) => {
    const messages = arrayOf(body["messages"]).map((m) => recordOf(m) ?? {})
    const called: Array<string> = []
    let lastUserText = ""
    for (const m of messages) {
      for (const call of arrayOf(m["tool_calls"])) called.push(stringOf(recordOf(recordOf(call)?.["function"])?.["name"]) ?? "")
      if (m["role"] === "user") lastUserText = textOf(m["content"])
    }
    const last = messages[messages.length - 1]
    return {
      offered: arrayOf(body["tools"]).map((t) => stringOf(recordOf(recordOf(t)?.["function"])?.["name"]) ?? ""),
      toolsOff: body["tool_choice"] === "none",
      called,
      lastToolOutput: last?.["role"] === "tool" ? textOf(last["content"]) : undefined,
      lastUserText,
    }
  },
}

const CHAT_STREAM_ERROR = bytes(`data: {"error":{"message":"mock: failed mid-stream","type":"server_error","param":null,"code":null}}\n\n`)

// ---------------------------------------------------------------- Responses

const responsesUsageJson = (answer: Answer): string =>
  `{"input_tokens":${answer.usage.input},"input_tokens_details":{"cached_tokens":${answer.usage.cached}},` +
  `"output_tokens":${answer.usage.output},"output_tokens_details":{"reasoning_tokens":${answer.usage.reasoning}},` +
  `"total_tokens":${answer.usage.input + answer.usage.output}}`

const reasoningItem = (answer: Answer, done: boolean): string =>
  `{"id":"rs_mock","type":"reasoning","summary":[${done ? `{"type":"summary_text","text":${JSON.stringify(REASONING_CHUNK.repeat(answer.reasoningDeltas))}}` : ""}]}`

const messageItem = (answer: Answer, done: boolean): string =>
  `{"id":"msg_mock","type":"message","status":"${done ? "completed" : "in_progress"}","role":"assistant","content":[${
    done ? `{"type":"output_text","annotations":[],"logprobs":[],"text":"${answer.chunkJson.repeat(answer.textDeltas)}"}` : ""
  }]}`

const functionCallItem = (answer: Answer, done: boolean): string =>
  `{"id":"fc_mock","type":"function_call","status":"${done ? "completed" : "in_progress"}","arguments":${
    done ? JSON.stringify(answer.tool?.args ?? "") : '""'
  },"call_id":"call_mock_0","name":${JSON.stringify(answer.tool?.name ?? "")}}`

const responseObject = (answer: Answer, done: boolean): string => {
  const output: Array<string> = []
  if (done) {
    if (answer.reasoningDeltas > 0) output.push(reasoningItem(answer, true))
    output.push(answer.tool === undefined ? messageItem(answer, true) : functionCallItem(answer, true))
  }
  return (
    `{"id":"resp_mock","object":"response","created_at":${answer.created},"status":"${done ? "completed" : "in_progress"}",` +
    `"error":null,"incomplete_details":null,"model":${JSON.stringify(answer.model)},"output":[${output.join(",")}],` +
    `"parallel_tool_calls":true,"store":false,"usage":${done ? responsesUsageJson(answer) : "null"}}`
  )
}

const responsesFormat: MockFormat = {
  json: (answer) => responseObject(answer, true),
  stream: (answer) => {
    const frames = new Frames()
    // Every frame is one event, so an event's sequence_number is its frame index.
    const add = (type: string, rest: string, delta = false): void =>
      frames.add(bytes(`event: ${type}\ndata: {"type":"${type}","sequence_number":${frames.bytes.length}${rest}}\n\n`), delta)
    add("response.created", `,"response":${responseObject(answer, false)}`)
    add("response.in_progress", `,"response":${responseObject(answer, false)}`)
    let outputIndex = 0
    if (answer.reasoningDeltas > 0) {
      const at = `,"item_id":"rs_mock","output_index":${outputIndex}`
      add("response.output_item.added", `,"output_index":${outputIndex},"item":${reasoningItem(answer, false)}`)
      add("response.reasoning_summary_part.added", `${at},"summary_index":0,"part":{"type":"summary_text","text":""}`)
      for (let i = 0; i < answer.reasoningDeltas; i++) add("response.reasoning_summary_text.delta", `${at},"summary_index":0,"delta":${REASONING_JSON}`, true)
      const text = JSON.stringify(REASONING_CHUNK.repeat(answer.reasoningDeltas))
      add("response.reasoning_summary_text.done", `${at},"summary_index":0,"text":${text}`)
      add("response.reasoning_summary_part.done", `${at},"summary_index":0,"part":{"type":"summary_text","text":${text}}`)
      add("response.output_item.done", `,"output_index":${outputIndex},"item":${reasoningItem(answer, true)}`)
      outputIndex++
    }
    if (answer.tool !== undefined) {
      const at = `,"item_id":"fc_mock","output_index":${outputIndex}`
      add("response.output_item.added", `,"output_index":${outputIndex},"item":${functionCallItem(answer, false)}`)
      for (const piece of answer.tool.pieces) add("response.function_call_arguments.delta", `${at},"delta":${JSON.stringify(piece)}`, true)
      add("response.function_call_arguments.done", `${at},"arguments":${JSON.stringify(answer.tool.args)}`)
      add("response.output_item.done", `,"output_index":${outputIndex},"item":${functionCallItem(answer, true)}`)
    } else {
      const at = `,"item_id":"msg_mock","output_index":${outputIndex},"content_index":0`
      add("response.output_item.added", `,"output_index":${outputIndex},"item":${messageItem(answer, false)}`)
      add("response.content_part.added", `${at},"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`)
      const tail = `,"delta":"${answer.chunkJson}","logprobs":[]}\n\n`
      for (let i = 0; i < answer.textDeltas; i++) {
        frames.add(
          bytes(`event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${frames.bytes.length}${at}${tail}`),
          true,
        )
      }
      const text = `"${answer.chunkJson.repeat(answer.textDeltas)}"`
      add("response.output_text.done", `${at},"text":${text},"logprobs":[]`)
      add("response.content_part.done", `${at},"part":{"type":"output_text","annotations":[],"logprobs":[],"text":${text}}`)
      add("response.output_item.done", `,"output_index":${outputIndex},"item":${messageItem(answer, true)}`)
    }
    add("response.completed", `,"response":${responseObject(answer, true)}`)
    return frames
  },
  midStreamError: (index) =>
    bytes(
      `event: response.failed\ndata: {"type":"response.failed","sequence_number":${index},"response":{"id":"resp_mock","object":"response","status":"failed",` +
        `"error":{"code":"server_error","message":"mock: failed mid-stream"},"incomplete_details":null,"output":[],"usage":null}}\n\n`,
    ),
  errors: openAiErrors(),
  toolName: (body) => stringOf(firstTool(body)?.["name"]),
  conversation: (body) => {
    const input = body["input"]
    const items = typeof input === "string" ? [{ type: "message", role: "user", content: input }] : arrayOf(input).map((i) => recordOf(i) ?? {})
    const called: Array<string> = []
    let lastUserText = ""
    for (const item of items) {
      if (item["type"] === "function_call") called.push(stringOf(item["name"]) ?? "")
      if (item["role"] === "user") lastUserText = textOf(item["content"])
    }
    const last = items[items.length - 1]
    return {
      offered: arrayOf(body["tools"]).map((t) => stringOf(recordOf(t)?.["name"]) ?? ""),
      toolsOff: body["tool_choice"] === "none",
      called,
      lastToolOutput: last?.["type"] === "function_call_output" ? textOf(last["output"]) : undefined,
      lastUserText,
    }
  },
}

// ---------------------------------------------------------------- Anthropic Messages

const anthropicUsageJson = (answer: Answer, output: number): string =>
  `{"input_tokens":${answer.usage.input},"cache_creation_input_tokens":${answer.usage.cacheWrite},` +
  `"cache_read_input_tokens":${answer.usage.cached},"output_tokens":${output}}`

const ANTHROPIC_PING = bytes(`event: ping\ndata: {"type": "ping"}\n\n`)
const ANTHROPIC_STOP = bytes(`event: message_stop\ndata: {"type":"message_stop"}\n\n`)
const ANTHROPIC_STREAM_ERROR = bytes(`event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`)

const blockStop = (index: number): Uint8Array => bytes(`event: content_block_stop\ndata: {"type":"content_block_stop","index":${index}}\n\n`)

const anthropicFormat: MockFormat = {
  json: (answer) => {
    const content: Array<unknown> = []
    if (answer.reasoningDeltas > 0) {
      content.push({ type: "thinking", thinking: REASONING_CHUNK.repeat(answer.reasoningDeltas), signature: "mock-signature" })
    }
    if (answer.tool !== undefined) {
      content.push({ type: "tool_use", id: "toolu_mock_0", name: answer.tool.name, input: JSON.parse(answer.tool.args) })
    } else {
      content.push({ type: "text", text: answer.chunk.repeat(answer.textDeltas) })
    }
    return (
      `{"id":"msg_mock","type":"message","role":"assistant","model":${JSON.stringify(answer.model)},"content":${JSON.stringify(content)},` +
      `"stop_reason":"${answer.tool === undefined ? "end_turn" : "tool_use"}","stop_sequence":null,"usage":${anthropicUsageJson(answer, answer.usage.output)}}`
    )
  },
  stream: (answer) => {
    const frames = new Frames()
    const event = (type: string, data: string): Uint8Array => bytes(`event: ${type}\ndata: ${data}\n\n`)
    frames.add(
      event(
        "message_start",
        `{"type":"message_start","message":{"id":"msg_mock","type":"message","role":"assistant","model":${JSON.stringify(answer.model)},` +
          `"content":[],"stop_reason":null,"stop_sequence":null,"usage":${anthropicUsageJson(answer, 1)}}}`,
      ),
    )
    frames.add(ANTHROPIC_PING)
    let index = 0
    if (answer.reasoningDeltas > 0) {
      frames.add(event("content_block_start", `{"type":"content_block_start","index":${index},"content_block":{"type":"thinking","thinking":"","signature":""}}`))
      const delta = event("content_block_delta", `{"type":"content_block_delta","index":${index},"delta":{"type":"thinking_delta","thinking":${REASONING_JSON}}}`)
      for (let i = 0; i < answer.reasoningDeltas; i++) frames.add(delta, true)
      frames.add(event("content_block_delta", `{"type":"content_block_delta","index":${index},"delta":{"type":"signature_delta","signature":"mock-signature"}}`))
      frames.add(blockStop(index))
      index++
    }
    if (answer.tool !== undefined) {
      frames.add(
        event(
          "content_block_start",
          `{"type":"content_block_start","index":${index},"content_block":{"type":"tool_use","id":"toolu_mock_0","name":${JSON.stringify(answer.tool.name)},"input":{}}}`,
        ),
      )
      for (const piece of answer.tool.pieces) {
        frames.add(
          event("content_block_delta", `{"type":"content_block_delta","index":${index},"delta":{"type":"input_json_delta","partial_json":${JSON.stringify(piece)}}}`),
          true,
        )
      }
    } else {
      frames.add(event("content_block_start", `{"type":"content_block_start","index":${index},"content_block":{"type":"text","text":""}}`))
      const delta = event("content_block_delta", `{"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":"${answer.chunkJson}"}}`)
      for (let i = 0; i < answer.textDeltas; i++) frames.add(delta, true)
    }
    frames.add(blockStop(index))
    frames.add(
      event(
        "message_delta",
        `{"type":"message_delta","delta":{"stop_reason":"${answer.tool === undefined ? "end_turn" : "tool_use"}","stop_sequence":null},"usage":{"output_tokens":${answer.usage.output}}}`,
      ),
    )
    frames.add(ANTHROPIC_STOP)
    return frames
  },
  midStreamError: () => ANTHROPIC_STREAM_ERROR,
  errors: anthropicErrors(),
  toolName: (body) => stringOf(firstTool(body)?.["name"]),
  conversation: (body) => {
    const messages = arrayOf(body["messages"]).map((m) => recordOf(m) ?? {})
    const called: Array<string> = []
    let lastUserText = ""
    let lastToolOutput: string | undefined
    for (const m of messages) {
      const blocks = typeof m["content"] === "string" ? [] : arrayOf(m["content"]).map((b) => recordOf(b) ?? {})
      for (const block of blocks) if (block["type"] === "tool_use") called.push(stringOf(block["name"]) ?? "")
      const results = blocks.filter((b) => b["type"] === "tool_result")
      if (m["role"] === "user") {
        lastToolOutput = results.length > 0 ? textOf(results[results.length - 1]?.["content"]) : undefined
        const text = typeof m["content"] === "string" ? m["content"] : textOf(blocks.filter((b) => b["type"] === "text"))
        if (text !== "") lastUserText = text
      }
    }
    return {
      offered: arrayOf(body["tools"]).map((t) => stringOf(recordOf(t)?.["name"]) ?? ""),
      toolsOff: recordOf(body["tool_choice"])?.["type"] === "none",
      called,
      lastToolOutput,
      lastUserText,
    }
  },
}

// ---------------------------------------------------------------- the server

const DEFAULT_KNOBS: Knobs = {
  delayMs: 0,
  ttftMs: 0,
  tokens: 5,
  intervalMs: 0,
  chunk: "tok ",
  finish: undefined,
  error: undefined,
  errorRate: 0,
  scenario: "text",
  usageInput: 10,
  usageOutput: undefined,
  usageCached: 0,
  usageCacheWrite: 0,
}

const knobsOf = (options: MockUpstreamOptions): Knobs => ({
  delayMs: options.delayMs ?? DEFAULT_KNOBS.delayMs,
  ttftMs: options.ttftMs ?? DEFAULT_KNOBS.ttftMs,
  tokens: options.tokens ?? DEFAULT_KNOBS.tokens,
  intervalMs: options.intervalMs ?? DEFAULT_KNOBS.intervalMs,
  chunk: options.chunk ?? DEFAULT_KNOBS.chunk,
  finish: undefined,
  error: options.error,
  errorRate: options.errorRate ?? DEFAULT_KNOBS.errorRate,
  scenario: options.scenario ?? DEFAULT_KNOBS.scenario,
  usageInput: options.usageInput ?? DEFAULT_KNOBS.usageInput,
  usageOutput: options.usageOutput,
  usageCached: options.usageCached ?? DEFAULT_KNOBS.usageCached,
  usageCacheWrite: options.usageCacheWrite ?? DEFAULT_KNOBS.usageCacheWrite,
})

const numberHeader = (headers: Headers, name: string, fallback: number): number => {
  const value = headers.get(name)
  if (value === null) return fallback
  const parsed = Number(value)
  return Number.isFinite(parsed) ? parsed : fallback
}

/** The request's knobs: the server's defaults unless an `x-mock-*` header says otherwise. */
const requestKnobs = (headers: Headers, base: Knobs): Knobs => {
  const output = headers.get("x-mock-usage-output")
  return {
    delayMs: numberHeader(headers, "x-mock-delay-ms", base.delayMs),
    ttftMs: numberHeader(headers, "x-mock-ttft-ms", base.ttftMs),
    tokens: Math.max(0, Math.floor(numberHeader(headers, "x-mock-tokens", base.tokens))),
    intervalMs: numberHeader(headers, "x-mock-interval-ms", base.intervalMs),
    chunk: chunkOf(headers) ?? base.chunk,
    finish: headers.get("x-mock-finish") ?? base.finish,
    error: headers.get("x-mock-error") ?? base.error,
    errorRate: numberHeader(headers, "x-mock-error-rate", base.errorRate),
    scenario: headers.get("x-mock-scenario") ?? base.scenario,
    usageInput: numberHeader(headers, "x-mock-usage-input", base.usageInput),
    usageOutput: output === null ? base.usageOutput : Number(output),
    usageCached: numberHeader(headers, "x-mock-usage-cached", base.usageCached),
    usageCacheWrite: numberHeader(headers, "x-mock-usage-cache-write", base.usageCacheWrite),
    serverToolCalls: headers.get("x-mock-server-tool-calls") === null ? undefined : numberHeader(headers, "x-mock-server-tool-calls", 0),
    chunkAfterTools: headers.get("x-mock-after-tools") === "chunk",
  }
}

const chunkOf = (headers: Headers): string | undefined => {
  const encoded = headers.get("x-mock-chunk-uri")
  return encoded === null ? (headers.get("x-mock-chunk") ?? undefined) : decodeURIComponent(encoded)
}

const chunkJsonCache = new Map<string, string>()
/** The chunk as JSON string content; cached since one server sees few distinct chunks. */
const chunkJsonOf = (chunk: string): string => {
  let json = chunkJsonCache.get(chunk)
  if (json === undefined) {
    json = JSON.stringify(chunk).slice(1, -1)
    if (chunkJsonCache.size < 64) chunkJsonCache.set(chunk, json)
  }
  return json
}

const answerOf = (knobs: Knobs, body: Record<string, unknown>, format: MockFormat): Answer => {
  const chunkJson = chunkJsonOf(knobs.chunk)
  const reasoningDeltas = knobs.scenario === "reasoning" ? knobs.tokens : 0
  let tool: Answer["tool"]
  let textDeltas = knobs.tokens
  const serverTool = knobs.scenario === "tool_call" ? undefined : serverToolAnswer(format.conversation(body), knobs)
  if (serverTool !== undefined) {
    const chunk = serverTool.text ?? ""
    return {
      model: stringOf(body["model"]) ?? "mock-model",
      created: Math.floor(Date.now() / 1000),
      chunk,
      chunkJson: JSON.stringify(chunk).slice(1, -1),
      finish: "stop",
      // The reasoning scenario thinks before its tool calls too, as a thinking model does.
      reasoningDeltas,
      textDeltas: serverTool.text === undefined ? 0 : 1,
      tool: serverTool.call,
      usage: { input: knobs.usageInput, output: knobs.usageOutput ?? 1, reasoning: reasoningDeltas, cached: knobs.usageCached, cacheWrite: knobs.usageCacheWrite },
    }
  }
  if (knobs.scenario === "tool_call") {
    const count = Math.max(1, knobs.tokens)
    // The arguments `{"input":"<chunk × count>"}` cut into `count` deltas.
    const pieces = new Array<string>(count).fill(chunkJson)
    pieces[0] = '{"input":"' + chunkJson
    pieces[count - 1] += '"}'
    tool = { name: format.toolName(body) ?? "mock_tool", pieces, args: pieces.join("") }
    textDeltas = 0
  }
  const deltas = reasoningDeltas + textDeltas + (tool?.pieces.length ?? 0)
  return {
    model: stringOf(body["model"]) ?? "mock-model",
    created: Math.floor(Date.now() / 1000),
    chunk: knobs.chunk,
    chunkJson,
    finish: knobs.finish ?? "stop",
    reasoningDeltas,
    textDeltas,
    tool,
    usage: {
      input: knobs.usageInput,
      output: knobs.usageOutput ?? deltas,
      reasoning: reasoningDeltas,
      cached: knobs.usageCached,
      cacheWrite: knobs.usageCacheWrite,
    },
  }
}

/**
 * The gateway's server tools (docs/server-tools.md): offered a function tool named `datetime`, `web_search`,
 * `web_fetch` or `fusion`, the mock calls the first one the conversation has no call of yet (arguments
 * `{"query": <last user text>}`, web_fetch `{"url": <its first URL>}`, fusion `{"prompt": <last user text>}`; `x-mock-server-tool-calls: N` calls them until N calls were made,
 * for loops that run out of budget); when the last input is a tool's output it answers
 * "Tool output: <output>", so a test can see what the model was given. `tool_choice: none` (the
 * loop's last turn) gets that text answer too, or "No tool output." without one.
 */
const serverToolAnswer = (c: Conversation, knobs: Knobs): { readonly call?: Answer["tool"]; readonly text?: string } | undefined => {
  const offered = c.offered.filter((name) => SERVER_TOOL_NAMES.has(name))
  if (offered.length === 0) return undefined
  // Undefined: the usual answer (the chunk), as if no tool were offered.
  const answer = knobs.chunkAfterTools ? undefined : { text: c.lastToolOutput === undefined ? "No tool output." : `Tool output: ${c.lastToolOutput}` }
  if (c.toolsOff) return answer
  const wanted = knobs.serverToolCalls
  let name: string | undefined
  if (wanted === undefined) {
    if (c.lastToolOutput !== undefined) return answer
    name = offered.find((n) => !c.called.includes(n))
  } else if (c.called.filter((n) => SERVER_TOOL_NAMES.has(n)).length < wanted) {
    name = offered[c.called.length % offered.length]
  }
  if (name === undefined) return answer
  // web_fetch: the first URL of the last user text (else the text, which the tool refuses as a URL).
  const args =
    name === "datetime"
      ? "{}"
      : name === "web_fetch"
        ? JSON.stringify({ url: /https?:\/\/[^\s"'<>]+/.exec(c.lastUserText)?.[0] ?? c.lastUserText })
        : name === "fusion"
          ? JSON.stringify({ prompt: c.lastUserText })
          : JSON.stringify({ query: c.lastUserText })
  return { call: { name, pieces: [args], args } }
}

const sleep = (ms: number): Promise<void> => (ms > 0 ? Bun.sleep(ms) : Promise.resolve())

const FORMATS: Record<string, MockFormat> = {
  "/v1/chat/completions": chatFormat,
  "/v1/responses": responsesFormat,
  "/v1/messages": anthropicFormat,
}

export const startMockUpstream = async (options: MockUpstreamOptions = {}): Promise<MockUpstream> => {
  const defaults = knobsOf(options)
  const maxLogged = options.maxLoggedRequests ?? 1000
  const requests: Array<MockRequest> = []
  const stats: MockStats = { open: 0, completed: 0, aborted: 0, failed: 0, sent: 0 }
  /** Resolvers of `hang` requests, released on stop. */
  const hanging = new Set<() => void>()

  const streamResponse = (frames: Frames, knobs: Knobs, format: MockFormat, signal: AbortSignal): Response => {
    stats.open++
    let ended = false
    const end = (outcome: "completed" | "aborted" | "failed"): void => {
      if (ended) return
      ended = true
      stats.open--
      stats[outcome]++
    }
    const failMode = knobs.error === "reset-mid-stream" || knobs.error === "mid-stream-error" ? knobs.error : undefined
    const count = frames.bytes.length
    let next = 0
    let deltasSent = 0
    signal.addEventListener("abort", () => end("aborted"), { once: true })
    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        let sent = false
        while (next < count) {
          if (frames.delta[next]) {
            if (failMode !== undefined && deltasSent === 2) {
              if (failMode === "mid-stream-error") {
                controller.enqueue(format.midStreamError(next))
                controller.close()
              } else {
                // Let the two deltas reach the socket, then drop it without the chunked terminator.
                if (sent) return
                await Bun.sleep(10)
                controller.error(new Error("mock: reset mid-stream"))
              }
              end("failed")
              return
            }
            const wait = deltasSent === 0 ? knobs.ttftMs : knobs.intervalMs
            if (wait > 0) {
              // Flush what is queued before pausing, then pause in the next pull.
              if (sent) return
              await Bun.sleep(wait)
              if (ended) return
            }
            deltasSent++
          }
          const frame = frames.bytes[next++] as Uint8Array
          stats.sent += frame.byteLength
          controller.enqueue(frame)
          sent = true
          // A reader that does not read holds the rest back (the queue takes ~64 KB).
          if ((controller.desiredSize ?? 1) <= 0) return
        }
        controller.close()
        end("completed")
      },
      cancel: () => end("aborted"),
    }, QUEUE)
    return new Response(body, { headers: SSE_HEADERS })
  }

  const errorResponse = (error: PreparedError): Response => new Response(error.body, { status: error.status, headers: error.headers })

  const handle = async (req: Request, path: string, format: MockFormat): Promise<Response> => {
    const knobs = requestKnobs(req.headers, defaults)
    let parsed: unknown
    try {
      parsed = await req.json()
    } catch {
      parsed = undefined
    }
    if (maxLogged > 0) {
      if (requests.length >= maxLogged) requests.shift()
      requests.push({ path, headers: Object.fromEntries(req.headers), body: parsed })
    }
    const body = recordOf(parsed)
    if (body === undefined) return errorResponse(format.errors["400"])
    if (knobs.error === "hang") {
      return new Promise<Response>((resolve) => {
        const release = (): void => {
          hanging.delete(release)
          resolve(new Response(null, { status: 499 }))
        }
        hanging.add(release)
        req.signal.addEventListener("abort", release, { once: true })
      })
    }
    await sleep(knobs.delayMs)
    const prepared = knobs.error === undefined ? undefined : format.errors[knobs.error]
    if (prepared !== undefined) return errorResponse(prepared)
    if (knobs.errorRate > 0 && Math.random() < knobs.errorRate) return errorResponse(format.errors["500"])
    const answer = answerOf(knobs, body, format)
    if (body["stream"] === true) return streamResponse(format.stream(answer, body), knobs, format, req.signal)
    // A JSON answer comes after the time its stream would have taken.
    const deltas = answer.reasoningDeltas + answer.textDeltas + (answer.tool?.pieces.length ?? 0)
    await sleep(knobs.ttftMs + knobs.intervalMs * Math.max(0, deltas - 1))
    return new Response(format.json(answer), { headers: JSON_HEADERS })
  }

  /**
   * Mistral's OCR shape (`POST /v1/ocr`, for the file-parser's mistral-ocr engine): logged like the
   * other routes; `x-mock-ocr-pages` pages (default 1), each "mock OCR page N of a D-character document";
   * `x-mock-error: 500` fails it.
   */
  const ocr = async (req: Request): Promise<Response> => {
    const parsed = (await req.json().catch(() => undefined)) as { model?: unknown; document?: { document_url?: unknown } } | undefined
    if (maxLogged > 0) {
      if (requests.length >= maxLogged) requests.shift()
      requests.push({ path: "/v1/ocr", headers: Object.fromEntries(req.headers), body: parsed })
    }
    if (req.headers.get("x-mock-error") === "500") return new Response(JSON.stringify({ error: { message: "mock: OCR failed" } }), { status: 500, headers: JSON_HEADERS })
    const url = typeof parsed?.document?.document_url === "string" ? parsed.document.document_url : ""
    const count = Number(req.headers.get("x-mock-ocr-pages") ?? "1")
    const pages = Array.from({ length: count }, (_, index) => ({ index, markdown: `mock OCR page ${index + 1} of a ${url.length}-character document` }))
    return Response.json({ pages, model: parsed?.model, usage_info: { pages_processed: count, doc_size_bytes: url.length } })
  }

  /** OpenAI's moderation API: `{model, input}` → one result per input string. */
  const moderate = async (req: Request): Promise<Response> => {
    let parsed: unknown
    try {
      parsed = await req.json()
    } catch {
      parsed = undefined
    }
    if (maxLogged > 0) {
      if (requests.length >= maxLogged) requests.shift()
      requests.push({ path: "/v1/moderations", headers: Object.fromEntries(req.headers), body: parsed })
    }
    const error = req.headers.get("x-mock-error")
    if (error === "hang") {
      return new Promise<Response>((resolve) => {
        const release = (): void => {
          hanging.delete(release)
          resolve(new Response(null, { status: 499 }))
        }
        hanging.add(release)
        req.signal.addEventListener("abort", release, { once: true })
      })
    }
    if (error === "500" || error === "503") return new Response(JSON.stringify({ error: { message: "mock: moderation failed" } }), { status: Number(error), headers: JSON_HEADERS })
    await sleep(Number(req.headers.get("x-mock-delay-ms") ?? "0"))
    const input = recordOf(parsed)?.["input"]
    const texts = typeof input === "string" ? [input] : Array.isArray(input) ? input.map(String) : []
    const results = texts.map((text) => {
      const flags = [...text.matchAll(/FLAG:([a-z/-]+)/g)].map((m) => m[1] as string)
      return { flagged: flags.length > 0, categories: Object.fromEntries(flags.map((f) => [f, true])), category_scores: Object.fromEntries(flags.map((f) => [f, 0.99])) }
    })
    return new Response(JSON.stringify({ id: "modr-mock", model: recordOf(parsed)?.["model"] ?? "mock", results }), { headers: JSON_HEADERS })
  }

  const route = (path: string): ((req: Request) => Promise<Response>) => {
    const format = FORMATS[path]
    return (req) => handle(req, path, format)
  }

  const server = Bun.serve({
    port: options.port ?? 0,
    hostname: options.hostname ?? "127.0.0.1",
    // Quiet: a deliberate mid-stream reset is not worth a stack trace on the console.
    development: false,
    idleTimeout: 0,
    routes: {
      "/v1/chat/completions": { POST: route("/v1/chat/completions") },
      "/v1/responses": { POST: route("/v1/responses") },
      "/v1/messages": { POST: route("/v1/messages") },
      "/v1/ocr": { POST: ocr },
      "/v1/moderations": { POST: moderate },
      "/__mock/requests": { GET: () => Response.json(requests) },
      "/__mock/stats": { GET: () => Response.json(stats) },
      "/__mock/reset": {
        POST: () => {
          reset()
          return new Response(null, { status: 204 })
        },
      },
    },
    fetch: () => new Response(JSON.stringify({ error: { message: "mock: no such route" } }), { status: 404, headers: JSON_HEADERS }),
    error: () => new Response(null, { status: 500 }),
  })

  const reset = (): void => {
    requests.length = 0
    stats.completed = 0
    stats.aborted = 0
    stats.failed = 0
    stats.sent = 0
  }

  const port = server.port ?? 0
  return {
    port,
    url: `http://${options.hostname ?? "127.0.0.1"}:${port}/v1`,
    requests,
    stats,
    reset,
    stop: async () => {
      for (const release of [...hanging]) release()
      await server.stop(true)
    },
  }
}

// ---------------------------------------------------------------- CLI

const SCENARIOS: ReadonlyArray<string> = ["text", "tool_call", "reasoning"]
const ERRORS: ReadonlyArray<string> = [...Object.keys(ERROR_SPECS), "context_length", "reset-mid-stream", "mid-stream-error", "hang"]

/** Parses `--name value` flags into options; throws on an unknown flag or a bad value. */
export const parseMockArgs = (args: ReadonlyArray<string>): MockUpstreamOptions => {
  const options: Record<string, unknown> = {}
  const numeric: Record<string, keyof MockUpstreamOptions> = {
    "--port": "port",
    "--delay-ms": "delayMs",
    "--ttft-ms": "ttftMs",
    "--tokens": "tokens",
    "--interval-ms": "intervalMs",
    "--error-rate": "errorRate",
    "--usage-input": "usageInput",
    "--usage-output": "usageOutput",
    "--log": "maxLoggedRequests",
  }
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]
    const value = args[i + 1]
    if (value === undefined) throw new Error(`${flag} needs a value`)
    i++
    const key = numeric[flag]
    if (key !== undefined) {
      const parsed = Number(value)
      if (!Number.isFinite(parsed)) throw new Error(`${flag} needs a number, got ${value}`)
      options[key] = parsed
    } else if (flag === "--host") {
      options["hostname"] = value
    } else if (flag === "--chunk") {
      options["chunk"] = value
    } else if (flag === "--scenario" && SCENARIOS.includes(value)) {
      options["scenario"] = value
    } else if (flag === "--error" && ERRORS.includes(value)) {
      options["error"] = value
    } else {
      throw new Error(`unknown flag or value: ${flag} ${value}`)
    }
  }
  return options as MockUpstreamOptions
}

if (import.meta.main) {
  const mock = await startMockUpstream({ port: 9000, ...parseMockArgs(Bun.argv.slice(2)) })
  console.log(`mock upstream listening on ${mock.url}`)
  const shutdown = (): void => {
    void mock.stop().then(() => process.exit(0))
  }
  process.on("SIGINT", shutdown)
  process.on("SIGTERM", shutdown)
}
