/**
 * Builds one Responses answer from upstream `ProviderEvent` batches: the SSE text of the stream a
 * strict client accepts (wire-compat.md, "Streaming") and the final result object.
 *
 * Plain code on purpose: it runs once per upstream chunk, where an Effect Stream step costs
 * 15–20 µs. Delta events are concatenated from pre-built pieces (0.27 µs per text
 * chunk vs 0.55 µs through the generic spread + JSON.stringify path, Bun 1.4); lifecycle and item
 * events, a few per item, take the generic path. Runs of the upstream's own literals
 * (`text_literals`) are written as bytes (byte-writer.ts) and their text decoded once.
 */
import {
  isFunctionTool,
  isFunctionToolChoice,
  type OutputFunctionCall,
  type OutputItem,
  type OutputMessage,
  type OutputReasoning,
  type OutputServerToolItem,
  type ResponseResult,
  type ResponsesRequest,
  type ResponseStatus,
  type ResponseUsage,
  type ResultText,
  type ResultTool,
  type ResultToolChoice,
  ANTHROPIC_REASONING,
  sealToken,
} from "../../domain/responses.js"
import type { Types } from "effect"
import type { FinishReason, ProviderEvent } from "../../providers/types.js"
import { isValidUsage, type Usage } from "../../domain/pricing.js"
import { type CitableLink, type FinishExtras, isWholeObject, type ServerToolCall, type ServerToolOpening } from "../format.js"
import type { ServerToolProgressEvent } from "../../tools/types.js"
import { randomHex } from "../../domain/random.js"
import { latin1Slice } from "../../providers/json-literal.js"
import { ByteWriter, MAX_INTEGER_DIGITS, writeInteger } from "./byte-writer.js"
import { DONE, sseEvent, sseFrame } from "../sse.js"

export { debugChunk } from "../sse.js"

// ---------------------------------------------------------------------------------------------
// Ids and the result base
// ---------------------------------------------------------------------------------------------

/** `<prefix>_` and 24 random hex characters (96 bits). */
export const newId = (prefix: string): string => `${prefix}_${randomHex(12)}`

/** Identity and request settings a result echoes; omitted settings take the wire defaults. */
export interface ResultBase {
  /** `resp_…` */
  readonly id: string
  /** Unix seconds. */
  readonly created_at: number
  /** The model id reported to the caller. */
  readonly model: string
  readonly instructions?: string | null
  readonly metadata?: Readonly<Record<string, string>> | null
  readonly temperature?: number | null
  readonly top_p?: number | null
  readonly frequency_penalty?: number | null
  readonly presence_penalty?: number | null
  /** Default true; never null on the wire. */
  readonly parallel_tool_calls?: boolean | null
  /** Default "auto". */
  readonly tool_choice?: ResultToolChoice
  /** Default []. */
  readonly tools?: ReadonlyArray<ResultTool>
  readonly max_output_tokens?: number | null
  readonly service_tier?: string | null
  /** Default {format: {type: "text"}}. */
  readonly text?: ResultText
}

/** Other tool-choice objects are refused by the normalizer before any result exists. */
const toolChoiceEcho = (choice: ResponsesRequest["tool_choice"]): ResultToolChoice => {
  if (choice === undefined) return "auto"
  if (typeof choice === "string") return choice
  return isFunctionToolChoice(choice) ? { type: "function", name: choice.name } : "auto"
}

/** The echo fields of a result, taken from a decoded request (tools echoed as the client sent them). */
export const resultBaseOf = (
  req: ResponsesRequest,
  identity: { readonly id?: string; readonly createdAt?: number; readonly model: string },
): ResultBase => {
  return {
    id: identity.id ?? newId("resp"),
    created_at: identity.createdAt ?? Math.floor(Date.now() / 1000),
    model: identity.model,
    instructions: req.instructions ?? null,
    metadata: req.metadata ?? null,
    temperature: req.temperature ?? null,
    top_p: req.top_p ?? null,
    frequency_penalty: req.frequency_penalty ?? null,
    presence_penalty: req.presence_penalty ?? null,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    tool_choice: toolChoiceEcho(req.tool_choice),
    tools: (req.tools ?? []).map(
      (tool): ResultTool =>
        isFunctionTool(tool)
          ? {
              type: "function",
              name: tool.name,
              description: tool.description ?? null,
              parameters: tool.parameters ?? null,
              strict: tool.strict ?? null,
            }
          : tool,
    ),
    max_output_tokens: req.max_output_tokens ?? null,
    service_tier: req.service_tier === undefined ? "auto" : req.service_tier,
    text:
      req.text?.verbosity != null
        ? { format: req.text.format ?? { type: "text" }, verbosity: req.text.verbosity }
        : { format: req.text?.format ?? { type: "text" } },
  }
}

