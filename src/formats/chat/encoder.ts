/**
 * Builds one Chat Completions answer from upstream `ProviderEvent` batches: the `chat.completion`
 * result, or the stream of `chat.completion.chunk`s (a role chunk, content / reasoning /
 * tool-call deltas, a finish chunk, the usage chunk with `choices: []`, `data: [DONE]`) that the
 * openai and @openrouter/sdk clients accept.
 *
 * Plain code on purpose: `push` runs once per upstream chunk (an Effect Stream step costs 15–20 µs). A delta chunk is a
 * pre-built head, the delta's JSON string and a pre-built tail; a `text_literals` delta's JSON is
 * the upstream's own literal (printable ASCII with JSON's escapes: its latin1 text is its JSON),
 * so no delta is serialized twice.
 */
import type { Types } from "effect"
import { isValidUsage, type Usage } from "../../domain/pricing.js"
import { ANTHROPIC_REASONING, sealToken } from "../../domain/responses.js"
import { newId } from "../responses/assembler.js"
import { DONE } from "../sse.js"
import type { EncodedStatus, Encoder, FinishExtras, ServerToolUse, StreamFailure } from "../format.js"
import { latin1Slice } from "../../providers/json-literal.js"
import type { FinishReason, ProviderEvent } from "../../providers/types.js"

// ---------------------------------------------------------------------------------------------
// Wire shapes (what the encoder writes; the tests decode them with the clients' schemas)
// ---------------------------------------------------------------------------------------------

export interface ChatUsage {
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly total_tokens: number
  readonly prompt_tokens_details: { readonly cached_tokens: number; readonly cache_write_tokens: number }
  readonly completion_tokens_details: { readonly reasoning_tokens: number }
  /** USD. */
  readonly cost?: number
  readonly is_byok?: boolean
  /** The server-tool loop ran: its counts, as the official SDK's chat usage names them. */
  readonly server_tool_use_details?: ServerToolUse
}

export interface ChatToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

export interface ReasoningDetailText {
  readonly type: "reasoning.text"
  readonly text: string
  /** The upstream's signature of the text (Claude's), sent back with it on a later turn. */
  readonly signature?: string
  /** Whose signature it is (`ANTHROPIC_REASONING`), with one. */
  readonly format?: string
  readonly index: number
}

/** A reasoning block the upstream withheld (Anthropic's `redacted_thinking`): its data, marked as such (`sealToken`). */
export interface ReasoningDetailEncrypted {
  readonly type: "reasoning.encrypted"
  readonly data: string
  readonly format: string
  readonly index: number
}

/** A block Claude sealed: its text and signature, in Claude's format. */
const signedDetail = (text: string, signature: string): ReasoningDetailText => ({ type: "reasoning.text", text, signature, format: ANTHROPIC_REASONING, index: 0 })

/** A block Claude withheld: its data, marked (`sealToken`), in Claude's format. */
const redactedDetail = (data: string): ReasoningDetailEncrypted => ({ type: "reasoning.encrypted", data: sealToken(data, true), format: ANTHROPIC_REASONING, index: 0 })

export interface ChatResultMessage {
  readonly role: "assistant"
  readonly content: string | null
  readonly refusal: null
  readonly reasoning?: string
  readonly reasoning_details?: ReadonlyArray<ReasoningDetailText | ReasoningDetailEncrypted>
  readonly tool_calls?: ReadonlyArray<ChatToolCall>
  /** The file-parser's `file` annotations (sent back with the turn, they spare a parse). */
  readonly annotations?: ReadonlyArray<unknown>
}

/** `finish_reason` on the wire: the normalized reason, or "error" for an answer that failed. */
export type ChatFinishReason = FinishReason

