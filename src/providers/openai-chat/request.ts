/**
 * NormalizedRequest → Chat Completions request body. Written for the common subset that
 * OpenAI-compatible servers (vLLM, Groq, Together, Ollama, …) accept, e.g. `developer` becomes
 * `system`, and tool fields are sent only with tools.
 */
import type { ContentPart, InputItem, NormalizedRequest, ResponseFormat, ToolChoice } from "../types"
import type { Types } from "effect"

export type ChatContentPart =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image_url"; readonly image_url: { readonly url: string; readonly detail?: "auto" | "low" | "high" } }
  | { readonly type: "file"; readonly file: { readonly filename?: string; readonly file_data?: string; readonly file_id?: string } }

export interface ChatToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

export type ChatMessage =
  | { readonly role: "system" | "user"; readonly content: string | Array<ChatContentPart> }
  | { readonly role: "assistant"; content: string | null; tool_calls?: Array<ChatToolCall> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

export interface ChatTool {
  readonly type: "function"
  readonly function: {
    readonly name: string
    readonly description?: string
    readonly parameters?: Record<string, unknown>
    readonly strict?: boolean
  }
}

export type ChatToolChoice = "auto" | "none" | "required" | { readonly type: "function"; readonly function: { readonly name: string } }

export interface ChatRequestBody {
  readonly model: string
  readonly messages: Array<ChatMessage>
  readonly stream: boolean
  readonly stream_options?: { readonly include_usage: boolean }
  readonly tools?: Array<ChatTool>
  readonly tool_choice?: ChatToolChoice
  readonly parallel_tool_calls?: boolean
  readonly temperature?: number
  readonly top_p?: number
  readonly max_tokens?: number
  readonly frequency_penalty?: number
  readonly presence_penalty?: number
  readonly response_format?: unknown
  readonly reasoning_effort?: string
  readonly user?: string
}

const contentPart = (part: ContentPart): ChatContentPart => {
  switch (part.type) {
    case "text":
      return { type: "text", text: part.text }
    case "image":
      return { type: "image_url", image_url: part.detail === undefined ? { url: part.url } : { url: part.url, detail: part.detail } }
    case "file":
      return {
        type: "file",
        file: {
          ...(part.filename === undefined ? {} : { filename: part.filename }),
          ...(part.fileData === undefined ? {} : { file_data: part.fileData }),
          ...(part.fileId === undefined ? {} : { file_id: part.fileId }),
        },
      }
  }
}

const textOf = (parts: ReadonlyArray<ContentPart>): string => {
  let text = ""
  for (const part of parts) if (part.type === "text") text += text.length === 0 ? part.text : "\n" + part.text
  return text
}

/** A single text part goes as a plain string: every compatible server accepts that form. */
const userContent = (parts: ReadonlyArray<ContentPart>): string | Array<ChatContentPart> =>
  parts.length === 1 && parts[0].type === "text" ? parts[0].text : parts.map(contentPart)

export const chatMessages = (instructions: string | undefined, input: ReadonlyArray<InputItem>): Array<ChatMessage> => {
  const messages: Array<ChatMessage> = []
  if (instructions !== undefined && instructions.length > 0) messages.push({ role: "system", content: instructions })
  // The assistant message that function calls attach to, while calls keep coming.
  let openAssistant: Extract<ChatMessage, { role: "assistant" }> | undefined
  for (const item of input) {
    switch (item.type) {
      case "message": {
        if (item.role === "assistant") {
          openAssistant = { role: "assistant", content: textOf(item.content) }
          messages.push(openAssistant)
          continue
        }
        messages.push(
          item.role === "user"
            ? { role: "user", content: userContent(item.content) }
            : { role: "system", content: textOf(item.content) },
        )
        break
      }
      case "function_call": {
        const call: ChatToolCall = { id: item.callId, type: "function", function: { name: item.name, arguments: item.arguments } }
        if (openAssistant === undefined) {
          openAssistant = { role: "assistant", content: null, tool_calls: [call] }
          messages.push(openAssistant)
        } else if (openAssistant.tool_calls === undefined) {
          openAssistant.tool_calls = [call]
        } else {
          openAssistant.tool_calls.push(call)
        }
        continue
      }
      case "function_call_output":
        messages.push({ role: "tool", tool_call_id: item.callId, content: item.output })
        break
      case "reasoning":
        // Chat Completions has no way to send reasoning back; it does not end the assistant turn.
        continue
    }
    openAssistant = undefined
  }
  return messages
}

export const chatToolChoice = (choice: ToolChoice): ChatToolChoice =>
  typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } }

export const chatResponseFormat = (format: ResponseFormat): unknown =>
  format.type === "json_schema"
    ? {
        type: "json_schema",
        json_schema: { name: format.name, schema: format.schema, ...(format.strict === undefined ? {} : { strict: format.strict }) },
      }
    : { type: format.type }

export const chatRequestBody = (request: NormalizedRequest, stream: boolean): ChatRequestBody => {
  // Optional fields are assigned, not spread: each spread is a builtin call (~30 ns, Bun 1.4), and
  // this runs once per upstream attempt. Key order is the wire order.
  const body: Types.Mutable<ChatRequestBody> = { model: request.model, messages: chatMessages(request.instructions, request.input), stream }
  if (stream) body.stream_options = { include_usage: true }
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => {
      const fn: Types.Mutable<ChatTool["function"]> = { name: tool.name }
      if (tool.description !== undefined) fn.description = tool.description
      if (tool.parameters !== undefined) fn.parameters = tool.parameters
      if (tool.strict !== undefined) fn.strict = tool.strict
      return { type: "function" as const, function: fn }
    })
    // Servers refuse tool_choice and parallel_tool_calls without tools.
    if (request.toolChoice !== undefined) body.tool_choice = chatToolChoice(request.toolChoice)
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls
  }
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.maxOutputTokens !== undefined) body.max_tokens = request.maxOutputTokens
  if (request.frequencyPenalty !== undefined) body.frequency_penalty = request.frequencyPenalty
  if (request.presencePenalty !== undefined) body.presence_penalty = request.presencePenalty
  if (request.responseFormat !== undefined) body.response_format = chatResponseFormat(request.responseFormat)
  if (request.reasoning?.effort !== undefined) body.reasoning_effort = request.reasoning.effort
  if (request.user !== undefined) body.user = request.user
  return body
}