// ---------------------------------------------------------------------------------------------
// The assembler
// ---------------------------------------------------------------------------------------------

export interface AssemblerOptions {
  /** Produce SSE text; when false every method returns "" and only the result is built. */
  readonly stream: boolean
  /** Item ids (`msg`, `rs`, `fc`, `call` prefixes); random by default. */
  readonly newId?: (prefix: string) => string
  /** Unix seconds, for `completed_at`. */
  readonly now?: () => number
  /** Annotations of the first message's text (the file-parser's `file` annotations). */
  readonly annotations?: ReadonlyArray<unknown> | undefined
}

/** What the route adds when an answer ends (the encoder seam's own type). */
export type { FinishExtras } from "../format.js"

export interface ResponseFailure {
  /** A string code, e.g. `server_error`, `rate_limit_exceeded`. */
  readonly code: string
  readonly message: string
}

/**
 * Text grown from many small deltas. `text += delta` keeps a rope cell per delta (and the delta)
 * alive for the whole stream, ~3 string cells per token: 2,000 held streams of 200 tokens showed
 * 900 k live strings. Joining every 32 deltas keeps a few flat strings instead. Deltas given as
 * their JSON literals' bytes (`appendLiteral`) are kept as bytes, up to 1 KB, and decoded a
 * kilobyte at a time, when the text is read, or when a string delta comes after them.
 */
class TextBuffer {
  private flat = ""
  private readonly parts: Array<string> = []
  /** The insides of JSON literals not decoded yet: printable ASCII (`isPlainLiteral`). */
  private raw: Uint8Array | undefined = undefined
  private rawLength = 0

  append(delta: string): void {
    if (this.rawLength > 0) this.decodeRaw()
    this.push(delta)
  }

  /** The text of the JSON literal whose inside is `source[start, end)`. */
  appendLiteral(source: Uint8Array, start: number, end: number): void {
    if (this.rawLength + end - start > RAW_BYTES) {
      if (this.rawLength > 0) this.decodeRaw()
      if (end - start > RAW_BYTES) {
        this.push(decodeInside(latin1Slice(source, start, end)))
        return
      }
    }
    // One buffer of a fixed size per text, made once. Grown by doubling, it left its smaller ones
    // behind: 2,000 held streams peaked 61-64 MB over idle RSS, against 53-54 MB so.
    let raw = this.raw
    if (raw === undefined) {
      raw = new Uint8Array(RAW_BYTES)
      this.raw = raw
    }
    let at = this.rawLength
    for (let i = start; i < end; i++) raw[at++] = source[i] as number
    this.rawLength = at
  }

  get value(): string {
    if (this.rawLength > 0) this.decodeRaw()
    if (this.parts.length > 0) this.compact()
    return this.flat
  }

  private decodeRaw(): void {
    this.push(decodeInside(latin1Slice(this.raw as Uint8Array, 0, this.rawLength)))
    this.rawLength = 0
  }

  private push(part: string): void {
    this.parts.push(part)
    if (this.parts.length >= 32) this.compact()
  }

  private compact(): void {
    this.flat += this.parts.join("")
    this.parts.length = 0
  }
}

/** Literal bytes kept before they are decoded into a part of the text. */
const RAW_BYTES = 1024

/** The text of JSON literals' insides, printable ASCII with JSON's escapes (valid by construction: `isPlainLiteral`). */
const decodeInside = (inside: string): string => (inside.includes("\\") ? (JSON.parse(`"${inside}"`) as string) : inside)

/** An item between its `output_item.added` and `output_item.done`; `deltaHead` is its part of each delta event ("" when not streaming). */
interface OpenMessage {
  readonly kind: "message"
  readonly index: number
  readonly id: string
  readonly deltaHead: string
  /** `deltaHead` as bytes, made when the first `text_literals` event comes. */
  deltaHeadBytes?: Uint8Array
  readonly text: TextBuffer
}
interface OpenReasoning {
  readonly kind: "reasoning"
  readonly index: number
  readonly id: string
  readonly deltaHead: string
  readonly text: TextBuffer
  /** The upstream's seal of it (`reasoning_signature`), its `encrypted_content`: given back, it goes upstream with the text. */
  encrypted?: string
}
interface OpenCall {
  readonly kind: "function_call"
  readonly index: number
  readonly id: string
  readonly deltaHead: string
  readonly callId: string
  readonly name: string
  /** The upstream's own index of this call. */
  readonly upstreamIndex: number
  readonly args: TextBuffer
}
type OpenItem = OpenMessage | OpenReasoning | OpenCall

/** A call the upstream began while another call's arguments were still coming: kept out of the stream until that one closes. */
interface WaitingCall {
  readonly upstreamIndex: number
  readonly callId: string
  readonly name: string
  readonly args: TextBuffer
}