export interface ChatResult {
  readonly id: string
  readonly object: "chat.completion"
  readonly created: number
  readonly model: string
  readonly provider?: string
  readonly system_fingerprint: null
  readonly choices: ReadonlyArray<{
    readonly index: 0
    readonly logprobs: null
    readonly finish_reason: ChatFinishReason | null
    /** The upstream's own reason (`end_turn`, `STOP`, …) where it has one, else the normalized one. */
    readonly native_finish_reason: string | null
    readonly message: ChatResultMessage
  }>
  readonly usage?: ChatUsage
  readonly service_metadata?: Record<string, unknown>
  readonly openrouter_metadata?: Record<string, unknown>
}

// ---------------------------------------------------------------------------------------------
// Pieces
// ---------------------------------------------------------------------------------------------

const ZERO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

const chatUsage = (usage: Usage, extras: FinishExtras): ChatUsage => {
  const out: Types.Mutable<ChatUsage> = {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens, cache_write_tokens: usage.cacheWriteTokens },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
  }
  if (extras.cost !== undefined) out.cost = extras.cost
  if (extras.isByok !== undefined) out.is_byok = extras.isByok
  if (extras.serverToolUse !== undefined) out.server_tool_use_details = extras.serverToolUse
  return out
}

/**
 * A stream failure's integer `error.code` (the HTTP status the same failure has before the first
 * byte: the official SDK requires an integer) and its `metadata.error_type`.
 */
const failureStatus = (code: string): { readonly status: number; readonly type: string } => {
  switch (code) {
    case "rate_limit_exceeded":
      return { status: 429, type: "rate_limit_exceeded" }
    case "upstream_timeout":
      return { status: 524, type: "timeout" }
    case "timeout":
      return { status: 408, type: "timeout" }
    case "overloaded":
      return { status: 529, type: "provider_overloaded" }
    case "invalid_request":
      return { status: 400, type: "invalid_request" }
    case "server_shutting_down":
      return { status: 503, type: "provider_unavailable" }
    case "server_error":
      return { status: 502, type: "server" }
    default:
      return { status: 500, type: "server" }
  }
}

/** The text of JSON literals' insides (printable ASCII with JSON's escapes, valid by construction). */
const decodeInside = (inside: string): string => (inside.includes("\\") ? (JSON.parse(`"${inside}"`) as string) : inside)

/**
 * Text grown from many small deltas, joined every 32 (a `+=` per delta keeps a rope cell per
 * delta alive for the whole answer; see the Responses assembler's TextBuffer).
 */
class Text {
  private flat = ""
  private readonly parts: Array<string> = []

  append(delta: string): void {
    this.parts.push(delta)
    if (this.parts.length >= 32) this.compact()
  }

  get value(): string {
    if (this.parts.length > 0) this.compact()
    return this.flat
  }

  get empty(): boolean {
    return this.flat === "" && this.parts.length === 0
  }

  private compact(): void {
    this.flat += this.parts.join("")
    this.parts.length = 0
  }
}

interface Call {
  /** The call's place among this answer's calls (`tool_calls[].index`). */
  readonly index: number
  readonly id: string
  readonly name: string
  readonly args: Text
}

export interface ChatEncoderBase {
  /** `chatcmpl-…` */
  readonly id: string
  /** Unix seconds. */
  readonly created: number
  readonly model: string
  /** The provider that answered. */
  readonly provider?: string
}

export interface ChatEncoderOptions {
  readonly stream: boolean
  /** Streaming: send the usage chunk before [DONE] (`stream_options.include_usage`, default true). */
  readonly includeUsage: boolean
  /** Call ids for calls the upstream gave none (`call_…`); random by default. */
  readonly newId?: (prefix: string) => string
  /** Annotations of the message (the file-parser's `file` annotations): in the result, and streamed in the finish chunk's delta. */
  readonly annotations?: ReadonlyArray<unknown> | undefined
}

/** `chatcmpl-` and 24 random hex characters. */
export const newChatId = (): string => `chatcmpl-${newId("x").slice(2)}`

/**
 * One chat answer. Streaming: `start()` once, `push(batch)` per upstream chunk, then exactly one
 * of `finish(extras)` or `fail(failure)`; each returns the SSE text to write ("" when not
 * streaming). `result()` is the JSON body of a non-streamed answer.
 */
