/**
 * Gemini `GenerateContentResponse`s → ProviderEvents. A JSON answer is one response, a stream
 * (`:streamGenerateContent?alt=sse`) one per SSE event; both go through `GeminiAnswer`. Text
 * parts marked `thought` are reasoning; a function call comes whole in one part (its arguments
 * as an object), so it is a start and one delta. Usage is cumulative per chunk: the last is kept,
 * and usage then finish are emitted when the answer ends (the stream has no terminal event).
 */
import { notAnAnswer } from "../errors"
import type { SseEvent } from "../sse"
import { finishEvent, type FinishReason, ProviderError, type ProviderEvent } from "../types"
import type { Usage } from "../../domain/pricing"
import type { StreamTranslator } from "../wire"
import { callIdOf } from "./signature"
import { type GeminiResponse, geminiFinishReason, geminiUsage, googleEventError } from "./wire"

export class GeminiAnswer implements StreamTranslator {
  done = false
  private calls = 0
  private usage: Usage | undefined
  private finishReason: string | undefined
  /** The prompt was blocked (no candidates): the answer ends as filtered. */
  private blocked = false
  /** Whether a candidate gave text, reasoning or a call. */
  private produced = false

  /** Appends the events of one response (a JSON answer, or one streamed chunk). */
  take(response: GeminiResponse, out: Array<ProviderEvent>): void {
    if (response.error !== undefined) throw googleEventError(response.error)
    if (response.usageMetadata !== undefined) this.usage = geminiUsage(response.usageMetadata)
    if (response.promptFeedback?.blockReason !== undefined) this.blocked = true
    const candidate = response.candidates?.[0]
    if (candidate === undefined) return
    const parts = candidate.content?.parts
    if (parts !== undefined) {
      const before = out.length
      for (const part of parts) {
        const call = part.functionCall
        if (call !== undefined) {
          const index = this.calls++
          out.push({ type: "tool_call_start", index, callId: callIdOf(call.id, part.thoughtSignature), name: call.name ?? "" })
          out.push({ type: "tool_call_delta", index, delta: JSON.stringify(call.args ?? {}) })
        } else if (typeof part.text === "string" && part.text.length > 0) {
          out.push(part.thought === true ? { type: "reasoning", delta: part.text } : { type: "text", delta: part.text })
        }
      }
      if (out.length > before) this.produced = true
    }
    if (candidate.finishReason !== undefined) this.finishReason = candidate.finishReason
  }

  push(event: SseEvent, out: Array<ProviderEvent>): void {
    let response: GeminiResponse
    try {
      response = JSON.parse(event.data)
    } catch {
      throw new ProviderError("server", "gemini upstream sent an event that is not JSON")
    }
    this.take(response, out)
  }

  /** The stream ended: complete if a finish reason came (or the prompt was blocked). */
  end(out: Array<ProviderEvent>): boolean {
    if (this.finishReason === undefined && !this.blocked) return false
    this.close(out)
    return true
  }

  close(out: Array<ProviderEvent>): void {
    // Nothing produced and no reason for it (a blocked prompt, a token limit, a filter): no
    // candidates, or an empty one that says STOP, is not an answer (502 at $0, the next endpoint),
    // never an empty answer charged as completed. A stream that ends so has sent nothing yet.
    if (!this.produced && !this.blocked && (this.finishReason === undefined || this.finishReason === "STOP")) {
      throw notAnAnswer("gemini", "no candidate with content")
    }
    this.done = true
    if (this.usage !== undefined) out.push({ type: "usage", usage: this.usage })
    const reason: FinishReason = this.blocked && this.finishReason === undefined ? "content_filter" : geminiFinishReason(this.finishReason, this.calls > 0)
    out.push(finishEvent(reason, this.finishReason))
  }
}

export const geminiJsonEvents = (json: unknown): Array<ProviderEvent> => {
  const answer = new GeminiAnswer()
  const out: Array<ProviderEvent> = []
  const response = json as GeminiResponse
  // No candidates is an answer only when the prompt was blocked (promptFeedback says why); `close` checks the rest.
  if (response.error === undefined && !Array.isArray(response.candidates) && response.promptFeedback?.blockReason === undefined) {
    throw notAnAnswer("gemini", "no candidates")
  }
  answer.take(response, out)
  answer.close(out)
  return out
}