// Pre-built pieces of the per-chunk events: `<head><sequence_number><item part><JSON delta><tail>`.
const deltaHead = (type: string) => `event: ${type}\ndata: {"type":"${type}","sequence_number":`
const TEXT_DELTA = deltaHead("response.output_text.delta")
const TEXT_DELTA_TAIL = ',"logprobs":[]}\n\n'
const ARGS_DELTA = deltaHead("response.function_call_arguments.delta")
const SUMMARY_DELTA = deltaHead("response.reasoning_summary_text.delta")
const PLAIN_TAIL = "}\n\n"

// The same pieces as bytes, for runs of the upstream's literals (`text_literals`).
const utf8 = new TextEncoder()
const TEXT_DELTA_BYTES = utf8.encode(TEXT_DELTA)
/** The tail of a text delta event and the head of the next, between two of a run. */
const TEXT_DELTA_BETWEEN_BYTES = utf8.encode(TEXT_DELTA_TAIL + TEXT_DELTA)
const TEXT_DELTA_TAIL_BYTES = utf8.encode(TEXT_DELTA_TAIL)
/**
 * The SSE bytes of a push that had `text_literals` events: one writer for the process, as `push`
 * hands out what it wrote before it returns (and the caller writes that on at once).
 */
const literalOut = new ByteWriter()

const OUTPUT_OPEN = '"output":['

const ZERO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

const responseUsage = (usage: Usage, extras: FinishExtras): ResponseUsage => {
  // Assigned, not spread (a spread is a builtin call per answer).
  const out: Types.Mutable<ResponseUsage> = {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    total_tokens: usage.inputTokens + usage.outputTokens,
  }
  if (extras.cost !== undefined) out.cost = extras.cost
  if (extras.isByok !== undefined) out.is_byok = extras.isByok
  if (extras.serverToolUse !== undefined) out.server_tool_use_details = extras.serverToolUse
  return out
}

/** A `url_citation` annotation on an output text. */
interface UrlCitation {
  readonly type: "url_citation"
  readonly url: string
  readonly title: string
  readonly start_index: number
  readonly end_index: number
}

/** What may follow a URL written out in text. */
const URL_END = /[\s)\]>"'.,;:!?*_]/

/** Every place `text` cites one of `links` (its URL written out), in text order. */
export const citationsIn = (text: string, links: ReadonlyArray<CitableLink>): Array<UrlCitation> => {
  const found: Array<UrlCitation> = []
  const seen = new Set<string>()
  for (const link of links) {
    if (link.url === "" || seen.has(link.url)) continue
    seen.add(link.url)
    for (let at = text.indexOf(link.url); at !== -1; at = text.indexOf(link.url, at + link.url.length)) {
      // A longer URL that merely starts with this one is not a citation of it.
      const after = text[at + link.url.length]
      if (after !== undefined && !URL_END.test(after)) continue
      found.push({ type: "url_citation", url: link.url, title: link.title, start_index: at, end_index: at + link.url.length })
    }
  }
  return found.sort((a, b) => a.start_index - b.start_index)
}

const outputText = (text: string, annotations: ReadonlyArray<unknown> = []) => ({ type: "output_text" as const, text, annotations, logprobs: [] })
const EMPTY_TEXT_PART = JSON.stringify(outputText(""))

/**
 * One response. Streaming: `start()` once, `push(batch)` per upstream chunk, then exactly one of
 * `finish(extras)` or `fail(error)`; each returns the SSE text to write ("" when not streaming).
 * `result()` is the JSON body of a non-streaming answer and the record of either kind.
 */
export class ResponseAssembler {
  private readonly base: ResultBase
  private readonly stream: boolean
  private readonly makeId: (prefix: string) => string
  private readonly now: () => number

  private seq = 0
  private buf = ""
  private readonly output: Array<OutputItem> = []
  /** Streaming: the JSON text of a closed message item, made once for its done events and reused in the final result. */
  private readonly outputJson: Array<string | undefined> = []
  private open: OpenItem | undefined = undefined
  /** Upstream tool-call indexes already given an item or waiting for one (a late delta for a closed call is dropped). */
  private readonly seenCalls = new Set<number>()
  /**
   * Calls the upstream interleaves with the open call (Chat streams may alternate calls' deltas by
   * index), in the order they began; a strict client takes one item at a time, so each becomes a
   * whole item when the open call closes. Undefined until an interleaving is seen.
   */
  private waiting: Array<WaitingCall> | undefined = undefined

  private lastUsage: Usage | undefined = undefined
  private reason: FinishReason | undefined = undefined

