/** The stored form of a request's input: `{messages: [{role, content}]}` with text only. */
import type { ResponsesRequest } from "../domain/responses.js"

export interface StoredMessage {
  readonly role: string
  readonly content: string
}

const textOfParts = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content
    .map((part: unknown) => {
      if (typeof part !== "object" || part === null) return ""
      const p = part as { type?: string; text?: unknown; refusal?: unknown }
      if (typeof p.text === "string") return p.text
      if (typeof p.refusal === "string") return p.refusal
      return p.type === "input_image" ? "[image]" : p.type === "input_file" ? "[file]" : ""
    })
    .filter((s) => s !== "")
    .join("\n")
}

export const storedInput = (request: ResponsesRequest): { messages: Array<StoredMessage> } => {
  const messages: Array<StoredMessage> = []
  if (request.instructions != null) messages.push({ role: "system", content: request.instructions })
  if (typeof request.input === "string") {
    messages.push({ role: "user", content: request.input })
    return { messages }
  }
  for (const item of request.input ?? []) {
    const i = item as { type?: string; role?: string; content?: unknown; name?: string; arguments?: string; output?: unknown }
    if (i.type === undefined || i.type === "message") {
      messages.push({ role: i.role ?? "user", content: textOfParts(i.content) })
    } else if (i.type === "function_call") {
      messages.push({ role: "assistant", content: `[function_call ${i.name ?? ""}] ${i.arguments ?? ""}` })
    } else if (i.type === "function_call_output") {
      messages.push({ role: "tool", content: typeof i.output === "string" ? i.output : textOfParts(i.output) })
    }
  }
  return { messages }
}
