/**
 * NormalizedRequest → Bedrock Converse request body: system prompts apart, strictly alternating
 * roles, tool calls as toolUse/toolResult blocks, images and PDFs as bytes, Claude's thinking
 * budget, and structured output as a forced tool (Converse has no response format of its own
 * that every model takes; the tool's input is the answer's JSON, read back as text).
 */
import { thinkingBudget } from "../anthropic/request"
import { ProviderError, type ContentPart, type InputItem, type NormalizedRequest, type ResponseFormat } from "../types"
import { ANTHROPIC_REASONING, base64DataUrl, reasoningFits } from "../../domain/responses"

type ImageFormat = "png" | "jpeg" | "gif" | "webp"

export type ConverseBlock =
  | { readonly text: string }
  | { readonly image: { readonly format: ImageFormat; readonly source: { readonly bytes: string } } }
  | { readonly document: { readonly format: "pdf"; readonly name: string; readonly source: { readonly bytes: string } } }
  | { readonly toolUse: { readonly toolUseId: string; readonly name: string; readonly input: unknown } }
  | { readonly toolResult: { readonly toolUseId: string; readonly content: ReadonlyArray<{ readonly text: string }> } }
  | { readonly reasoningContent: { readonly reasoningText: { readonly text: string; readonly signature: string } } }

export interface ConverseMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<ConverseBlock>
}

export interface ConverseTool {
  readonly toolSpec: { readonly name: string; readonly description?: string; readonly inputSchema: { readonly json: Record<string, unknown> } }
}

export type ConverseToolChoice = { readonly auto: object } | { readonly any: object } | { readonly tool: { readonly name: string } }

export interface ConverseRequestBody {
  messages: Array<ConverseMessage>
  system?: Array<{ readonly text: string }>
  inferenceConfig?: { maxTokens?: number; temperature?: number; topP?: number }
  toolConfig?: { readonly tools: Array<ConverseTool>; toolChoice?: ConverseToolChoice }
  additionalModelRequestFields?: Record<string, unknown>
}

/** The tool that carries a structured answer: its input is the JSON the caller asked for. */
export const RESPONSE_TOOL = "json_response"

const IMAGE_FORMATS: Record<string, ImageFormat> = { "image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp" }

/** Converse takes image and document bytes only (or S3 locations): a web URL is refused before the call. */
const bytesOf = (url: string, what: string): { readonly mediaType: string; readonly data: string } => {
  const inline = base64DataUrl(url)
  if (inline === undefined) throw new ProviderError("bad_request", `bedrock takes ${what} as base64 data: URLs, not links`)
  return inline
}

const blockOf = (part: ContentPart): ConverseBlock | undefined => {
  switch (part.type) {
    case "text":
      // Converse refuses empty text blocks.
      return part.text.length === 0 ? undefined : { text: part.text }
    case "image": {
      const { mediaType, data } = bytesOf(part.url, "images")
      const format = IMAGE_FORMATS[mediaType]
      if (format === undefined) throw new ProviderError("bad_request", `bedrock takes png, jpeg, gif or webp images, not ${mediaType}`)
      return { image: { format, source: { bytes: data } } }
    }
    case "file": {
      if (part.fileData === undefined) throw new ProviderError("bad_request", "bedrock takes files as base64 file_data, not links or file ids")
      const data = base64DataUrl(part.fileData)?.data ?? part.fileData
      // A document's name: letters, digits, spaces, hyphens, parentheses and brackets only.
      const name = (part.filename ?? "document").replace(/\.[^.]*$/, "").replace(/[^A-Za-z0-9 ()[\]-]/g, "-") || "document"
      return { document: { format: "pdf", name, source: { bytes: data } } }
    }
  }
}

const toolInput = (args: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(args)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  } catch {
    // toolUse.input must be an object; arguments that do not parse cannot be sent as one.
    return {}
  }
}

