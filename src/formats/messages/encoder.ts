/**
 * Egress of POST /v1/messages: one Anthropic Messages answer from upstream `ProviderEvent`
 * batches, as the JSON `message` object or the SSE events Anthropic's clients read
 * (`message_start`, `ping`, `content_block_start|delta|stop`, `message_delta`, `message_stop`;
 * `error` for a failure after the first byte).
 *
 * Plain code on purpose: `push` runs once per upstream chunk, where an Effect Stream step costs
 * 15–20 µs. Text deltas are concatenated from a pre-built head per content block and
 * the delta's JSON literal; a run of the upstream's own literals (`text_literals`) is written as
 * it came (its bytes are printable ASCII: its latin1 text is its JSON text) and decoded once for
 * the answer's text.
 */
import type { Types } from "effect"
import { isValidUsage, type Usage } from "../../domain/pricing.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import { randomPool, takeRandom } from "../../domain/random.js"
import { type EncodedStatus, type Encoder, type EncoderOptions, type FinishExtras, isWholeObject, type StreamFailure } from "../format.js"
import { latin1Slice } from "../../providers/json-literal.js"
import type { FinishReason, ProviderEvent } from "../../providers/types.js"
import { streamErrorJson } from "./errors.js"

// ---------------------------------------------------------------------------------------------
// Wire shapes of the answer
// ---------------------------------------------------------------------------------------------

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal"

export type MessagesContentBlock =
  /** `annotations`: the file-parser's `file` annotations, on the first text block (an extra key: clients keep it or strip it). */
  | { readonly type: "text"; readonly text: string; readonly annotations?: ReadonlyArray<unknown> }
  | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }

export interface MessagesUsage {
  /** Input tokens not read from nor written to the prompt cache (Anthropic's sense: the three add up to the prompt). */
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_creation_input_tokens: number
  readonly cache_read_input_tokens: number
  /** USD. */
  readonly cost?: number
  readonly is_byok?: boolean
}

export interface MessagesResult {
  readonly id: string
  readonly type: "message"
  readonly role: "assistant"
  readonly model: string
  readonly content: ReadonlyArray<MessagesContentBlock>
  readonly stop_reason: StopReason | null
  readonly stop_sequence: string | null
  readonly usage: MessagesUsage
  /** The provider that answered, when the route names it. */
  readonly provider?: string
  readonly service_metadata?: Record<string, unknown>
  readonly openrouter_metadata?: Record<string, unknown>
}

export interface MessagesEncoderOptions extends EncoderOptions {
  /** The message id (`msg_…`) and tool-use ids; random by default. */
  readonly newId?: (prefix: string) => string
}

const STOP_REASONS: Readonly<Record<Exclude<FinishReason, "error">, StopReason>> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  content_filter: "refusal",
}

/** Anthropic's id alphabet (base 62), 24 characters (~143 bits): `msg_…`, `toolu_…`. */
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
export const anthropicId = (prefix: string): string => {
  const at = takeRandom(24)
  let id = `${prefix}_`
  for (let i = at; i < at + 24; i++) id += ALPHABET[(randomPool[i] as number) % 62]
  return id
}

const ZERO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

/** Our `inputTokens` counts cache reads and writes; Anthropic's `input_tokens` does not. */
export const messagesUsage = (usage: Usage, extras: FinishExtras = {}): MessagesUsage => {
  const out: Types.Mutable<MessagesUsage> = {
    input_tokens: Math.max(0, usage.inputTokens - usage.cachedTokens - usage.cacheWriteTokens),
    output_tokens: usage.outputTokens,
    cache_creation_input_tokens: usage.cacheWriteTokens,
    cache_read_input_tokens: usage.cachedTokens,
  }
  if (extras.cost !== undefined) out.cost = extras.cost
  if (extras.isByok !== undefined) out.is_byok = extras.isByok
  return out
}

