/**
 * A ConverseStream body: AWS's binary event-stream framing, split by each frame's length prefix
 * as bytes arrive (a frame may span reads, a read may hold many), each frame decoded (and its
 * CRCs checked) by frame.ts (a decoder of our own, held to @smithy/eventstream-codec by a test)
 * and translated to ProviderEvents in the transport's read callback. Per-frame work is plain code, as for the SSE formats (http.ts).
 *
 * Events: messageStart, contentBlockStart (a tool call's id and name), contentBlockDelta (text,
 * a tool call's input JSON, reasoning), contentBlockStop, messageStop (the stop reason), metadata
 * (usage): the last. An `exception` frame is the upstream's failure after the first byte.
 */
import type { UpstreamLink } from "../http"
import type { BodySink, UpstreamResponse } from "../http1"
import { DONE, PushedEvents } from "../pushed-events"
import { BytePattern, isPlainLiteral, jsonLiteralEndInBytes, jsonStringValue } from "../json-literal"
import { isJsonObject } from "../errors"
import { finishEvent, ProviderError, type FinishReason, type ProviderEvent } from "../types"
import type { Usage } from "../../domain/pricing"
import { decodeFrame } from "./frame"
import { RESPONSE_TOOL } from "./request"
import { bedrockFinishReason, bedrockStreamFailure, bedrockUsage, type ConverseStreamEvent } from "./wire"

const text = new TextDecoder()

/**
 * A text delta's payload exactly as ConverseStream writes it, `{"contentBlockIndex":N,"delta":{"text":"…"}}`,
 * or with AWS's padding after it, `…},"p":"abc…"}` (letters and digits): read in place, as the SSE
 * path reads a learned chunk (openai-chat/stream.ts). With no whitespace, escape or other key
 * outside the literal, JSON.parse would give exactly that object, and a text delta's event does
 * not depend on its block: so the literal alone is the event, and the payload is not decoded or
 * parsed. Printable ASCII literals go on as their bytes (a run of them one `text_literals` event,
 * as on the SSE path); another literal is decoded and parsed alone (JSON.parse is the validation).
 * Anything else goes the general way (false).
 */
const DELTA_HEAD = new BytePattern(new TextEncoder().encode('{"contentBlockIndex":'))
const DELTA_TEXT = new BytePattern(new TextEncoder().encode(',"delta":{"text":'))
const DELTA_PAD = new BytePattern(new TextEncoder().encode('},"p":"'))
const CLOSE_BRACE = 125
const QUOTE = 34
const isAlnum = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)

export const textDeltaInPlace = (bytes: Uint8Array, start: number, end: number, out: Array<ProviderEvent>): boolean => {
  if (!DELTA_HEAD.foundAt(bytes, start, end)) return false
  let at = start + DELTA_HEAD.length
  const digits = at
  while (at < end && at - digits < 9 && (bytes[at] as number) >= 48 && (bytes[at] as number) <= 57) at++
  // One digit at least; no leading zero (not JSON).
  if (at === digits || (bytes[digits] === 48 && at - digits > 1)) return false
  if (!DELTA_TEXT.foundAt(bytes, at, end)) return false
  const open = at + DELTA_TEXT.length
  const close = jsonLiteralEndInBytes(bytes, open, end)
  if (close === -1) return false
  // The rest: `}}`, or `},"p":"<letters and digits>"}`.
  if (!(close + 2 === end && bytes[close] === CLOSE_BRACE && bytes[close + 1] === CLOSE_BRACE)) {
    if (!DELTA_PAD.foundAt(bytes, close, end)) return false
    let pad = close + DELTA_PAD.length
    while (pad < end && isAlnum(bytes[pad] as number)) pad++
    if (!(pad + 2 === end && bytes[pad] === QUOTE && bytes[pad + 1] === CLOSE_BRACE)) return false
  }
  if (close - open === 2) return true
  if (isPlainLiteral(bytes, open + 1, close - 1)) {
    // `out` holds this stream's events only: a run last in it, of these bytes, is this stream's own.
    const last = out[out.length - 1]
    if (last?.type === "text_literals" && last.source === bytes) (last.spans as Array<number>).push(open, close)
    else out.push({ type: "text_literals", source: bytes, spans: [open, close] })
    return true
  }
  const json = text.decode(bytes.subarray(open, close))
  const delta = jsonStringValue(json)
  if (delta === undefined) return false
  out.push({ type: "text", delta, json })
  return true
}

