/** A Converse answer → ProviderEvents, in the order a stream would give them. */
import { notAnAnswer } from "../errors"
import { finishEvent, type ProviderEvent } from "../types"
import { RESPONSE_TOOL } from "./request"
import { bedrockFinishReason, bedrockUsage, type ConverseResponse } from "./wire"

/** `structured`: the request asked for JSON, so the answer tool's input is the answer's text. */
export const converseJsonEvents = (json: unknown, structured: boolean): Array<ProviderEvent> => {
  const answer = json as ConverseResponse
  const content = answer.output?.message?.content
  if (!Array.isArray(content)) throw notAnAnswer("bedrock", "no output.message.content")
  // An empty content that says the turn ended is no answer either (a token limit or a filter may leave none).
  if (content.length === 0 && (answer.stopReason === undefined || answer.stopReason === "end_turn")) throw notAnAnswer("bedrock", "an empty output.message.content")
  const out: Array<ProviderEvent> = []
  let answeredByTool = false
  for (let index = 0; index < content.length; index++) {
    const block = content[index]
    if (block === undefined) continue
    if (block.text !== undefined && block.text.length > 0) out.push({ type: "text", delta: block.text })
    else if (block.reasoningContent?.reasoningText !== undefined) {
      const { text, signature } = block.reasoningContent.reasoningText
      if (text) out.push({ type: "reasoning", delta: text })
      if (signature) out.push({ type: "reasoning_signature", signature })
    }
    else if (block.toolUse !== undefined) {
      const input = JSON.stringify(block.toolUse.input ?? {})
      if (structured && block.toolUse.name === RESPONSE_TOOL) {
        answeredByTool = true
        out.push({ type: "text", delta: input })
        continue
      }
      out.push({ type: "tool_call_start", index, callId: block.toolUse.toolUseId ?? `tooluse_${index}`, name: block.toolUse.name ?? "" })
      out.push({ type: "tool_call_delta", index, delta: input })
    }
  }
  const hasCalls = out.some((e) => e.type === "tool_call_start")
  out.push({ type: "usage", usage: bedrockUsage(answer.usage ?? {}) })
  out.push(finishEvent(answeredByTool && !hasCalls ? "stop" : bedrockFinishReason(answer.stopReason), answer.stopReason))
  return out
}