export class ChatEncoder implements Encoder {
  private readonly base: ChatEncoderBase
  private readonly stream: boolean
  private readonly includeUsage: boolean
  private readonly makeId: (prefix: string) => string
  /** `data: {"id":…,"choices":[{"index":0,"delta":{` — every choice chunk starts so. */
  private readonly head: string

  private buf = ""
  private readonly content = new Text()
  private readonly reasoning = new Text()
  /** The upstream's seals of its reasoning blocks (`reasoning_signature`), in order; undefined while none came. */
  private seals: Array<{ readonly signature: string; readonly redacted: boolean }> | undefined = undefined
  private readonly calls: Array<Call> = []
  /** Upstream tool-call index → this answer's call. */
  private readonly callByUpstream = new Map<number, Call>()

  private lastUsage: Usage | undefined = undefined
  private reason: FinishReason | undefined = undefined
  /** The upstream's own word for the reason (`native` of the finish event), when it has one. */
  private native: string | undefined = undefined
  private state: EncodedStatus = "in_progress"
  private usageOut: ChatUsage | undefined = undefined
  private serviceMetadata: Record<string, unknown> | undefined = undefined
  private metadataAlias = false
  private readonly annotations: ReadonlyArray<unknown> | undefined

  constructor(base: ChatEncoderBase, options: ChatEncoderOptions) {
    this.base = base
    this.stream = options.stream
    this.annotations = options.annotations
    this.includeUsage = options.includeUsage
    this.makeId = options.newId ?? newId
    this.head = this.stream ? `data: {${this.identity("chat.completion.chunk")},"choices":[{"index":0,"delta":{` : ""
  }

  get completionText(): string {
    return this.content.value
  }
  get reasoningText(): string {
    return this.reasoning.value
  }
  /** The last usage the upstream reported; undefined when it reported none or counts that are not counts. */
  get usage(): Usage | undefined {
    return this.lastUsage
  }
  get finishReason(): FinishReason | undefined {
    return this.reason
  }
  get status(): EncodedStatus {
    return this.state
  }
  get ended(): boolean {
    return this.state !== "in_progress"
  }

  /** `debug.echo_upstream_body`: a chunk with no choices whose `debug` holds the body sent upstream (clients take it as a chunk). */
  debugChunk(upstreamBody: unknown): string {
    return `data: {${this.identity("chat.completion.chunk")},"choices":[],"debug":${JSON.stringify({ echo_upstream_body: upstreamBody })}}\n\n`
  }

  /** The role chunk. */
  start(): string {
    if (!this.stream) return ""
    return `${this.head}"role":"assistant","content":""${DELTA_TAIL}`
  }

  push(events: ReadonlyArray<ProviderEvent>, from = 0, to = events.length): string {
    if (this.ended) return ""
    for (let i = from; i < to; i++) {
      const e = events[i]
      switch (e.type) {
        case "text":
          if (e.delta === "") break
          this.content.append(e.delta)
          if (this.stream) this.buf += `${this.head}"content":${e.json ?? JSON.stringify(e.delta)}${DELTA_TAIL}`
          break
        case "text_literals": {
          const spans = e.spans
          for (let s = 0; s < spans.length; s += 2) {
            const literal = latin1Slice(e.source, spans[s] as number, spans[s + 1] as number)
            this.content.append(decodeInside(literal.slice(1, -1)))
            if (this.stream) this.buf += `${this.head}"content":${literal}${DELTA_TAIL}`
          }
          break
        }
        case "reasoning": {
          if (e.delta === "") break
          this.reasoning.append(e.delta)
          if (this.stream) {
            const json = JSON.stringify(e.delta)
            this.buf += `${this.head}"reasoning":${json},"reasoning_details":[{"type":"reasoning.text","text":${json},"index":0}]${DELTA_TAIL}`
          }
          break
        }
        case "reasoning_signature": {
          const redacted = e.redacted === true
          if (this.seals === undefined) this.seals = []
          this.seals.push({ signature: e.signature, redacted })
          if (this.stream) {
            const detail = redacted ? redactedDetail(e.signature) : signedDetail("", e.signature)
            this.buf += `${this.head}"reasoning_details":[${JSON.stringify(detail)}]${DELTA_TAIL}`
          }
          break
        }
        case "tool_call_start": {
          if (this.callByUpstream.has(e.index)) break
          this.openCall(e.index, e.callId, e.name)
          break
        }
        case "tool_call_delta": {
          if (e.delta === "") break
          const call = this.callByUpstream.get(e.index) ?? this.openCall(e.index, "", "")
          call.args.append(e.delta)
          if (this.stream) {
            this.buf += `${this.head}"tool_calls":[{"index":${call.index},"function":{"arguments":${JSON.stringify(e.delta)}}}]${DELTA_TAIL}`
          }
          break
        }
        case "usage":
          // Untrustworthy counts are missing ones (estimated by the route), as for every format.
          this.lastUsage = isValidUsage(e.usage) ? e.usage : undefined
          break
        case "finish":
          this.reason = e.reason
          this.native = e.native
          break
      }
    }
    return this.take()
  }

