/**
 * The scripted in-process provider (kind "fake"): deterministic answers driven by markers in
 * the last user message, for tests, the offline demo and benchmarks. No HTTP.
 *
 * - answers `Echo: <text>` in word-sized text deltas;
 * - `[tool:NAME]`: a call to NAME instead of text. Its arguments are valid against the JSON schema
 *   the request declares for NAME (every property, strings from the message without its markers),
 *   so SDK tool loops that validate them (`runTools`, zod) run; `{"input":"<text>"}` when NAME is
 *   not declared or its schema names no property and allows any;
 * - `tool_choice` is honoured: a named function (or `required`: the first tool) is called without
 *   a marker, as structured-output helpers force it (LangChain's `withStructuredOutput`); `none`
 *   answers text even with a marker;
 * - an input that ends with tool outputs (`function_call_output`) is answered with text quoting
 *   them, so a tool round trip ends even though the last user message still holds `[tool:NAME]`;
 * - `text.format` `json_schema`: JSON valid against the schema; `json_object`: `{"answer": …}`;
 * - `[reasoning]`: reasoning deltas first;
 * - `[fail:429|500|503|529|timeout|auth|400]`: `open` rejects with that error;
 * - `[fail-mid]`: a "server" error after two text deltas (a non-streamed call rejects `open`);
 * - `[slow:MS]`: MS milliseconds between deltas;
 * - `[ttft:MS]`: MS milliseconds before the first delta of a stream.
 *
 * Markers in the endpoint's `upstream_model` (e.g. `echo[fail:503]`) apply to every request it
 * gets: the demo catalog scripts a failing endpoint and a slow one with them.
 */
import type { AbortLike } from "./abort"
import { SchemaTooLarge, schemaExample } from "./fake-schema"
import {
  type CallOptions,
  type InputItem,
  type NormalizedRequest,
  type Provider,
  type ProviderConfig,
  ProviderError,
  type ProviderEvent,
  type UpstreamCall,
} from "./types"
import type { Usage } from "../domain/pricing"

export const FAKE_REASONING = "Thinking it over step by step."

const FAILURES: Record<string, () => ProviderError> = {
  "429": () => new ProviderError("rate_limited", "fake: rate limited", 429, 1),
  "500": () => new ProviderError("server", "fake: internal server error", 500),
  "503": () => new ProviderError("server", "fake: service unavailable", 503),
  "529": () => new ProviderError("overloaded", "fake: overloaded", 529),
  timeout: () => new ProviderError("timeout", "fake: the upstream did not answer in time"),
  auth: () => new ProviderError("auth", "fake: invalid api key", 401),
  "400": () => new ProviderError("bad_request", "fake: bad request", 400),
}

const FAIL = /\[fail:([a-z0-9]+)\]/
const TOOL = /\[tool:([A-Za-z0-9_.-]+)\]/
const SLOW = /\[slow:(\d+)\]/
const TTFT = /\[ttft:(\d+)\]/
const WORD = /\S+\s*/g
/** The markers themselves, left out of the strings of a tool call's arguments. */
const MARKERS = /\s*\[(?:tool|fail|slow|ttft):[^\]]*\]|\s*\[(?:reasoning|fail-mid)\]/g

/** Splits text into word-sized deltas that join back to it exactly. */
export const fakeWords = (text: string): Array<string> => text.match(WORD) ?? []

const textOfItem = (item: InputItem): string => {
  switch (item.type) {
    case "message": {
      let text = ""
      for (const part of item.content) if (part.type === "text") text += part.text
      return text
    }
    case "function_call":
      return item.name + item.arguments
    case "function_call_output":
      return item.output
    case "reasoning":
      return item.summary
  }
}

const lastUserText = (input: ReadonlyArray<InputItem>): string => {
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i]
    if (item.type === "message" && item.role === "user") return textOfItem(item)
  }
  return ""
}

/** The user's text plus the endpoint's own markers, when its upstream model carries any. */
const markersOf = (request: NormalizedRequest, text: string): string => (request.model.includes("[") ? `${request.model} ${text}` : text)

