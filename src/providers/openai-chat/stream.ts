/**
 * Chat Completions SSE chunks → ProviderEvents. The finish reason arrives before the usage
 * chunk (`stream_options.include_usage`), so both are held and emitted as usage then finish at
 * `[DONE]`, the order every adapter keeps.
 */
import { errorFromEvent } from "../errors"
import type { SseEvent } from "../sse"
import { ProviderError, type FinishReason, type ProviderEvent, type Usage } from "../types"
import type { StreamTranslator } from "../wire"
import { type ChatChunk, chatFinishReason, chatUsage } from "./wire"

export class ChatStreamTranslator implements StreamTranslator {
  done = false
  private finish: FinishReason | undefined
  private usage: Usage | undefined
  /** Upstream tool call indexes already announced with tool_call_start. */
  private readonly startedCalls = new Set<number>()

  push(event: SseEvent, out: Array<ProviderEvent>): void {
    const data = event.data
    if (data === "[DONE]") {
      this.close(out)
      return
    }
    let chunk: ChatChunk
    try {
      chunk = JSON.parse(data)
    } catch {
      throw new ProviderError("server", "openai-chat upstream sent a chunk that is not JSON")
    }
    if (chunk.error !== undefined || event.event === "error") {
      const error = chunk.error ?? {}
      const code = error.code ?? error.type
      throw errorFromEvent({
        message: error.message ?? "openai-chat upstream reported an error mid-stream",
        ...(code === undefined || code === null ? {} : { code: String(code) }),
      })
    }
    if (chunk.usage != null) this.usage = chatUsage(chunk.usage)
    const choice = chunk.choices?.[0]
    if (choice === undefined) return
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
            out.push({ type: "tool_call_start", index, callId: call.id ?? `call_${index}`, name: call.function?.name ?? "" })
          }
          const args = call.function?.arguments
          if (typeof args === "string" && args.length > 0) out.push({ type: "tool_call_delta", index, delta: args })
        }
      }
    }
    if (choice.finish_reason != null) this.finish = chatFinishReason(choice.finish_reason)
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
