/** A non-streamed Chat Completion → ProviderEvents, in the order a stream would give them. */
import { notAnAnswer } from "../errors"
import type { ProviderEvent } from "../types"
import { type ChatCompletion, chatError, chatFinishReason, chatUsage } from "./wire"
import { toolCallIdOr } from "../../domain/random"

export const chatJsonEvents = (json: unknown): Array<ProviderEvent> => {
  const completion = json as ChatCompletion
  if (completion.error != null) throw chatError(completion.error, "openai-chat upstream reported an error")
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined
  if (typeof choice !== "object" || choice === null) throw notAnAnswer("openai-chat", "no choices")
  const out: Array<ProviderEvent> = []
  const message = choice.message
  if (message !== undefined) {
    const reasoning = message.reasoning ?? message.reasoning_content
    if (typeof reasoning === "string" && reasoning.length > 0) out.push({ type: "reasoning", delta: reasoning })
    const text = message.content ?? message.refusal
    if (typeof text === "string" && text.length > 0) out.push({ type: "text", delta: text })
    const calls = message.tool_calls ?? []
    for (let index = 0; index < calls.length; index++) {
      const call = calls[index]
      out.push({ type: "tool_call_start", index, callId: toolCallIdOr(call.id), name: call.function?.name ?? "" })
      const args = call.function?.arguments
      if (typeof args === "string" && args.length > 0) out.push({ type: "tool_call_delta", index, delta: args })
    }
  }
  if (completion.usage != null) out.push({ type: "usage", usage: chatUsage(completion.usage) })
  out.push({ type: "finish", reason: chatFinishReason(choice.finish_reason ?? "stop") })
  return out
}