/**
 * When the input ends with tool outputs, a reply that uses them (with the name of the call each
 * answers); undefined otherwise.
 */
const toolOutputReply = (input: ReadonlyArray<InputItem>): string | undefined => {
  let start = input.length
  while (start > 0 && input[start - 1].type === "function_call_output") start--
  if (start === input.length) return undefined
  const parts: Array<string> = []
  for (let i = start; i < input.length; i++) {
    const item = input[i]
    if (item.type !== "function_call_output") continue
    let name: string | undefined
    for (const call of input) if (call.type === "function_call" && call.callId === item.callId) name = call.name
    parts.push(name === undefined ? `The tool answered: ${item.output}` : `The tool ${name} answered: ${item.output}`)
  }
  return parts.join("\n")
}

/** An object schema that names no property and allows any: `{"input": …}` is as valid as `{}`, and tells more. */
const takesAnyObject = (schema: Record<string, unknown>): boolean => {
  const properties = schema["properties"]
  const required = schema["required"]
  return (
    (properties === undefined || (typeof properties === "object" && properties !== null && Object.keys(properties).length === 0)) &&
    (!Array.isArray(required) || required.length === 0) &&
    schema["additionalProperties"] !== false &&
    (schema["type"] === undefined || schema["type"] === "object") &&
    schema["anyOf"] === undefined && schema["oneOf"] === undefined && schema["allOf"] === undefined && schema["$ref"] === undefined
  )
}

/**
 * A call's arguments: valid against the parameters the request declares for the tool, with
 * the message (markers removed) in its strings, e.g. `{"city": "Weather in Paris?"}`.
 */
const toolArguments = (request: NormalizedRequest, name: string, text: string): string => {
  const parameters = request.tools.find((t) => t.name === name)?.parameters
  if (parameters === undefined || takesAnyObject(parameters)) return JSON.stringify({ input: text })
  const plain = text.replace(MARKERS, "").trim()
  return JSON.stringify(schemaExample(parameters, plain === "" ? text : plain))
}

/** The function the answer calls, if any: `tool_choice` first (`none` calls nothing), then the `[tool:NAME]` marker. */
const toolToCall = (request: NormalizedRequest, markers: string): string | undefined => {
  const choice = request.toolChoice
  if (choice === "none") return undefined
  if (typeof choice === "object") return choice.name
  const marked = TOOL.exec(markers)
  if (marked !== null) return marked[1]
  return choice === "required" ? request.tools[0]?.name : undefined
}

/** The answer's text: the reply, or JSON carrying it when the request asks for JSON output. */
const answerText = (request: NormalizedRequest, reply: string): string => {
  const format = request.responseFormat
  if (format === undefined || format.type === "text") return reply
  if (format.type === "json_object") return JSON.stringify({ answer: reply })
  return JSON.stringify(schemaExample(format.schema, reply))
}

/** inputTokens = ceil(characters of instructions and every input item / 4), at least 1. */
export const fakeInputTokens = (request: NormalizedRequest): number => {
  let chars = request.instructions?.length ?? 0
  for (const item of request.input) chars += textOfItem(item).length
  return Math.max(1, Math.ceil(chars / 4))
}

interface Script {
  readonly batches: Array<Array<ProviderEvent>>
  /** Deltas after which the stream fails, when `[fail-mid]`. */
  readonly failAfter: number | undefined
  readonly delayMs: number
  readonly firstDelayMs: number
}