  private state: ResponseStatus = "in_progress"
  private completedAt: number | null = null
  private usageOut: ResponseUsage | null = null
  private error: ResponseFailure | null = null
  private incomplete: { readonly reason: string } | null = null
  private serviceMetadata: Record<string, unknown> | undefined = undefined
  private metadataAlias = false
  /** Annotations the first message closed takes (undefined once taken, or when there are none). */
  private annotations: ReadonlyArray<unknown> | undefined
  /** Links the answer may cite (server tools' results); undefined while none: messages close with no annotations. */
  private citable: Array<CitableLink> | undefined = undefined
  /** Ids of server-tool items started and not done yet (undefined until the first starts). */
  private running: Array<string> | undefined = undefined

  constructor(base: ResultBase, options: AssemblerOptions) {
    this.base = base
    this.stream = options.stream
    this.annotations = options.annotations
    this.makeId = options.newId ?? newId
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000))
  }

  /** The completion text of every message item so far. */
  get completionText(): string {
    return this.textOf("message")
  }
  /** The reasoning text of every reasoning item so far. */
  get reasoningText(): string {
    return this.textOf("reasoning")
  }
  /** The last usage the upstream reported; undefined when it reported none or counts that are not counts. */
  get usage(): Usage | undefined {
    return this.lastUsage
  }
  /** The upstream's finish reason, once seen. */
  get finishReason(): FinishReason | undefined {
    return this.reason
  }
  get status(): ResponseStatus {
    return this.state
  }
  /** True once `finish` or `fail` ran. */
  get ended(): boolean {
    return this.state !== "in_progress"
  }
  /** Output items closed so far, in output order. */
  get items(): ReadonlyArray<OutputItem> {
    return this.output
  }

  /** `response.created` and `response.in_progress`, each with the full result (no output yet). */
  start(): string {
    if (!this.stream) return ""
    // One snapshot, serialized once for both events.
    const snapshot = `"response":${this.resultJson()}`
    this.eventText("response.created", snapshot)
    this.eventText("response.in_progress", snapshot)
    return this.take()
  }

  /**
   * One upstream batch, or its events `[from, to)`. Items open in the order their first event arrives.
   * Streaming, a batch with `text_literals` gives its SSE text as UTF-8 bytes: a view that is valid
   * until the next `push` of any assembler (written to the socket at once, where it is copied).
   */
  push(events: ReadonlyArray<ProviderEvent>, from = 0, to = events.length): string | Uint8Array {
    if (this.ended) return ""
    let bytes = false
    for (let i = from; i < to; i++) {
      const e = events[i]
      switch (e.type) {
        case "text": {
          if (e.delta === "") break
          const open = this.open
          const item = open?.kind === "message" ? open : this.openMessage()
          item.text.append(e.delta)
          if (this.stream) this.buf += TEXT_DELTA + this.seq++ + item.deltaHead + (e.json ?? JSON.stringify(e.delta)) + TEXT_DELTA_TAIL
          break
        }
        case "text_literals": {
          const spans = e.spans
          if (spans.length === 0) break
          const open = this.open
          const item = open?.kind === "message" ? open : this.openMessage()
          const text = item.text
          const source = e.source
          if (!this.stream) {
            for (let s = 0; s < spans.length; s += 2) text.appendLiteral(source, (spans[s] as number) + 1, (spans[s + 1] as number) - 1)
            break
          }
          // The events before these, then each delta's from its pieces and the upstream's literal,
          // in room reserved once for the run (the literals are within their spans' extent).
          const out = literalOut
          out.text(this.take())
          bytes = true
          let itemHead = item.deltaHeadBytes
          if (itemHead === undefined) {
            itemHead = utf8.encode(item.deltaHead)
            item.deltaHeadBytes = itemHead
          }
          const pieces = TEXT_DELTA_BETWEEN_BYTES.length + MAX_INTEGER_DIGITS + itemHead.length
          const buf = out.reserve((spans.length / 2) * pieces + (spans[spans.length - 1] as number) - (spans[0] as number))
          let at = out.length
          let seq = this.seq
          for (let s = 0; s < spans.length; s += 2) {
            const start = spans[s] as number
            const end = spans[s + 1] as number
            text.appendLiteral(source, start + 1, end - 1)
            const head = s === 0 ? TEXT_DELTA_BYTES : TEXT_DELTA_BETWEEN_BYTES
            buf.set(head, at)
            at = writeInteger(buf, at + head.length, seq++)
            buf.set(itemHead, at)
            at += itemHead.length
            for (let i = start; i < end; i++) buf[at++] = source[i] as number
          }
          this.seq = seq
          out.length = at
          const tail = out.reserve(TEXT_DELTA_TAIL_BYTES.length)
          tail.set(TEXT_DELTA_TAIL_BYTES, out.length)
          out.length += TEXT_DELTA_TAIL_BYTES.length
          break
        }
        case "reasoning": {
          if (e.delta === "") break
          const open = this.open
          const item = open?.kind === "reasoning" ? open : this.openReasoning()
          item.text.append(e.delta)
          if (this.stream) this.buf += SUMMARY_DELTA + this.seq++ + item.deltaHead + JSON.stringify(e.delta) + PLAIN_TAIL
          break
        }
        case "reasoning_signature":
          this.seal(e.signature, e.redacted === true)
          break
        case "tool_call_start": {
          const open = this.open
          if (open?.kind === "function_call" && open.upstreamIndex === e.index) break
          if (this.waitingCall(e.index) !== undefined) break
          this.beginCall(e.index, e.callId, e.name)
          break
        }
        case "tool_call_delta": {
          if (e.delta === "") break
          const open = this.open
          const call = open?.kind === "function_call" && open.upstreamIndex === e.index ? open : this.callFor(e.index)
          if (call === undefined) break // its item is done: a strict client takes no more deltas for it
          call.args.append(e.delta)
          if (this.stream && call === this.open) this.buf += ARGS_DELTA + this.seq++ + this.open.deltaHead + JSON.stringify(e.delta) + PLAIN_TAIL
          break
        }
        case "usage":
          // Checked here, once per answer, for every adapter: untrustworthy counts are missing ones (estimated).
          this.lastUsage = isValidUsage(e.usage) ? e.usage : undefined
          break
        case "finish":
          this.reason = e.reason
          break
      }
    }
    if (!bytes) return this.take()
    literalOut.text(this.take())
    return literalOut.take()
  }

  /**
   * Closes the open item and ends the response: `response.completed` with status "completed", or
   * "incomplete" when the upstream stopped at the token limit or its content filter; then [DONE].
   * An upstream that finished with reason "error" ends as `fail`.
   */
  finish(extras: FinishExtras = {}): string {
    if (this.ended) return ""
    if (this.reason === "error") {
      return this.fail({ code: "server_error", message: "The upstream provider ended the response with an error" }, extras)
    }
    const incompleteReason =
      extras.incompleteReason ??
      (this.reason === "length" ? "max_output_tokens" : this.reason === "content_filter" ? "content_filter" : undefined)
    this.close(incompleteReason === undefined ? "completed" : "incomplete")
    if (this.running !== undefined) this.endRunning()
    this.settle(extras)
    this.state = incompleteReason === undefined ? "completed" : "incomplete"
    this.incomplete = incompleteReason === undefined ? null : { reason: incompleteReason }
    if (this.stream) {
      this.eventText("response.completed", `"response":${this.resultJson()}`)
      this.buf += DONE
    }
    return this.take()
  }

  /** A failure after the stream began: the open item is closed "incomplete", then `response.failed` and [DONE]. */
  fail(error: ResponseFailure, extras: FinishExtras = {}): string {
    if (this.ended) return ""
    this.close("incomplete")
    if (this.running !== undefined) this.endRunning()
    this.settle(extras)
    this.state = "failed"
    this.error = { code: error.code, message: error.message }
    if (this.stream) {
      this.eventText("response.failed", `"response":${this.resultJson()}`)
      this.buf += DONE
    }
    return this.take()
  }

  /**
   * A server tool's call starts (the server-tool loop's, before it runs the tool): its item, in
   * progress, after the items before it: `output_item.added`, then `response.<prefix>.in_progress`
   * for a tool with progress events. The item keeps its output index until `serverToolDone`.
   */
  serverToolStarted(opening: ServerToolOpening): ServerToolCall {
    const eventPrefix = opening.eventPrefix
    if (this.ended) return { id: "", outputIndex: -1, eventPrefix, sse: "" }
    this.close("completed")
    const index = this.output.length
    const id = this.makeId("srvtl")
    const item = { ...opening.item, id, status: "in_progress" } as OutputServerToolItem
    this.output.push(item)
    if (this.running === undefined) this.running = []
    this.running.push(id)
    if (this.stream) {
      this.event("response.output_item.added", { output_index: index, item })
      if (eventPrefix !== undefined) this.event(`response.${eventPrefix}.in_progress`, { item_id: id, output_index: index })
    }
    return { id, outputIndex: index, eventPrefix, sse: this.take() }
  }

  /** A progress event of a running server tool's call (`response.<prefix>.<event>`); nothing for a tool without them. */
  serverToolProgress(call: ServerToolCall, progress: ServerToolProgressEvent): string {
    if (!this.stream || this.ended || call.eventPrefix === undefined || this.running?.includes(call.id) !== true) return ""
    const { event, ...fields } = progress
    this.event(`response.${call.eventPrefix}.${event}`, { item_id: call.id, output_index: call.outputIndex, ...fields })
    return this.take()
  }

  /**
   * The call ran: `fields` (the SDK's item, without `id`) replace its started item, then
   * `response.<prefix>.completed` (when it completed) and `output_item.done`, same id and index.
   */
  serverToolDone(call: ServerToolCall, fields: Readonly<Record<string, unknown>>): string {
    if (this.ended || !this.stopRunning(call.id)) return ""
    const item = { ...fields, id: call.id } as OutputServerToolItem
    this.output[call.outputIndex] = item
    if (this.stream) {
      if (call.eventPrefix !== undefined && item.status === "completed") {
        this.event(`response.${call.eventPrefix}.completed`, { item_id: call.id, output_index: call.outputIndex })
      }
      this.event("response.output_item.done", { output_index: call.outputIndex, item })
    }
    return this.take()
  }

  /** Links the answer may cite from here on: message items closed later carry their `url_citation` annotations. */
  cite(links: ReadonlyArray<CitableLink>): void {
    if (links.length === 0) return
    if (this.citable === undefined) this.citable = []
    for (const link of links) this.citable.push(link)
  }

  /** The result object as it stands (final after `finish` or `fail`). */
  result(): ResponseResult {
    return this.snapshot(this.output.slice())
  }

  /**
   * `JSON.stringify(this.result())`, with the message items' JSON made when they closed (a
   * streamed answer's text is serialized once for its three done events and the final result,
   * not four times). The result is serialized without output, which goes in at `"output":[`:
   * that text can only be the key, as a quote inside a JSON string is escaped.
   */
  private resultJson(): string {
    const json = JSON.stringify(this.snapshot([]))
    if (this.output.length === 0) return json
    let items = ""
    for (let i = 0; i < this.output.length; i++) {
      items += `${i === 0 ? "" : ","}${this.outputJson[i] ?? JSON.stringify(this.output[i])}`
    }
    const at = json.indexOf(OUTPUT_OPEN) + OUTPUT_OPEN.length
    return json.slice(0, at) + items + json.slice(at)
  }

  private snapshot(output: Array<OutputItem>): ResponseResult {
    const b = this.base
    const result: Types.Mutable<ResponseResult> = {
      id: b.id,
      object: "response",
      created_at: b.created_at,
      completed_at: this.completedAt,
      model: b.model,
      status: this.state,
      output,
      error: this.error,
      incomplete_details: this.incomplete,
      instructions: b.instructions ?? null,
      metadata: b.metadata ?? null,
      temperature: b.temperature ?? null,
      top_p: b.top_p ?? null,
      frequency_penalty: b.frequency_penalty ?? null,
      presence_penalty: b.presence_penalty ?? null,
      parallel_tool_calls: b.parallel_tool_calls ?? true,
      tool_choice: b.tool_choice ?? "auto",
      tools: b.tools ?? [],
      usage: this.usageOut,
      max_output_tokens: b.max_output_tokens ?? null,
      service_tier: b.service_tier === undefined ? "auto" : b.service_tier,
      text: b.text ?? { format: { type: "text" } },
    }
    // Assigned, not spread (a builtin call per snapshot); still the last key.
    if (this.serviceMetadata !== undefined) {
      result.service_metadata = this.serviceMetadata
      if (this.metadataAlias) result.openrouter_metadata = this.serviceMetadata
    }
    return result
  }

  // ---- internals: each appends its events to `buf`; the public methods hand it out ----

  /** The text of every item of `kind` so far, closed ones then the open one (each delta is kept once, in its item). */
  private textOf(kind: "message" | "reasoning"): string {
    let text = ""
    for (const item of this.output) {
      if (kind === "message" && item.type === "message") for (const part of item.content) text += part.type === "output_text" ? part.text : ""
      else if (kind === "reasoning" && item.type === "reasoning") for (const part of item.summary) text += part.text
    }
    const open = this.open
    if (open?.kind === kind) text += open.text.value
    return text
  }

  private take(): string {
    const out = this.buf
    this.buf = ""
    return out
  }

  private event(type: string, fields: object): void {
    this.buf += sseEvent(type, { type, sequence_number: this.seq++, ...fields })
  }

  /** An event whose fields after `type` and `sequence_number` are JSON text already (`"a":…,"b":…`). */
  private eventText(type: string, fields: string): void {
    this.buf += sseFrame(type, `{"type":"${type}","sequence_number":${this.seq++},${fields}}`)
  }

  private settle(extras: FinishExtras): void {
    this.completedAt = this.now()
    this.usageOut = responseUsage(extras.usage ?? this.lastUsage ?? ZERO_USAGE, extras)
    if (extras.serviceMetadata !== undefined) this.serviceMetadata = extras.serviceMetadata
    if (extras.metadataAlias === true) this.metadataAlias = true
  }

  /** An item's part of its delta events, between the sequence number and the delta; "" when not streaming. */
  private deltaHead(id: string, index: number, more: string, idJson?: string): string {
    return this.stream ? `,"item_id":${idJson ?? JSON.stringify(id)},"output_index":${index}${more},"delta":` : ""
  }

  private openMessage(): OpenMessage {
    this.close("completed")
    const index = this.output.length
    const id = this.makeId("msg")
    // Streaming: the id's JSON, for the delta head and both opening events.
    const idJson = this.stream ? JSON.stringify(id) : undefined
    const item: OpenMessage = { kind: "message", index, id, text: new TextBuffer(), deltaHead: this.deltaHead(id, index, ',"content_index":0', idJson) }
    this.open = item
    if (idJson !== undefined) {
      // As JSON text (what JSON.stringify of their objects writes: the assembler test compares
      // them), not objects spread and serialized: once per streamed message.
      this.eventText(
        "response.output_item.added",
        `"output_index":${index},"item":{"type":"message","id":${idJson},"role":"assistant","status":"in_progress","content":[]}`,
      )
      this.eventText("response.content_part.added", `"item_id":${idJson},"output_index":${index},"content_index":0,"part":${EMPTY_TEXT_PART}`)
    }
    return item
  }

  private openReasoning(): OpenReasoning {
    this.close("completed")
    const index = this.output.length
    const id = this.makeId("rs")
    const item: OpenReasoning = { kind: "reasoning", index, id, text: new TextBuffer(), deltaHead: this.deltaHead(id, index, ',"summary_index":0') }
    this.open = item
    if (this.stream) {
      const added: OutputReasoning = { type: "reasoning", id, summary: [] }
      this.event("response.output_item.added", { output_index: index, item: added })
      this.event("response.reasoning_summary_part.added", {
        item_id: id,
        output_index: index,
        summary_index: 0,
        part: { type: "summary_text", text: "" },
      })
    }
    return item
  }

  /**
   * A call the upstream begins: its item opens now, unless a call whose arguments are not whole is
   * open (the upstream interleaves them), or calls already wait; then it waits its turn.
   */
  private beginCall(upstreamIndex: number, callId: string, name: string): OpenCall | WaitingCall {
    const open = this.open
    if (open?.kind !== "function_call" || (this.waiting === undefined && isWholeObject(open.args.value))) {
      return this.openCall(upstreamIndex, callId, name)
    }
    const call: WaitingCall = { upstreamIndex, callId, name, args: new TextBuffer() }
    this.seenCalls.add(upstreamIndex)
    if (this.waiting === undefined) this.waiting = [call]
    else this.waiting.push(call)
    return call
  }

  private waitingCall(upstreamIndex: number): WaitingCall | undefined {
    return this.waiting?.find((call) => call.upstreamIndex === upstreamIndex)
  }

  /** The call a delta for `upstreamIndex` goes to when it is not the open one: a waiting call, one begun now, or none (its item is done). */
  private callFor(upstreamIndex: number): OpenCall | WaitingCall | undefined {
    const waiting = this.waitingCall(upstreamIndex)
    if (waiting !== undefined) return waiting
    return this.seenCalls.has(upstreamIndex) ? undefined : this.beginCall(upstreamIndex, "", "")
  }

  private openCall(upstreamIndex: number, callId: string, name: string, args = new TextBuffer()): OpenCall {
    this.close("completed")
    const index = this.output.length
    const id = this.makeId("fc")
    const call = callId === "" ? this.makeId("call") : callId
    this.seenCalls.add(upstreamIndex)
    const item: OpenCall = {
      kind: "function_call",
      index,
      id,
      callId: call,
      name,
      upstreamIndex,
      args,
      deltaHead: this.deltaHead(id, index, ""),
    }
    this.open = item
    if (this.stream) {
      const added: OutputFunctionCall = { type: "function_call", id, call_id: call, name, arguments: "", status: "in_progress" }
      this.event("response.output_item.added", { output_index: index, item: added })
    }
    return item
  }

  /** Whether server-tool item `id` was running; it is not from now on. */
  private stopRunning(id: string): boolean {
    const at = this.running?.indexOf(id) ?? -1
    if (at === -1) return false
    this.running?.splice(at, 1)
    return true
  }

  /** The answer ends while server tools run (the client went away, the deadline): their items end `incomplete`. */
  private endRunning(): void {
    const running = this.running ?? []
    for (const id of running) {
      const index = this.output.findIndex((item) => item.id === id)
      const item = { ...this.output[index], status: "incomplete" } as OutputServerToolItem
      this.output[index] = item
      if (this.stream) this.event("response.output_item.done", { output_index: index, item })
    }
    running.length = 0
  }

  /**
   * The upstream's seal of its reasoning: the open reasoning item (one opened for it when it had
   * no text) takes it as `encrypted_content` and ends, so later reasoning is an item of its own. A
   * redacted block is an item with no summary whose `encrypted_content` is its marked data.
   */
  private seal(signature: string, redacted: boolean): void {
    if (redacted) {
      this.close("completed")
      const index = this.output.length
      const item: OutputReasoning = {
        type: "reasoning",
        id: this.makeId("rs"),
        summary: [],
        encrypted_content: sealToken(signature, true),
        format: ANTHROPIC_REASONING,
      }
      this.output.push(item)
      if (this.stream) {
        this.event("response.output_item.added", { output_index: index, item })
        this.event("response.output_item.done", { output_index: index, item })
      }
      return
    }
    const open = this.open
    const item = open?.kind === "reasoning" ? open : this.openReasoning()
    item.encrypted = signature
    this.close("completed")
  }

  /** Closes the open item (if any) with `status`, then gives each call that waited for it its whole item. */
  private close(status: "completed" | "incomplete"): void {
    this.closeOpen(status)
    const waiting = this.waiting
    if (waiting === undefined) return
    this.waiting = undefined
    for (const call of waiting) {
      const item = this.openCall(call.upstreamIndex, call.callId, call.name, call.args)
      const args = call.args.value
      if (this.stream && args !== "") this.buf += ARGS_DELTA + this.seq++ + item.deltaHead + JSON.stringify(args) + PLAIN_TAIL
      this.closeOpen(status)
    }
  }

  /** Closes the open item (if any) with `status`, emitting its done events. */
  private closeOpen(status: "completed" | "incomplete"): void {
    const open = this.open
    if (open === undefined) return
    this.open = undefined
    const { index, id } = open
    switch (open.kind) {
      case "message": {
        const text = open.text.value
        // The file-parser's `file` annotations (first message only), then the links it cites.
        const files = this.annotations
        this.annotations = undefined
        const citations = this.citable === undefined ? undefined : citationsIn(text, this.citable)
        const annotations: ReadonlyArray<unknown> | undefined =
          citations === undefined || citations.length === 0 ? files : files === undefined ? citations : [...files, ...citations]
        const part = outputText(text, annotations)
        const item: OutputMessage = { type: "message", id, role: "assistant", status, content: [part] }
        this.output.push(item)
        if (this.stream) {
          // The JSON of `part` and `item` as JSON.stringify writes them (the test compares the two).
          const textJson = JSON.stringify(text)
          const idJson = JSON.stringify(id)
          const partJson = `{"type":"output_text","text":${textJson},"annotations":${annotations === undefined ? "[]" : JSON.stringify(annotations)},"logprobs":[]}`
          const itemJson = `{"type":"message","id":${idJson},"role":"assistant","status":"${status}","content":[${partJson}]}`
          this.outputJson[this.output.length - 1] = itemJson
          const at = `"item_id":${idJson},"output_index":${index},"content_index":0`
          if (annotations !== undefined) {
            for (let i = 0; i < annotations.length; i++) {
              this.eventText("response.output_text.annotation.added", `${at},"annotation_index":${i},"annotation":${JSON.stringify(annotations[i])}`)
            }
          }
          this.eventText("response.output_text.done", `${at},"text":${textJson},"logprobs":[]`)
          this.eventText("response.content_part.done", `${at},"part":${partJson}`)
          this.eventText("response.output_item.done", `"output_index":${index},"item":${itemJson}`)
        }
        return
      }
      case "reasoning": {
        const text = open.text.value
        const part = { type: "summary_text" as const, text }
        const item: OutputReasoning =
          open.encrypted === undefined
            ? { type: "reasoning", id, summary: [part] }
            : { type: "reasoning", id, summary: [part], encrypted_content: open.encrypted, format: ANTHROPIC_REASONING }
        this.output.push(item)
        if (this.stream) {
          const at = { item_id: id, output_index: index, summary_index: 0 }
          this.event("response.reasoning_summary_text.done", { ...at, text })
          this.event("response.reasoning_summary_part.done", { ...at, part })
          this.event("response.output_item.done", { output_index: index, item })
        }
        return
      }
      case "function_call": {
        const args = open.args.value
        const item: OutputFunctionCall = {
          type: "function_call",
          id,
          call_id: open.callId,
          name: open.name,
          arguments: args,
          status,
        }
        this.output.push(item)
        if (this.stream) {
          this.event("response.function_call_arguments.done", {
            item_id: id,
            output_index: index,
            name: open.name,
            arguments: args,
          })
          this.event("response.output_item.done", { output_index: index, item })
        }
        return
      }
    }
  }
}
