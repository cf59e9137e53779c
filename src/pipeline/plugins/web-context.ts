/**
 * What the `web` and `web-fetch` plugins share: the last user message of the normalized request
 * (every client format decodes to it) and the request with a system message of context added just
 * above that message.
 */
import type { InputItem, ResponsesRequest } from "../../domain/responses.js"

/** The last user message: its index in `input` (undefined: `input` is a string, the message itself) and its text. */
export const lastUserMessage = (request: ResponsesRequest): { readonly at: number | undefined; readonly text: string } | undefined => {
  const input = request.input
  if (typeof input === "string") return input.trim() === "" ? undefined : { at: undefined, text: input }
  if (input === undefined) return undefined
  for (let at = input.length - 1; at >= 0; at--) {
    const item = input[at] as InputItem
    if (item.type !== "message" || (item as { role?: unknown }).role !== "user") continue
    const content = (item as { content?: unknown }).content
    const text =
      typeof content === "string"
        ? content
        : Array.isArray(content)
          ? content
              .map((part: unknown) => ((part as { type?: unknown }).type === "input_text" ? String((part as { text?: unknown }).text ?? "") : ""))
              .filter((t) => t !== "")
              .join("\n")
          : ""
    return text.trim() === "" ? undefined : { at, text }
  }
  return undefined
}

/** The request with a system message holding `text` just above its last user message (`at` from lastUserMessage). */
export const withContextAbove = (request: ResponsesRequest, at: number | undefined, text: string): ResponsesRequest => {
  const context: InputItem = { type: "message", role: "system", content: text }
  if (at === undefined) {
    return { ...request, input: [context, { type: "message", role: "user", content: request.input as string }] }
  }
  const input = [...(request.input as ReadonlyArray<InputItem>)]
  input.splice(at, 0, context)
  return { ...request, input }
}

/** Today's date (UTC) as the prompts name it. */
export const today = (): string => new Date().toISOString().slice(0, 10)