const script = (request: NormalizedRequest): Script => {
  const text = lastUserText(request.input)
  const markers = markersOf(request, text)
  const toolReply = toolOutputReply(request.input)
  const batches: Array<Array<ProviderEvent>> = []
  let outputTokens = 0
  let reasoningTokens = 0
  if (markers.includes("[reasoning]")) {
    for (const word of fakeWords(FAKE_REASONING)) batches.push([{ type: "reasoning", delta: word }])
    reasoningTokens = batches.length
    outputTokens = reasoningTokens
  }
  const tool = toolReply === undefined ? toolToCall(request, markers) : undefined
  if (tool !== undefined) {
    const args = toolArguments(request, tool, text)
    batches.push([{ type: "tool_call_start", index: 0, callId: "call_fake_0", name: tool }], [{ type: "tool_call_delta", index: 0, delta: args }])
    outputTokens += fakeWords(args).length
  } else {
    const words = fakeWords(answerText(request, toolReply ?? `Echo: ${text}`))
    for (const word of words) batches.push([{ type: "text", delta: word }])
    outputTokens += words.length
  }
  const usage: Usage = { inputTokens: fakeInputTokens(request), cachedTokens: 0, cacheWriteTokens: 0, outputTokens, reasoningTokens }
  batches.push([
    { type: "usage", usage },
    { type: "finish", reason: tool === undefined ? "stop" : "tool_calls" },
  ])
  const slow = SLOW.exec(markers)
  const ttft = TTFT.exec(markers)
  return {
    batches,
    failAfter: markers.includes("[fail-mid]") ? reasoningTokens + 2 : undefined,
    delayMs: slow === null ? 0 : Number(slow[1]),
    firstDelayMs: ttft === null ? 0 : Number(ttft[1]),
  }
}

/** The script, or the upstream's 400 for a schema that asks for more than the fake writes (the caller's schema, not a failure). */
const scriptOrRefusal = (request: NormalizedRequest): Script => {
  try {
    return script(request)
  } catch (e) {
    if (e instanceof SchemaTooLarge) throw new ProviderError("bad_request", `fake: ${e.message}`, 400)
    throw e
  }
}

const aborted = (): ProviderError => new ProviderError("connection", "the upstream call was aborted by the caller")

/** Waits `ms`, rejecting as soon as the signal aborts. */
export const fakeSleep = (ms: number, signal: AbortLike): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return reject(aborted())
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(aborted())
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort)
      resolve()
    }, ms)
    signal.addEventListener("abort", onAbort, { once: true })
  })

async function* play(plan: Script, signal: AbortLike): AsyncGenerator<ReadonlyArray<ProviderEvent>, void, undefined> {
  for (let i = 0; i < plan.batches.length; i++) {
    if (signal.aborted) throw aborted()
    if (i === 0 && plan.firstDelayMs > 0) await fakeSleep(plan.firstDelayMs, signal)
    if (i > 0 && plan.delayMs > 0) await fakeSleep(plan.delayMs, signal)
    if (plan.failAfter !== undefined && i === plan.failAfter) throw new ProviderError("server", "fake: failed mid-stream", 500)
    yield plan.batches[i]
  }
}

/**
 * Scripted providers of the test kit (src/testing/fake-provider.ts), by the `base_url` a fake
 * provider entry names them with: such an entry answers through its script instead of the markers.
 */
export const scriptedProviders = new Map<string, Provider>()

const open = async (request: NormalizedRequest, config: ProviderConfig, options: CallOptions): Promise<UpstreamCall> => {
  const scripted = config.base_url === undefined ? undefined : scriptedProviders.get(config.base_url)
  if (scripted !== undefined) return scripted.open(request, config, options)
  if (options.signal.aborted) throw aborted()
  const failure = FAIL.exec(markersOf(request, lastUserText(request.input)))
  const fail = failure === null ? undefined : FAILURES[failure[1]]
  if (fail !== undefined) throw fail()
  const plan = scriptOrRefusal(request)
  const upstreamBody = { fake: true, model: request.model, stream: options.stream }
  if (options.stream) return { upstreamBody, events: play(plan, options.signal) }
  if (plan.failAfter !== undefined) throw new ProviderError("server", "fake: failed mid-answer", 500)
  // A non-streamed answer arrives whole, after the time a stream would have taken.
  if (plan.delayMs > 0) await fakeSleep(plan.delayMs * (plan.batches.length - 1), options.signal)
  const all = plan.batches.flat()
  return {
    upstreamBody,
    events: {
      async *[Symbol.asyncIterator]() {
        yield all
      },
    },
  }
}

export const fakeProvider: Provider = { open }
