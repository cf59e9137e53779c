/** Test helpers: parse the SSE text the assembler writes back into events. */
import { Schema } from "effect"
import { ResponseResult } from "../../src/domain/responses.js"

export interface SseEvent {
  /** The `event:` line, if any. */
  readonly event: string | undefined
  /** The parsed `data:` JSON, or the string "[DONE]". */
  readonly data: Record<string, unknown> | "[DONE]"
}

export const parseSse = (text: string): Array<SseEvent> => {
  if (text === "") return []
  if (!text.endsWith("\n\n")) throw new Error(`SSE text must end with a blank line: ${JSON.stringify(text.slice(-40))}`)
  return text
    .slice(0, -2)
    .split("\n\n")
    .filter((block) => !block.startsWith(":"))
    .map((block) => {
      let event: string | undefined
      let data: string | undefined
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7)
        else if (line.startsWith("data: ")) data = line.slice(6)
        else throw new Error(`unexpected SSE line ${JSON.stringify(line)}`)
      }
      if (data === undefined) throw new Error(`SSE block without data: ${JSON.stringify(block)}`)
      return { event, data: data === "[DONE]" ? "[DONE]" : (JSON.parse(data) as Record<string, unknown>) }
    })
}

/** The events other than [DONE], with `event:` equal to the payload's `type` (asserted). */
export const payloads = (events: ReadonlyArray<SseEvent>): Array<Record<string, unknown>> =>
  events.flatMap((e) => {
    if (e.data === "[DONE]") return []
    if (e.event !== e.data.type) throw new Error(`event line ${e.event} does not match type ${String(e.data.type)}`)
    return [e.data]
  })

export const decodeResult = Schema.decodeUnknownSync(ResponseResult, { onExcessProperty: "error" })

/** Deterministic item ids: msg_1, fc_2, rs_3, … */
export const counterIds = () => {
  let n = 0
  return (prefix: string) => `${prefix}_${++n}`
}

/** Every key a strict client requires in a result object (wire-compat.md). */
export const REQUIRED_RESULT_KEYS = [
  "id",
  "object",
  "created_at",
  "completed_at",
  "model",
  "status",
  "output",
  "error",
  "incomplete_details",
  "instructions",
  "metadata",
  "temperature",
  "top_p",
  "frequency_penalty",
  "presence_penalty",
  "parallel_tool_calls",
  "tool_choice",
  "tools",
  "max_output_tokens",
  "service_tier",
  "text",
] as const
