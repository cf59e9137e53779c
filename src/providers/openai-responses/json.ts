/** A non-streamed Responses object → ProviderEvents, in the order a stream would give them. */
import { isJsonObject, notAnAnswer } from "../errors"
import type { ProviderEvent } from "../types"
import { type ResponsesObject, responsesFailure, responsesFinishReason, responsesUsage } from "./wire"
import { toolCallIdOr } from "../../domain/random"

export const responsesJsonEvents = (json: unknown): Array<ProviderEvent> => {
  const response = json as ResponsesObject
  // An error object is a failure whatever the status says (a proxy may answer 200 with one).
  if (response.status === "failed" || isJsonObject(response.error)) throw responsesFailure(response.error)
  if (!Array.isArray(response.output)) throw notAnAnswer("openai-responses", "no output")
  // A completed response of no output items is no answer (an incomplete one may have none).
  if (response.output.length === 0 && response.status !== "incomplete") throw notAnAnswer("openai-responses", "an empty output")
  const out: Array<ProviderEvent> = []
  let calledTools = false
  const output = response.output
  for (let index = 0; index < output.length; index++) {
    const item = output[index]
    switch (item.type) {
      case "reasoning":
        for (const part of item.summary ?? []) if (part.text) out.push({ type: "reasoning", delta: part.text })
        break
      case "message":
        for (const part of item.content ?? []) {
          const text = part.type === "refusal" ? part.refusal : part.text
          if (text) out.push({ type: "text", delta: text })
        }
        break
      case "function_call":
        calledTools = true
        out.push({ type: "tool_call_start", index, callId: toolCallIdOr(item.call_id), name: item.name ?? "" })
        if (item.arguments) out.push({ type: "tool_call_delta", index, delta: item.arguments })
        break
    }
  }
  if (response.usage != null) out.push({ type: "usage", usage: responsesUsage(response.usage) })
  out.push({ type: "finish", reason: responsesFinishReason(response, calledTools) })
  return out
}
