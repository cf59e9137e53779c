/**
 * Chat Completions SSE chunks → ProviderEvents. The finish reason arrives before the usage
 * chunk (`stream_options.include_usage`), so both are held and emitted as usage then finish at
 * `[DONE]`, the order every adapter keeps.
 *
 * Text chunks of one stream differ only in their content: once one has been parsed in full, the
 * next ones that have the same text around the JSON of a string are read in place: that text
 * alone is parsed, and forwarded as it came (see json-literal.ts). Any other chunk is parsed in full.
 * The same holds on bytes (`pushBytes`): an event `data: <prefix><literal><suffix>\n\n` in the
 * upstream read is taken without decoding the read or splitting it into lines. A literal of
 * printable ASCII is not decoded at all: runs of them go on as one `text_literals` event, their
 * place in the read.
 */
import { notAnAnswer } from "../errors"
import { BytePattern, isPlainLiteral, jsonLiteralEnd, jsonLiteralEndInBytes, jsonStringValue } from "../json-literal"
import type { SseEvent } from "../sse"
import { ProviderError, type FinishReason, type ProviderEvent } from "../types"
import type { Usage } from "../../domain/pricing"
import { toolCallIdOr } from "../../domain/random"
import type { StreamTranslator } from "../wire"
import { type ChatChunk, chatError, chatFinishReason, chatUsage } from "./wire"

export class ChatStreamTranslator implements StreamTranslator {
  done = false
  private finish: FinishReason | undefined
  private usage: Usage | undefined
  /** Whether a chunk had a choice. */
  private choices = false
  /** Upstream tool call indexes already announced with tool_call_start. */
  private readonly startedCalls = new Set<number>()

  /** The raw text of a plain text chunk around its content literal, once one was seen. */
  private template: { readonly prefix: string; readonly suffix: string } | undefined
  /** The template as a whole SSE event's bytes: `data: <prefix>` and `<suffix>\n\n`. */
  private framed: { readonly head: BytePattern; readonly tail: BytePattern } | undefined

  pushBytes(bytes: Uint8Array, start: number, end: number, out: Array<ProviderEvent>): number {
    const framed = this.framed
    if (framed === undefined) return start
    const { head, tail } = framed
    let at = start
    // The spans of the `text_literals` event being filled: consecutive plain literals go in one,
    // also across calls for one read (an upstream sends each event in an HTTP chunk of its own).
    // `out` holds this stream's events only, so a run of this read last in it is this
    // translator's own, its spans array made below.
    const last = out[out.length - 1]
    let run = last?.type === "text_literals" && last.source === bytes ? (last.spans as Array<number>) : undefined
    while (head.foundAt(bytes, at, end)) {
      const open = at + head.length
      const close = jsonLiteralEndInBytes(bytes, open, end)
      if (close === -1 || !tail.foundAt(bytes, close, end)) break
      if (isPlainLiteral(bytes, open + 1, close - 1)) {
        // Forwarded as its bytes, decoded with the rest of the answer's text when that is read.
        if (close - open > 2) {
          if (run === undefined) {
            run = []
            out.push({ type: "text_literals", source: bytes, spans: run })
          }
          run.push(open, close)
        }
        at = close + tail.length
        continue
      }
      // Other text (not ASCII) is decoded, and its value comes from JSON.parse, which is the
      // validation; it is a string of its own, not a slice that would keep the read alive.
      run = undefined
      const json = utf8.decode(bytes.subarray(open, close))
      const delta = jsonStringValue(json)
      if (delta === undefined) break
      if (delta.length > 0) out.push({ type: "text", delta, json })
      at = close + tail.length
    }
    return at
  }

