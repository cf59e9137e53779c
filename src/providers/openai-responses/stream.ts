/**
 * Responses SSE events → ProviderEvents. Tool calls are indexed by their `output_index`;
 * `response.completed` / `response.incomplete` end the stream, `response.failed` and `error` throw.
 */
import type { SseEvent } from "../sse"
import { ProviderError, type ProviderEvent } from "../types"
import type { StreamTranslator } from "../wire"
import { type ResponsesStreamEvent, responsesFailure, responsesFinishReason, responsesUsage } from "./wire"
import { toolCallIdOr } from "../../domain/random"

export class ResponsesStreamTranslator implements StreamTranslator {
  done = false
  private calledTools = false

  push(event: SseEvent, out: Array<ProviderEvent>): void {
    let data: ResponsesStreamEvent
    try {
      data = JSON.parse(event.data)
    } catch {
      throw new ProviderError("server", "openai-responses upstream sent an event that is not JSON")
    }
    switch (data.type ?? event.event) {
      case "response.output_text.delta":
      case "response.refusal.delta":
        if (data.delta) out.push({ type: "text", delta: data.delta })
        return
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta":
        if (data.delta) out.push({ type: "reasoning", delta: data.delta })
        return
      case "response.output_item.added": {
        const item = data.item
        if (item?.type !== "function_call") return
        const index = data.output_index ?? 0
        this.calledTools = true
        out.push({ type: "tool_call_start", index, callId: toolCallIdOr(item.call_id), name: item.name ?? "" })
        if (item.arguments) out.push({ type: "tool_call_delta", index, delta: item.arguments })
        return
      }
      case "response.function_call_arguments.delta":
        if (data.delta) out.push({ type: "tool_call_delta", index: data.output_index ?? 0, delta: data.delta })
        return
      case "response.completed":
      case "response.incomplete": {
        this.done = true
        const response = data.response ?? {}
        if (response.usage != null) out.push({ type: "usage", usage: responsesUsage(response.usage) })
        out.push({ type: "finish", reason: responsesFinishReason(response, this.calledTools) })
        return
      }
      case "response.failed":
        throw responsesFailure(data.response?.error)
      case "error":
        throw responsesFailure(data)
    }
  }

  end(): boolean {
    return false
  }
}