  /**
   * The finish chunk, the usage chunk (unless `include_usage` was false) and [DONE]. An upstream
   * that finished with reason "error" ends as `fail`.
   */
  finish(extras: FinishExtras = {}): string {
    if (this.ended) return ""
    if (this.reason === "error") {
      return this.fail({ code: "server_error", message: "The upstream provider ended the response with an error" }, extras)
    }
    this.settle(extras)
    const reason = this.wireReason()
    this.state = reason === "length" || reason === "content_filter" ? "incomplete" : "completed"
    const annotations = this.annotations === undefined ? "" : `"annotations":${JSON.stringify(this.annotations)}`
    if (this.stream) this.end(`${this.head}${annotations}},"finish_reason":"${reason}","native_finish_reason":${JSON.stringify(this.nativeReason(reason))}}]`)
    return this.take()
  }

  /** A failure after the first byte: a chunk with top-level `error` and finish reason "error", the usage chunk, [DONE]. */
  fail(failure: StreamFailure, extras: FinishExtras = {}): string {
    if (this.ended) return ""
    this.settle(extras)
    this.state = "failed"
    if (this.stream) {
      const { status, type } = failureStatus(failure.code)
      const error = JSON.stringify({ code: status, message: failure.message, metadata: { error_type: type } })
      this.end(`data: {${this.identity("chat.completion.chunk")},"error":${error},"choices":[{"index":0,"delta":{},"finish_reason":"error","native_finish_reason":"error"}]`)
    }
    return this.take()
  }

  /**
   * The answer's reasoning as details: its text, with the upstream's signature when one block was
   * sealed (with more, the text is their concatenation, which no signature covers), and each
   * redacted block's marked data.
   */
  private reasoningDetails(): Array<ReasoningDetailText | ReasoningDetailEncrypted> {
    const seals = this.seals ?? []
    const signed = seals.filter((seal) => !seal.redacted)
    const details: Array<ReasoningDetailText | ReasoningDetailEncrypted> = []
    if (!this.reasoning.empty || signed.length > 0) {
      const text = this.reasoning.value
      const only = signed.length === 1 ? signed[0] : undefined
      details.push(only === undefined ? { type: "reasoning.text", text, index: 0 } : signedDetail(text, only.signature))
    }
    for (const seal of seals) if (seal.redacted) details.push(redactedDetail(seal.signature))
    return details
  }