  push(event: SseEvent, out: Array<ProviderEvent>): void {
    const data = event.data
    const template = this.template
    if (template !== undefined && event.event === undefined) {
      const json = contentOf(data, template.prefix, template.suffix)
      // Parsing the content alone validates it: a string there makes the whole chunk the template's shape.
      const delta = json === undefined ? undefined : jsonStringValue(json)
      if (json !== undefined && delta !== undefined) {
        if (delta.length > 0) out.push({ type: "text", delta, json })
        return
      }
    }
    if (data === "[DONE]") {
      // A stream of no choice at all (only [DONE], or Azure's prompt_filter_results) is no answer.
      if (this.finish === undefined && !this.choices) throw notAnAnswer("openai-chat", "no choices")
      this.close(out)
      return
    }
    let chunk: ChatChunk
    try {
      chunk = JSON.parse(data)
    } catch {
      throw new ProviderError("server", "openai-chat upstream sent a chunk that is not JSON")
    }
    if (chunk.error != null || event.event === "error") throw chatError(chunk.error ?? {}, "openai-chat upstream reported an error mid-stream")
    if (chunk.usage != null) this.usage = chatUsage(chunk.usage)
    const choice = chunk.choices?.[0]
    if (choice === undefined) return
    this.choices = true
    const delta = choice.delta
    if (delta !== undefined) {
      const reasoning = delta.reasoning ?? delta.reasoning_content
      if (typeof reasoning === "string" && reasoning.length > 0) out.push({ type: "reasoning", delta: reasoning })
      if (typeof delta.content === "string" && delta.content.length > 0) out.push({ type: "text", delta: delta.content })
      const calls = delta.tool_calls
      if (calls != null) {
        for (let i = 0; i < calls.length; i++) {
          const call = calls[i]
          const index = call.index ?? i
          if (!this.startedCalls.has(index)) {
            this.startedCalls.add(index)
            out.push({ type: "tool_call_start", index, callId: toolCallIdOr(call.id), name: call.function?.name ?? "" })
          }
          const args = call.function?.arguments
          if (typeof args === "string" && args.length > 0) out.push({ type: "tool_call_delta", index, delta: args })
        }
      }
    }
    if (choice.finish_reason != null) this.finish = chatFinishReason(choice.finish_reason)
    else if (this.template === undefined && event.event === undefined && chunk.usage == null) this.learn(data, delta)
  }

  /** Keeps `data` as the template when it is a plain text chunk whose content literal is found in place. */
  private learn(data: string, delta: NonNullable<ChatChunk["choices"]>[number]["delta"]): void {
    if (delta === undefined || typeof delta.content !== "string" || delta.content.length === 0) return
    if (delta.reasoning != null || delta.reasoning_content != null || delta.tool_calls != null) return
    // The literal must provably be choices[0].delta.content: the key right after `"choices":[{`
    // with nothing nested in between, no escape anywhere outside the literal (an escaped key
    // name would hide from these checks), and no later key of the same names (JSON.parse keeps
    // the last one).
    const choices = data.indexOf(CHOICES_OPEN)
    if (choices === -1) return
    const at = data.indexOf(CONTENT_KEY, choices + CHOICES_OPEN.length)
    if (at === -1) return
    const between = data.slice(choices + CHOICES_OPEN.length, at)
    if (/[[\]{}]/.test(between)) return
    const start = at + CONTENT_KEY.length
    const end = jsonLiteralEnd(data, start)
    if (end === -1 || jsonStringValue(data.slice(start, end)) !== delta.content) return
    const prefix = data.slice(0, start)
    const suffix = data.slice(end)
    if (prefix.includes("\\") || suffix.includes("\\")) return
    if (suffix.includes('"content"') || suffix.includes('"delta"') || suffix.includes('"choices"')) return
    const head = utf8Bytes.encode(`data: ${prefix}`)
    const tail = utf8Bytes.encode(`${suffix}\n\n`)
    // Strings of their own, decoded from those bytes: slices of `data` kept the whole upstream read
    // it came from alive for the rest of the stream (a 64 KB read per held stream, heap snapshot).
    this.template = { prefix: utf8.decode(head.subarray(DATA_FIELD.length)), suffix: utf8.decode(tail.subarray(0, tail.length - 2)) }
    this.framed = { head: new BytePattern(head), tail: new BytePattern(tail) }
  }

  /** Servers that skip `[DONE]` still end complete once they gave a finish reason. */
  end(out: Array<ProviderEvent>): boolean {
    if (this.finish === undefined) return false
    this.close(out)
    return true
  }

  private close(out: Array<ProviderEvent>): void {
    this.done = true
    if (this.usage !== undefined) out.push({ type: "usage", usage: this.usage })
    out.push({ type: "finish", reason: this.finish ?? "stop" })
  }
}

const utf8 = new TextDecoder()
/** What precedes an event's data in its SSE bytes (`data: <prefix>`). */
const DATA_FIELD = "data: "
/** The learned pattern's bytes: TextEncoder#encode is ~70 ns for a chunk prefix, Buffer.from ~170 ns (Bun 1.4.5). */
const utf8Bytes = new TextEncoder()

const CHOICES_OPEN = '"choices":[{'
const CONTENT_KEY = '"delta":{"content":'

/** The text between `prefix` and `suffix` when `data` is made of them and something between. */
const contentOf = (data: string, prefix: string, suffix: string): string | undefined => {
  const end = data.length - suffix.length
  if (end < prefix.length + 2 || !data.startsWith(prefix) || !data.endsWith(suffix)) return undefined
  return data.slice(prefix.length, end)
}