/** A frame is at least its prelude (12 bytes) and message CRC (4). */
const MIN_FRAME = 16


/** Turns decoded Converse stream events into ProviderEvents; one per call, fed in order. */
export class ConverseStreamTranslator {
  done = false
  private stopped = false
  private finish: FinishReason = "stop"
  private native: string | undefined
  private usage: Usage | undefined
  /** The block index of the structured answer's tool, whose input deltas are the answer's text. */
  private answerBlock = -1
  private calls = false

  constructor(private readonly structured: boolean) {}

  push(eventType: string, payload: ConverseStreamEvent, out: Array<ProviderEvent>): void {
    const index = payload.contentBlockIndex ?? 0
    switch (eventType) {
      case "contentBlockDelta": {
        const delta = payload.delta
        if (delta == null) return
        if (delta.text !== undefined) {
          if (delta.text.length > 0) out.push({ type: "text", delta: delta.text })
        } else if (delta.toolUse != null) {
          const input = delta.toolUse.input
          if (input === undefined || input.length === 0) return
          out.push(index === this.answerBlock ? { type: "text", delta: input } : { type: "tool_call_delta", index, delta: input })
        } else if (delta.reasoningContent !== undefined) {
          const { text, signature } = delta.reasoningContent
          if (text) out.push({ type: "reasoning", delta: text })
          else if (signature) out.push({ type: "reasoning_signature", signature })
        }
        return
      }
      case "contentBlockStart": {
        const toolUse = payload.start?.toolUse
        if (toolUse === undefined) return
        if (this.structured && toolUse.name === RESPONSE_TOOL) {
          this.answerBlock = index
          return
        }
        this.calls = true
        out.push({ type: "tool_call_start", index, callId: toolUse.toolUseId ?? `tooluse_${index}`, name: toolUse.name ?? "" })
        return
      }
      case "messageStop":
        this.stopped = true
        this.finish = this.answerBlock !== -1 && !this.calls ? "stop" : bedrockFinishReason(payload.stopReason)
        this.native = payload.stopReason ?? undefined
        return
      case "metadata":
        // Null is no usage, as a missing one: the gateway charges its estimate.
        if (payload.usage != null) this.usage = bedrockUsage(payload.usage)
        if (this.stopped) this.close(out)
        return
    }
  }

  /** The body ended: complete when the message had stopped (its usage may be missing). */
  end(out: Array<ProviderEvent>): boolean {
    if (this.done) return true
    if (!this.stopped) return false
    this.close(out)
    return true
  }

  private close(out: Array<ProviderEvent>): void {
    this.done = true
    if (this.usage !== undefined) out.push({ type: "usage", usage: this.usage })
    out.push(finishEvent(this.finish, this.native))
  }
}

/**
 * Splits `bytes` into frames, carrying a partial frame over to the next read. Hands each frame to
 * `onFrame` as a range of the read (or of its own copy when it spanned reads); throws a ProviderError on a frame that cannot be one.
 */
export class FrameSplitter {
  /**
   * The start of a frame that did not end in its read, copied (a read's bytes are lent): 4 bytes
   * while its length is not known yet, then the whole frame's size, so a long frame is copied once.
   */
  private pending: Uint8Array | undefined
  private filled = 0

  constructor(
    private readonly maxFrame: number,
    private readonly onFrame: (bytes: Uint8Array, start: number, end: number) => void,
  ) {}

  get holding(): boolean {
    return this.pending !== undefined
  }

  feed(bytes: Uint8Array, start: number, end: number): void {
    let from = start
    let held = this.pending
    if (held !== undefined) {
      if (held.length === 4 && this.filled < 4) {
        const n = Math.min(4 - this.filled, end - from)
        held.set(bytes.subarray(from, from + n), this.filled)
        this.filled += n
        from += n
        if (this.filled < 4) return
        const frame = new Uint8Array(this.lengthAt(held, 0))
        frame.set(held, 0)
        held = this.pending = frame
      }
      const n = Math.min(held.length - this.filled, end - from)
      held.set(bytes.subarray(from, from + n), this.filled)
      this.filled += n
      from += n
      if (this.filled < held.length) return
      this.pending = undefined
      this.filled = 0
      this.onFrame(held, 0, held.length)
    }
    while (end - from >= 4) {
      const total = this.lengthAt(bytes, from)
      if (end - from < total) break
      this.onFrame(bytes, from, from + total)
      from += total
    }
    if (from === end) return
    const rest = end - from
    const frame = new Uint8Array(rest >= 4 ? this.lengthAt(bytes, from) : 4)
    frame.set(bytes.subarray(from, end), 0)
    this.pending = frame
    this.filled = rest
  }