  result(): ChatResult {
    const b = this.base
    const reason = this.ended ? this.wireReason() : null
    const message: Types.Mutable<ChatResultMessage> = {
      role: "assistant",
      content: this.content.empty && this.calls.length > 0 ? null : this.content.value,
      refusal: null,
    }
    if (!this.reasoning.empty || this.seals !== undefined) message.reasoning_details = this.reasoningDetails()
    if (!this.reasoning.empty) message.reasoning = this.reasoning.value
    if (this.calls.length > 0) message.tool_calls = this.calls.map(callOf)
    if (this.annotations !== undefined) message.annotations = this.annotations
    const result: Types.Mutable<ChatResult> = {
      id: b.id,
      object: "chat.completion",
      created: b.created,
      model: b.model,
      ...(b.provider === undefined ? {} : { provider: b.provider }),
      system_fingerprint: null,
      choices: [{ index: 0, logprobs: null, finish_reason: reason, native_finish_reason: reason === null ? null : this.nativeReason(reason), message }],
    }
    if (this.usageOut !== undefined) result.usage = this.usageOut
    if (this.serviceMetadata !== undefined) {
      result.service_metadata = this.serviceMetadata
      if (this.metadataAlias) result.openrouter_metadata = this.serviceMetadata
    }
    return result
  }

  // ---- internals ----

  /** `"id":…,"object":…,"created":…,"model":…[,"provider":…]` */
  private identity(object: string): string {
    const b = this.base
    const provider = b.provider === undefined ? "" : `,"provider":${JSON.stringify(b.provider)}`
    return `"id":${JSON.stringify(b.id)},"object":"${object}","created":${b.created},"model":${JSON.stringify(b.model)}${provider}`
  }

  /** The upstream's own word for `reason` when it gave one, else `reason` itself; "error" is the gateway's own. */
  private nativeReason(reason: ChatFinishReason): string {
    return reason === "error" ? reason : (this.native ?? reason)
  }

  /** "error" once failed; else the upstream's reason, "tool_calls" for an answer of calls that gave none, "stop". */
  private wireReason(): ChatFinishReason {
    if (this.state === "failed") return "error"
    return this.reason ?? (this.calls.length > 0 ? "tool_calls" : "stop")
  }

  private take(): string {
    const out = this.buf
    this.buf = ""
    return out
  }

  private settle(extras: FinishExtras): void {
    this.usageOut = chatUsage(extras.usage ?? this.lastUsage ?? ZERO_USAGE, extras)
    if (extras.serviceMetadata !== undefined) this.serviceMetadata = extras.serviceMetadata
    if (extras.metadataAlias === true) this.metadataAlias = true
  }

  /** The last choice chunk (`chunk` without its closing brace), the usage chunk if asked for, [DONE]; metadata on the last chunk. */
  private end(chunk: string): void {
    const metadata = this.metadataJson()
    if (this.includeUsage) {
      this.buf += `${chunk}}\n\n`
      this.buf += `data: {${this.identity("chat.completion.chunk")},"choices":[],"usage":${JSON.stringify(this.usageOut)}${metadata}}\n\n`
    } else {
      this.buf += `${chunk}${metadata}}\n\n`
    }
    this.buf += DONE
  }

  private metadataJson(): string {
    if (this.serviceMetadata === undefined) return ""
    const json = JSON.stringify(this.serviceMetadata)
    return this.metadataAlias ? `,"service_metadata":${json},"openrouter_metadata":${json}` : `,"service_metadata":${json}`
  }

  private openCall(upstreamIndex: number, callId: string, name: string): Call {
    const call: Call = {
      index: this.calls.length,
      id: callId === "" ? this.makeId("call") : callId,
      name,
      args: new Text(),
    }
    this.calls.push(call)
    this.callByUpstream.set(upstreamIndex, call)
    if (this.stream) {
      const opening = { index: call.index, id: call.id, type: "function", function: { name, arguments: "" } }
      this.buf += `${this.head}"tool_calls":[${JSON.stringify(opening)}]${DELTA_TAIL}`
    }
    return call
  }
}

/** After a delta's fields: the choice's open finish reason and the chunk's end. */
const DELTA_TAIL = '},"finish_reason":null,"native_finish_reason":null}]}\n\n'

const callOf = (call: Call): ChatToolCall => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: call.args.value },
})