export const converseMessages = (input: ReadonlyArray<InputItem>, system: Array<{ readonly text: string }>): Array<ConverseMessage> => {
  const messages: Array<ConverseMessage> = []
  const append = (role: "user" | "assistant", block: ConverseBlock): void => {
    const last = messages[messages.length - 1]
    if (last === undefined || last.role !== role) messages.push({ role, content: [block] })
    else if ("toolResult" in block) {
      // Tool results open the user turn, before any text of it.
      let at = 0
      while (at < last.content.length && "toolResult" in (last.content[at] as ConverseBlock)) at++
      last.content.splice(at, 0, block)
    } else last.content.push(block)
  }
  for (const item of input) {
    switch (item.type) {
      case "message":
        if (item.role === "system" || item.role === "developer") {
          for (const part of item.content) if (part.type === "text" && part.text.length > 0) system.push({ text: part.text })
          break
        }
        for (const part of item.content) {
          const block = blockOf(part)
          if (block !== undefined) append(item.role, block)
        }
        break
      case "function_call":
        append("assistant", { toolUse: { toolUseId: item.callId, name: item.name, input: toolInput(item.arguments) } })
        break
      case "function_call_output":
        append("user", { toolResult: { toolUseId: item.callId, content: [{ text: item.output }] } })
        break
      case "reasoning":
        // Claude's thinking goes back only with its signature (carried as the item's encrypted content);
        // a redacted block (Anthropic's own API gave it) is not Converse's to take.
        if (item.encryptedContent !== undefined && item.summary.length > 0 && item.redacted !== true && reasoningFits(item.format, ANTHROPIC_REASONING)) {
          append("assistant", { reasoningContent: { reasoningText: { text: item.summary, signature: item.encryptedContent } } })
        }
        break
    }
  }
  return messages
}

const responseTool = (format: Exclude<ResponseFormat, { type: "text" }>): ConverseTool => ({
  toolSpec: {
    name: RESPONSE_TOOL,
    description: "Answer with this tool: its input is the answer, as JSON.",
    inputSchema: { json: format.type === "json_schema" ? format.schema : { type: "object" } },
  },
})

/** Thinking as Claude on Bedrock takes it; other models have their own fields, not sent. */
const takesAnthropicThinking = (model: string): boolean => model.includes("anthropic.") || model.includes("claude")

export const converseRequestBody = (request: NormalizedRequest): ConverseRequestBody => {
  const system: Array<{ readonly text: string }> = []
  if (request.instructions !== undefined && request.instructions.length > 0) system.push({ text: request.instructions })
  const body: ConverseRequestBody = { messages: converseMessages(request.input, system) }
  if (system.length > 0) body.system = system
  const budget = takesAnthropicThinking(request.model) ? thinkingBudget(request.reasoning) : undefined
  const inference: NonNullable<ConverseRequestBody["inferenceConfig"]> = {}
  if (request.maxOutputTokens !== undefined) inference.maxTokens = budget === undefined ? request.maxOutputTokens : budget + request.maxOutputTokens
  else if (budget !== undefined) inference.maxTokens = budget + 4096
  // With thinking on, Claude takes no temperature, and top_p only from 0.95.
  if (request.temperature !== undefined && budget === undefined) inference.temperature = request.temperature
  if (request.topP !== undefined && (budget === undefined || request.topP >= 0.95)) inference.topP = request.topP
  if (Object.keys(inference).length > 0) body.inferenceConfig = inference
  const tools: Array<ConverseTool> = request.tools.map((tool) => ({
    toolSpec: {
      name: tool.name,
      ...(tool.description === undefined ? {} : { description: tool.description }),
      inputSchema: { json: tool.parameters ?? { type: "object", properties: {} } },
    },
  }))
  let toolChoice: ConverseToolChoice | undefined
  const choice = request.toolChoice
  if (tools.length > 0 && choice !== undefined && choice !== "none") {
    toolChoice = choice === "auto" ? { auto: {} } : choice === "required" ? { any: {} } : { tool: { name: choice.name } }
  }
  const format = request.responseFormat
  if (format !== undefined && format.type !== "text") {
    tools.push(responseTool(format))
    // Alone, the answer must be the tool's; beside the caller's tools, any tool (the model picks).
    toolChoice = tools.length === 1 ? { tool: { name: RESPONSE_TOOL } } : { any: {} }
  }
  // Converse has no "none": the tools still go (earlier toolUse blocks need them), without a choice.
  if (tools.length > 0) body.toolConfig = toolChoice === undefined ? { tools } : { tools, toolChoice }
  const extra: Record<string, unknown> = {}
  if (budget !== undefined) extra["thinking"] = { type: "enabled", budget_tokens: budget }
  if (request.topK !== undefined && budget === undefined) extra["top_k"] = request.topK
  if (Object.keys(extra).length > 0) body.additionalModelRequestFields = extra
  return body
}