  /** The frame length at `at` (big-endian), checked against the bounds. */
  private lengthAt(bytes: Uint8Array, at: number): number {
    const total = (((bytes[at] as number) << 24) | ((bytes[at + 1] as number) << 16) | ((bytes[at + 2] as number) << 8) | (bytes[at + 3] as number)) >>> 0
    if (total < MIN_FRAME) throw new ProviderError("server", `bedrock upstream sent an event-stream frame of ${total} bytes`)
    if (total > this.maxFrame) throw new ProviderError("server", `bedrock upstream sent an event larger than ${this.maxFrame} bytes`)
    return total
  }
}

/**
 * The stream's events as batches, one per network read, handed on by PushedEvents
 * (../pushed-events.ts) as the SSE formats' are: pushed to a subscriber from the read callback
 * (no promise per batch), or queued for iteration, the socket paused while the queue is long.
 */
export class ConverseStreamEvents extends PushedEvents<UpstreamLink> implements BodySink {
  private readonly splitter: FrameSplitter
  private taken: Array<ProviderEvent> = []

  constructor(
    private readonly translator: ConverseStreamTranslator,
    response: UpstreamResponse,
    link: UpstreamLink,
    maxFrame: number,
  ) {
    super(response, link)
    this.splitter = new FrameSplitter(maxFrame, (bytes, start, end) => this.frame(bytes, start, end))
    response.pipe(this)
  }

  data(bytes: Uint8Array, start: number, end: number): void {
    if (this.last !== undefined) return
    try {
      this.splitter.feed(bytes, start, end)
    } catch (cause) {
      // Not the runtime's own error text: the caller reads this message.
      this.fail(cause instanceof ProviderError ? cause : new ProviderError("server", "bedrock upstream sent an event that is not one of Converse's"))
    }
  }

  private frame(bytes: Uint8Array, start: number, end: number): void {
    if (this.translator.done) return
    const message = decodeFrame(bytes, start, end)
    const messageType = message.messageType
    if (messageType === "event" && message.eventType === "contentBlockDelta" && textDeltaInPlace(bytes, message.bodyStart, message.bodyEnd, this.taken)) return
    const body = text.decode(bytes.subarray(message.bodyStart, message.bodyEnd))
    if (messageType === "exception" || messageType === "error") {
      const type = message.exceptionType ?? message.errorCode
      let detail = message.errorMessage ?? body
      try {
        const parsed = JSON.parse(body) as { message?: unknown }
        if (typeof parsed.message === "string") detail = parsed.message
      } catch {
        // Not JSON: the body's text is the message.
      }
      throw bedrockStreamFailure(type, detail)
    }
    let payload: unknown
    try {
      payload = JSON.parse(body)
    } catch {
      throw new ProviderError("server", "bedrock upstream sent an event that is not JSON")
    }
    if (!isJsonObject(payload)) throw new ProviderError("server", "bedrock upstream sent an event that is not a JSON object")
    this.translator.push(message.eventType ?? "", payload as ConverseStreamEvent, this.taken)
  }

  read(): void {
    this.link.touch()
    if (this.last !== undefined) return
    const out = this.taken
    if (out.length > 0) {
      this.taken = []
      this.push(out)
    }
    if (this.translator.done) this.settle(DONE)
  }

  end(): void {
    this.closeBody(false)
    if (this.last !== undefined) return
    const out = this.taken
    this.taken = []
    const complete = !this.splitter.holding && this.translator.end(out)
    if (out.length > 0) this.push(out)
    this.settle(complete ? DONE : new ProviderError("connection", "bedrock upstream stream ended before its terminal event"))
  }

  error(cause: Error): void {
    const failure = this.link.failure(cause)
    this.closeBody(false)
    if (this.last === undefined) this.fail(failure)
  }

  /** Fails the stream (unless its answer had finished); the events of frames before the failing one still go first. */
  private fail(failure: ProviderError): void {
    const out = this.taken
    this.taken = []
    this.closeBody(true)
    this.failAfter(failure, out, this.translator)
  }
}