/** A tool call's arguments as tool_use `input`: an object, `{}` when they are not one (Anthropic requires an object). */
const toolInput = (args: string): unknown => {
  if (args === "") return {}
  try {
    const parsed: unknown = JSON.parse(args)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

// ---------------------------------------------------------------------------------------------
// SSE pieces
// ---------------------------------------------------------------------------------------------

const frame = (type: string, json: string): string => `event: ${type}\ndata: ${json}\n\n`
const PING = frame("ping", '{"type":"ping"}')
const MESSAGE_STOP = frame("message_stop", '{"type":"message_stop"}')
const DELTA_OPEN = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
const TEXT_DELTA_MID = ',"delta":{"type":"text_delta","text":'
const THINKING_DELTA_MID = ',"delta":{"type":"thinking_delta","thinking":'
const JSON_DELTA_MID = ',"delta":{"type":"input_json_delta","partial_json":'
const SIGNATURE_DELTA_MID = ',"delta":{"type":"signature_delta","signature":'
const DELTA_TAIL = "}}\n\n"

/** Text grown from many small deltas, joined every 32 pieces (a rope cell per delta held a whole stream's deltas). */
class Text {
  private flat = ""
  private readonly parts: Array<string> = []
  append(piece: string): void {
    this.parts.push(piece)
    if (this.parts.length >= 32) this.compact()
  }
  get value(): string {
    if (this.parts.length > 0) this.compact()
    return this.flat
  }
  private compact(): void {
    this.flat += this.parts.join("")
    this.parts.length = 0
  }
}

/** The text of a JSON literal's inside (printable ASCII with JSON's escapes: `isPlainLiteral`). */
const insideOf = (literal: string): string =>
  literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1)

interface OpenBlock {
  readonly kind: "text" | "thinking" | "tool_use"
  readonly index: number
  /** `DELTA_OPEN` + index + the delta's head: the part of each delta event before its JSON string. */
  readonly head: string
  readonly text: Text
  /** tool_use: the call's id, name and upstream index. */
  readonly id?: string
  readonly name?: string
  readonly upstreamIndex?: number
  /** text: the annotations it carries (the first text block only). */
  readonly annotations?: ReadonlyArray<unknown> | undefined
  /** thinking: the upstream's signature of it, once given (the block then ends). */
  signature?: string
}

/** A call the upstream began while another call's input was still coming: kept out of the stream until that one closes. */
interface WaitingCall {
  readonly upstreamIndex: number
  readonly id: string
  readonly name: string
  readonly text: Text
}

/**
 * One Messages answer. Streaming: `start()` once, `push(batch)` per upstream chunk, then one of
 * `finish(extras)` or `fail(failure)`; each returns the SSE text to write ("" when not streaming).
 */
export class MessagesEncoder implements Encoder {
  private readonly id: string
  private readonly model: string
  private readonly provider: string | undefined
  private readonly stream: boolean
  private readonly makeId: (prefix: string) => string

  private buf = ""
  private readonly content: Array<MessagesContentBlock> = []
  private open: OpenBlock | undefined = undefined
  /** Upstream tool-call indexes already given a block or waiting for one (a late delta for a closed one is dropped). */
  private readonly seenCalls = new Set<number>()
  /**
   * Calls the upstream interleaves with the open call (Chat streams may alternate calls' deltas by
   * index), in the order they began; Anthropic's clients take one block at a time, so each becomes
   * a whole block when the open call closes. Undefined until an interleaving is seen.
   */
  private waiting: Array<WaitingCall> | undefined = undefined

  private lastUsage: Usage | undefined = undefined
  private reason: FinishReason | undefined = undefined
  private state: EncodedStatus = "in_progress"
  private stopReason: StopReason | null = null
  private usageOut: MessagesUsage = messagesUsage(ZERO_USAGE)
  private serviceMetadata: Record<string, unknown> | undefined = undefined
  private metadataAlias = false
  /** Annotations the first text block takes (undefined once taken, or when there are none). */
  private annotations: ReadonlyArray<unknown> | undefined

  constructor(_request: ResponsesRequest, options: MessagesEncoderOptions) {
    this.stream = options.stream
    this.annotations = options.annotations
    this.model = options.model
    this.provider = options.provider
    this.makeId = options.newId ?? anthropicId
    this.id = this.makeId("msg")
  }

  get status(): EncodedStatus {
    return this.state
  }
  get ended(): boolean {
    return this.state !== "in_progress"
  }
  /** The last usage the upstream reported; undefined when none, or counts that are not counts. */
  get usage(): Usage | undefined {
    return this.lastUsage
  }
  get finishReason(): FinishReason | undefined {
    return this.reason
  }
  get completionText(): string {
    return this.textOf("text")
  }
  get reasoningText(): string {
    return this.textOf("thinking")
  }

  /** `message_start` (the message with no content yet) and a `ping`, as Anthropic opens a stream. */
  start(): string {
    if (!this.stream) return ""
    const message = this.snapshot([], null)
    return frame("message_start", `{"type":"message_start","message":${JSON.stringify(message)}}`) + PING
  }

  push(events: ReadonlyArray<ProviderEvent>, from = 0, to = events.length): string {
    if (this.ended) return ""
    for (let i = from; i < to; i++) {
      const e = events[i]
      switch (e.type) {
        case "text": {
          if (e.delta === "") break
          const block = this.open?.kind === "text" ? this.open : this.openBlock("text")
          block.text.append(e.delta)
          if (this.stream) this.buf += block.head + (e.json ?? JSON.stringify(e.delta)) + DELTA_TAIL
          break
        }
        case "text_literals": {
          const spans = e.spans
          if (spans.length === 0) break
          const block = this.open?.kind === "text" ? this.open : this.openBlock("text")
          for (let s = 0; s < spans.length; s += 2) {
            const literal = latin1Slice(e.source, spans[s] as number, spans[s + 1] as number)
            block.text.append(insideOf(literal))
            if (this.stream) this.buf += block.head + literal + DELTA_TAIL
          }
          break
        }
        case "reasoning": {
          if (e.delta === "") break
          const block = this.open?.kind === "thinking" ? this.open : this.openBlock("thinking")
          block.text.append(e.delta)
          if (this.stream) this.buf += block.head + JSON.stringify(e.delta) + DELTA_TAIL
          break
        }
        case "reasoning_signature":
          this.seal(e.signature, e.redacted === true)
          break
        case "tool_call_start": {
          if (this.open?.kind === "tool_use" && this.open.upstreamIndex === e.index) break
          if (this.waitingCall(e.index) !== undefined) break
          this.beginCall(e.index, e.callId, e.name)
          break
        }
        case "tool_call_delta": {
          if (e.delta === "") break
          const open = this.open
          const call = open?.kind === "tool_use" && open.upstreamIndex === e.index ? open : this.callFor(e.index)
          if (call === undefined) break // its block is closed: a client takes no more deltas for it
          call.text.append(e.delta)
          if (this.stream && call === this.open) this.buf += this.open.head + JSON.stringify(e.delta) + DELTA_TAIL
          break
        }
        case "usage":
          // Untrustworthy counts are missing ones (the route estimates), as for every format.
          this.lastUsage = isValidUsage(e.usage) ? e.usage : undefined
          break
        case "finish":
          this.reason = e.reason
          break
      }
    }
    return this.take()
  }

  /**
   * Closes the open block, then `message_delta` (stop reason, usage, routing metadata) and
   * `message_stop`. An upstream that finished with reason "error" ends as `fail`.
   */
  finish(extras: FinishExtras = {}): string {
    if (this.ended) return ""
    if (this.reason === "error") {
      return this.fail({ code: "server_error", message: "The upstream provider ended the response with an error" }, extras)
    }
    this.close()
    this.settle(extras)
    const reason = this.reason ?? "stop"
    this.stopReason = STOP_REASONS[reason]
    this.state = reason === "length" || reason === "content_filter" ? "incomplete" : "completed"
    if (this.stream) {
      let delta = `{"type":"message_delta","delta":{"stop_reason":"${this.stopReason}","stop_sequence":null},"usage":${JSON.stringify(this.usageOut)}`
      if (this.serviceMetadata !== undefined) {
        const metadata = JSON.stringify(this.serviceMetadata)
        delta += `,"service_metadata":${metadata}`
        if (this.metadataAlias) delta += `,"openrouter_metadata":${metadata}`
      }
      this.buf += frame("message_delta", `${delta}}`) + MESSAGE_STOP
    }
    return this.take()
  }

  /** A failure after the first byte: Anthropic's `error` event (the stream's end; the client raises it). */
  fail(failure: StreamFailure, extras: FinishExtras = {}): string {
    if (this.ended) return ""
    this.close()
    this.settle(extras)
    this.state = "failed"
    if (this.stream) this.buf += frame("error", streamErrorJson(failure))
    return this.take()
  }

  /** The `message` object as it stands (final after `finish` or `fail`). */
  result(): MessagesResult {
    return this.snapshot(this.content.slice(), this.stopReason)
  }

  // ---- internals ----

  private snapshot(content: Array<MessagesContentBlock>, stopReason: StopReason | null): MessagesResult {
    const result: Types.Mutable<MessagesResult> = {
      id: this.id,
      type: "message",
      role: "assistant",
      model: this.model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: this.usageOut,
    }
    if (this.provider !== undefined) result.provider = this.provider
    if (this.serviceMetadata !== undefined) {
      result.service_metadata = this.serviceMetadata
      if (this.metadataAlias) result.openrouter_metadata = this.serviceMetadata
    }
    return result
  }

  private textOf(kind: "text" | "thinking"): string {
    let text = ""
    for (const block of this.content) {
      if (kind === "text" && block.type === "text") text += block.text
      else if (kind === "thinking" && block.type === "thinking") text += block.thinking
    }
    if (this.open?.kind === kind) text += this.open.text.value
    return text
  }

  private take(): string {
    const out = this.buf
    this.buf = ""
    return out
  }

  private settle(extras: FinishExtras): void {
    this.usageOut = messagesUsage(extras.usage ?? this.lastUsage ?? ZERO_USAGE, extras)
    if (extras.serviceMetadata !== undefined) this.serviceMetadata = extras.serviceMetadata
    if (extras.metadataAlias === true) this.metadataAlias = true
  }

  private openBlock(kind: "text" | "thinking"): OpenBlock {
    this.close()
    const index = this.content.length
    const annotations = kind === "text" ? this.annotations : undefined
    if (annotations !== undefined) this.annotations = undefined
    const block: OpenBlock = {
      kind,
      index,
      head: this.stream ? DELTA_OPEN + index + (kind === "text" ? TEXT_DELTA_MID : THINKING_DELTA_MID) : "",
      text: new Text(),
      annotations,
    }
    this.open = block
    if (this.stream) {
      // The block's annotations are known at its start (the stream has no event for them later).
      const start =
        kind === "text"
          ? annotations === undefined
            ? '{"type":"text","text":""}'
            : `{"type":"text","text":"","annotations":${JSON.stringify(annotations)}}`
          : '{"type":"thinking","thinking":"","signature":""}'
      this.buf += frame("content_block_start", `{"type":"content_block_start","index":${index},"content_block":${start}}`)
    }
    return block
  }

  /**
   * A call the upstream begins: its block opens now, unless a call whose input is not whole is open
   * (the upstream interleaves them), or calls already wait; then it waits its turn.
   */
  private beginCall(upstreamIndex: number, callId: string, name: string): OpenBlock | WaitingCall {
    const open = this.open
    if (open?.kind !== "tool_use" || (this.waiting === undefined && isWholeObject(open.text.value))) {
      return this.openCall(upstreamIndex, callId, name)
    }
    const call: WaitingCall = { upstreamIndex, id: callId === "" ? this.makeId("toolu") : callId, name, text: new Text() }
    this.seenCalls.add(upstreamIndex)
    if (this.waiting === undefined) this.waiting = [call]
    else this.waiting.push(call)
    return call
  }

  private waitingCall(upstreamIndex: number): WaitingCall | undefined {
    return this.waiting?.find((call) => call.upstreamIndex === upstreamIndex)
  }

  /** The call a delta for `upstreamIndex` goes to when it is not the open one: a waiting call, one begun now, or none (its block is closed). */
  private callFor(upstreamIndex: number): OpenBlock | WaitingCall | undefined {
    const waiting = this.waitingCall(upstreamIndex)
    if (waiting !== undefined) return waiting
    return this.seenCalls.has(upstreamIndex) ? undefined : this.beginCall(upstreamIndex, "", "")
  }

  private openCall(upstreamIndex: number, callId: string, name: string, text = new Text()): OpenBlock {
    this.close()
    const index = this.content.length
    const id = callId === "" ? this.makeId("toolu") : callId
    this.seenCalls.add(upstreamIndex)
    const block: OpenBlock = {
      kind: "tool_use",
      index,
      head: this.stream ? DELTA_OPEN + index + JSON_DELTA_MID : "",
      text,
      id,
      name,
      upstreamIndex,
    }
    this.open = block
    if (this.stream) {
      const start = JSON.stringify({ type: "tool_use", id, name, input: {} })
      this.buf += frame("content_block_start", `{"type":"content_block_start","index":${index},"content_block":${start}}`)
    }
    return block
  }

  /**
   * The upstream's seal of its thinking: the open thinking block (one opened for it when its text
   * was empty) takes the signature, as Anthropic streams it (`signature_delta`), and ends, so
   * later thinking is a block of its own. A redacted block is whole at once.
   */
  private seal(signature: string, redacted: boolean): void {
    if (redacted) {
      this.close()
      const index = this.content.length
      const block = { type: "redacted_thinking" as const, data: signature }
      this.content.push(block)
      if (this.stream) {
        this.buf += frame("content_block_start", `{"type":"content_block_start","index":${index},"content_block":${JSON.stringify(block)}}`)
        this.buf += frame("content_block_stop", `{"type":"content_block_stop","index":${index}}`)
      }
      return
    }
    const block = this.open?.kind === "thinking" ? this.open : this.openBlock("thinking")
    block.signature = signature
    if (this.stream) this.buf += DELTA_OPEN + block.index + SIGNATURE_DELTA_MID + JSON.stringify(signature) + DELTA_TAIL
    this.closeOpen()
  }

  /** Closes the open block (if any), then gives each call that waited for it its whole block. */
  private close(): void {
    this.closeOpen()
    const waiting = this.waiting
    if (waiting === undefined) return
    this.waiting = undefined
    for (const call of waiting) {
      const block = this.openCall(call.upstreamIndex, call.id, call.name, call.text)
      const input = call.text.value
      if (this.stream && input !== "") this.buf += block.head + JSON.stringify(input) + DELTA_TAIL
      this.closeOpen()
    }
  }

  /** Closes the open block (if any) into the content, with its `content_block_stop`. */
  private closeOpen(): void {
    const open = this.open
    if (open === undefined) return
    this.open = undefined
    const text = open.text.value
    switch (open.kind) {
      case "text":
        this.content.push(open.annotations === undefined ? { type: "text", text } : { type: "text", text, annotations: open.annotations })
        break
      case "thinking":
        // Without the upstream's signature (another provider's reasoning): empty, as a client that round-trips it expects a string.
        this.content.push({ type: "thinking", thinking: text, signature: open.signature ?? "" })
        break
      case "tool_use":
        this.content.push({ type: "tool_use", id: open.id ?? "", name: open.name ?? "", input: toolInput(text) })
        break
    }
    if (this.stream) this.buf += frame("content_block_stop", `{"type":"content_block_stop","index":${open.index}}`)
  }
}
