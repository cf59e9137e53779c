/** A non-streamed Anthropic message → ProviderEvents, in the order a stream would give them. */
import { isJsonObject, notAnAnswer } from "../errors"
import { finishEvent, type ProviderEvent } from "../types"
import { type AnthropicMessageObject, anthropicFailure, anthropicFinishReason, anthropicUsage } from "./wire"

export const anthropicJsonEvents = (json: unknown): Array<ProviderEvent> => {
  const message = json as AnthropicMessageObject
  if (message.type === "error" || isJsonObject(message.error)) throw anthropicFailure(message.error)
  if (!Array.isArray(message.content)) throw notAnAnswer("anthropic", "no content")
  const out: Array<ProviderEvent> = []
  const content = message.content
  for (let index = 0; index < content.length; index++) {
    const block = content[index]
    if (block.type === "text" && block.text) {
      out.push({ type: "text", delta: block.text })
    } else if (block.type === "thinking") {
      if (block.thinking) out.push({ type: "reasoning", delta: block.thinking })
      if (block.signature) out.push({ type: "reasoning_signature", signature: block.signature })
    } else if (block.type === "redacted_thinking" && block.data) {
      out.push({ type: "reasoning_signature", signature: block.data, redacted: true })
    } else if (block.type === "tool_use") {
      out.push({ type: "tool_call_start", index, callId: block.id ?? `toolu_${index}`, name: block.name ?? "" })
      out.push({ type: "tool_call_delta", index, delta: JSON.stringify(block.input ?? {}) })
    }
  }
  out.push({ type: "usage", usage: anthropicUsage(message.usage ?? {}) })
  out.push(finishEvent(anthropicFinishReason(message.stop_reason), message.stop_reason))
  return out
}
