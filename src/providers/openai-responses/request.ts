/**
 * NormalizedRequest → a native Responses request body. Nothing is stored upstream
 * (`store: false`): the gateway owns the conversation; the client's metadata stays with us.
 */
import { OPENAI_REASONING, reasoningFits } from "../../domain/responses"
import type { ContentPart, FunctionTool, InputItem, NormalizedRequest, ResponseFormat, ToolChoice } from "../types"

export type ResponsesContentPart =
  | { readonly type: "input_text"; readonly text: string }
  | { readonly type: "output_text"; readonly text: string; readonly annotations: ReadonlyArray<never> }
  | { readonly type: "input_image"; readonly image_url: string; readonly detail: "auto" | "low" | "high" }
  | { readonly type: "input_file"; readonly filename?: string; readonly file_data?: string; readonly file_url?: string; readonly file_id?: string }

export type ResponsesInputItem =
  | { readonly type: "message"; readonly role: "system" | "developer" | "user" | "assistant"; readonly content: Array<ResponsesContentPart> }
  | { readonly type: "function_call"; readonly call_id: string; readonly name: string; readonly arguments: string }
  | { readonly type: "function_call_output"; readonly call_id: string; readonly output: string }
  | {
      readonly type: "reasoning"
      readonly summary: Array<{ readonly type: "summary_text"; readonly text: string }>
      readonly encrypted_content: string
    }

export interface ResponsesRequestBody {
  readonly model: string
  readonly input: Array<ResponsesInputItem>
  readonly instructions?: string
  readonly tools?: Array<unknown>
  readonly tool_choice?: unknown
  readonly parallel_tool_calls?: boolean
  readonly temperature?: number
  readonly top_p?: number
  readonly max_output_tokens?: number
  readonly text?: { readonly format: unknown }
  readonly reasoning?: { readonly effort?: string; readonly summary?: string }
  readonly user?: string
  readonly store: false
  readonly stream: boolean
}

const contentPart = (part: ContentPart, assistant: boolean): ResponsesContentPart => {
  switch (part.type) {
    case "text":
      // Earlier assistant turns are sent back as what the model produced.
      return assistant ? { type: "output_text", text: part.text, annotations: [] } : { type: "input_text", text: part.text }
    case "image":
      return { type: "input_image", image_url: part.url, detail: part.detail ?? "auto" }
    case "file":
      return {
        type: "input_file",
        ...(part.filename === undefined ? {} : { filename: part.filename }),
        ...(part.fileData === undefined ? {} : { file_data: part.fileData }),
        ...(part.fileUrl === undefined ? {} : { file_url: part.fileUrl }),
        ...(part.fileId === undefined ? {} : { file_id: part.fileId }),
      }
  }
}

export const responsesInput = (input: ReadonlyArray<InputItem>): Array<ResponsesInputItem> => {
  const items: Array<ResponsesInputItem> = []
  for (const item of input) {
    switch (item.type) {
      case "message": {
        const assistant = item.role === "assistant"
        items.push({ type: "message", role: item.role, content: item.content.map((part) => contentPart(part, assistant)) })
        break
      }
      case "function_call":
        items.push({ type: "function_call", call_id: item.callId, name: item.name, arguments: item.arguments })
        break
      case "function_call_output":
        items.push({ type: "function_call_output", call_id: item.callId, output: item.output })
        break
      case "reasoning":
        // Without `store`, a reasoning item is only usable upstream with its encrypted content
        // (Claude's signatures and redacted blocks are not OpenAI's to read).
        if (item.encryptedContent !== undefined && item.redacted !== true && reasoningFits(item.format, ...OPENAI_REASONING)) {
          items.push({
            type: "reasoning",
            summary: item.summary.length > 0 ? [{ type: "summary_text", text: item.summary }] : [],
            encrypted_content: item.encryptedContent,
          })
        }
        break
    }
  }
  return items
}

export const responsesTool = (tool: FunctionTool): unknown => ({
  type: "function",
  name: tool.name,
  ...(tool.description === undefined ? {} : { description: tool.description }),
  parameters: tool.parameters ?? { type: "object", properties: {} },
  ...(tool.strict === undefined ? {} : { strict: tool.strict }),
})

export const responsesToolChoice = (choice: ToolChoice): unknown =>
  typeof choice === "string" ? choice : { type: "function", name: choice.name }

export const responsesTextFormat = (format: ResponseFormat): unknown =>
  format.type === "json_schema"
    ? { type: "json_schema", name: format.name, schema: format.schema, ...(format.strict === undefined ? {} : { strict: format.strict }) }
    : { type: format.type }

export const responsesRequestBody = (request: NormalizedRequest, stream: boolean): ResponsesRequestBody => {
  const reasoning = request.reasoning
  const hasTools = request.tools.length > 0
  return {
    model: request.model,
    input: responsesInput(request.input),
    ...(request.instructions === undefined ? {} : { instructions: request.instructions }),
    ...(hasTools ? { tools: request.tools.map(responsesTool) } : {}),
    ...(hasTools && request.toolChoice !== undefined ? { tool_choice: responsesToolChoice(request.toolChoice) } : {}),
    ...(hasTools && request.parallelToolCalls !== undefined ? { parallel_tool_calls: request.parallelToolCalls } : {}),
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.topP === undefined ? {} : { top_p: request.topP }),
    ...(request.maxOutputTokens === undefined ? {} : { max_output_tokens: request.maxOutputTokens }),
    ...(request.responseFormat === undefined ? {} : { text: { format: responsesTextFormat(request.responseFormat) } }),
    ...(reasoning !== undefined && (reasoning.effort !== undefined || reasoning.summary !== undefined)
      ? {
          reasoning: {
            ...(reasoning.effort === undefined ? {} : { effort: reasoning.effort }),
            ...(reasoning.summary === undefined ? {} : { summary: reasoning.summary }),
          },
        }
      : {}),
    ...(request.user === undefined ? {} : { user: request.user }),
    store: false,
    stream,
  }
}
