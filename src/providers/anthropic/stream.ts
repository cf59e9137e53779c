/**
 * Anthropic Messages SSE events → ProviderEvents. Input usage comes with message_start, output
 * usage and the stop reason with message_delta; both are emitted (usage, then finish) at
 * message_stop. Tool calls are indexed by their content block index.
 */
import type { SseEvent } from "../sse"
import { finishEvent, ProviderError, type FinishReason, type ProviderEvent } from "../types"
import type { StreamTranslator } from "../wire"
import { type AnthropicStreamEvent, type AnthropicUsage, anthropicFailure, anthropicFinishReason, anthropicUsage } from "./wire"

export class AnthropicStreamTranslator implements StreamTranslator {
  done = false
  private usage: AnthropicUsage = {}
  private finish: FinishReason = "stop"
  private native: string | undefined

  push(event: SseEvent, out: Array<ProviderEvent>): void {
    let data: AnthropicStreamEvent
    try {
      data = JSON.parse(event.data)
    } catch {
      throw new ProviderError("server", "anthropic upstream sent an event that is not JSON")
    }
    switch (data.type ?? event.event) {
      case "content_block_delta": {
        const delta = data.delta
        if (delta === undefined) return
        if (delta.type === "text_delta") {
          if (delta.text) out.push({ type: "text", delta: delta.text })
        } else if (delta.type === "input_json_delta") {
          if (delta.partial_json) out.push({ type: "tool_call_delta", index: data.index ?? 0, delta: delta.partial_json })
        } else if (delta.type === "thinking_delta") {
          if (delta.thinking) out.push({ type: "reasoning", delta: delta.thinking })
        } else if (delta.type === "signature_delta") {
          if (delta.signature) out.push({ type: "reasoning_signature", signature: delta.signature })
        }
        return
      }
      case "content_block_start": {
        const block = data.content_block
        const index = data.index ?? 0
        if (block?.type === "tool_use") {
          out.push({ type: "tool_call_start", index, callId: block.id ?? `toolu_${index}`, name: block.name ?? "" })
        } else if (block?.type === "text" && block.text) {
          out.push({ type: "text", delta: block.text })
        } else if (block?.type === "thinking" && block.thinking) {
          out.push({ type: "reasoning", delta: block.thinking })
        } else if (block?.type === "redacted_thinking" && block.data) {
          out.push({ type: "reasoning_signature", signature: block.data, redacted: true })
        }
        return
      }
      case "message_start":
        if (data.message?.usage !== undefined) this.usage = data.message.usage
        return
      case "message_delta":
        if (data.delta?.stop_reason != null) {
          this.finish = anthropicFinishReason(data.delta.stop_reason)
          this.native = data.delta.stop_reason
        }
        // message_delta usage is cumulative; newer versions repeat the input fields there too.
        if (data.usage !== undefined) this.usage = { ...this.usage, ...definedOnly(data.usage) }
        return
      case "message_stop":
        this.done = true
        out.push(
          { type: "usage", usage: anthropicUsage(this.usage) },
          finishEvent(this.finish, this.native),
        )
        return
      case "error":
        throw anthropicFailure(data.error)
    }
  }

  end(): boolean {
    return false
  }
}

const definedOnly = (usage: AnthropicUsage): AnthropicUsage => {
  const out: Record<string, number> = {}
  for (const [key, value] of Object.entries(usage)) if (typeof value === "number") out[key] = value
  return out
}
