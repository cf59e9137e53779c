/**
 * NormalizedRequest → Gemini `GenerateContentRequest` (the Gemini API and Vertex AI's Google
 * models take the same body): system text as `systemInstruction`, turns as `user`/`model`
 * contents (consecutive turns of one role merged, as Gemini wants them alternating), tool calls
 * and results as `functionCall`/`functionResponse` parts, schemas as JSON Schema
 * (`parametersJsonSchema`, `responseJsonSchema`: no translation to Google's OpenAPI subset), and
 * thinking as `thinkingConfig`.
 */
import type { Types } from "effect"
import { thinkingBudget } from "../anthropic/request"
import type { ContentPart, InputItem, NormalizedRequest, ReasoningConfig, ToolChoice } from "../types"
import { signatureOf } from "./signature"
import { base64DataUrl } from "../../domain/responses"

export type GeminiRequestPart =
  | { readonly text: string }
  | { readonly inlineData: { readonly mimeType: string; readonly data: string } }
  | { readonly fileData: { readonly mimeType?: string; readonly fileUri: string } }
  | { readonly functionCall: { readonly name: string; readonly args: unknown }; readonly thoughtSignature?: string }
  | { readonly functionResponse: { readonly name: string; readonly response: unknown } }

export interface GeminiContent {
  readonly role: "user" | "model"
  readonly parts: Array<GeminiRequestPart>
}

export interface GeminiRequestBody {
  readonly contents: Array<GeminiContent>
  readonly systemInstruction?: { readonly parts: Array<{ readonly text: string }> }
  readonly tools?: Array<{
    readonly functionDeclarations: Array<{ readonly name: string; readonly description?: string; readonly parametersJsonSchema?: unknown }>
  }>
  readonly toolConfig?: { readonly functionCallingConfig: { readonly mode: "AUTO" | "ANY" | "NONE"; readonly allowedFunctionNames?: Array<string> } }
  readonly generationConfig?: GenerationConfig
}

interface GenerationConfig {
  temperature?: number
  topP?: number
  topK?: number
  maxOutputTokens?: number
  frequencyPenalty?: number
  presencePenalty?: number
  responseMimeType?: string
  responseJsonSchema?: unknown
  thinkingConfig?: { readonly includeThoughts?: boolean; readonly thinkingBudget?: number }
}

const MIME_BY_EXTENSION: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  heic: "image/heic",
  pdf: "application/pdf",
  txt: "text/plain",
}

/** The media type of a URL by its extension; Gemini wants one with every `fileData`. */
const mimeOfUrl = (url: string, fallback: string): string => {
  const path = url.split(/[?#]/, 1)[0] ?? url
  const dot = path.lastIndexOf(".")
  return (dot === -1 ? undefined : MIME_BY_EXTENSION[path.slice(dot + 1).toLowerCase()]) ?? fallback
}

/** A data URL inline, any other URL (https, gs://, an uploaded file's URI) by reference. */
const mediaPart = (url: string, fallbackMime: string): GeminiRequestPart => {
  const inline = base64DataUrl(url)
  if (inline !== undefined) return { inlineData: { mimeType: inline.mediaType, data: inline.data } }
  return { fileData: { mimeType: mimeOfUrl(url, fallbackMime), fileUri: url } }
}

const partOf = (part: ContentPart): GeminiRequestPart | undefined => {
  switch (part.type) {
    case "text":
      return part.text.length === 0 ? undefined : { text: part.text }
    case "image":
      return mediaPart(part.url, "image/jpeg")
    case "file":
      if (part.fileData !== undefined) {
        // Raw base64 without a data URL: a PDF, as the Responses format's file_data usually is.
        return base64DataUrl(part.fileData) !== undefined ? mediaPart(part.fileData, "application/pdf") : { inlineData: { mimeType: "application/pdf", data: part.fileData } }
      }
      if (part.fileUrl !== undefined) return mediaPart(part.fileUrl, "application/pdf")
      if (part.fileId !== undefined) return { fileData: { fileUri: part.fileId } }
      return undefined
  }
}

/** A function's arguments as the object Gemini takes (arguments that do not parse go as an empty object). */
const argsOf = (args: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(args)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

/** A tool's output as Gemini's `response` object: a JSON object as it is, anything else under `result`. */
const responseOf = (output: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(output)
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) return parsed
  } catch {
    // Plain text: wrapped below.
  }
  return { result: output }
}

export interface GeminiPrompt {
  readonly system: Array<{ readonly text: string }>
  readonly contents: Array<GeminiContent>
}

export const geminiPrompt = (instructions: string | undefined, input: ReadonlyArray<InputItem>): GeminiPrompt => {
  const system: Array<{ text: string }> = []
  const contents: Array<GeminiContent> = []
  if (instructions !== undefined && instructions.length > 0) system.push({ text: instructions })
  // A function response names its function; the call it answers is found by id, the latest first.
  const callNames = new Map<string, string>()
  const append = (role: "user" | "model", part: GeminiRequestPart): void => {
    const last = contents[contents.length - 1]
    if (last !== undefined && last.role === role) last.parts.push(part)
    else contents.push({ role, parts: [part] })
  }
  for (const item of input) {
    switch (item.type) {
      case "message": {
        if (item.role === "system" || item.role === "developer") {
          for (const part of item.content) if (part.type === "text" && part.text.length > 0) system.push({ text: part.text })
          break
        }
        const role = item.role === "assistant" ? "model" : "user"
        for (const part of item.content) {
          const converted = partOf(part)
          if (converted !== undefined) append(role, converted)
        }
        break
      }
      case "function_call": {
        callNames.set(item.callId, item.name)
        const signature = signatureOf(item.callId)
        const call = { name: item.name, args: argsOf(item.arguments) }
        append("model", signature === undefined ? { functionCall: call } : { functionCall: call, thoughtSignature: signature })
        break
      }
      case "function_call_output":
        append("user", { functionResponse: { name: callNames.get(item.callId) ?? item.callId, response: responseOf(item.output) } })
        break
      case "reasoning":
        // Gemini takes thoughts back only as signatures, which ride with the function calls.
        break
    }
  }
  return { system, contents }
}

const toolConfigOf = (choice: ToolChoice): NonNullable<GeminiRequestBody["toolConfig"]> => {
  if (choice === "auto") return { functionCallingConfig: { mode: "AUTO" } }
  if (choice === "none") return { functionCallingConfig: { mode: "NONE" } }
  if (choice === "required") return { functionCallingConfig: { mode: "ANY" } }
  return { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [choice.name] } }
}

/**
 * The thinking budget Gemini is asked for: the same budgets as Anthropic's for an effort or a
 * maximum, 0 to turn thinking off, -1 (the model decides) for a bare `enabled`; undefined: the
 * model's default, and no thought summaries.
 */
export const geminiThinkingBudget = (reasoning: ReasoningConfig | undefined): number | undefined => {
  if (reasoning === undefined) return undefined
  if (reasoning.enabled === false || reasoning.effort === "none") return 0
  return thinkingBudget(reasoning) ?? (reasoning.enabled === true || reasoning.summary !== undefined ? -1 : undefined)
}

/** Output tokens thinking may take on top of the answer (Gemini counts thoughts in maxOutputTokens). */
export const geminiThinkingTokens = (reasoning: ReasoningConfig | undefined): number => Math.max(0, geminiThinkingBudget(reasoning) ?? 0)

export const geminiRequestBody = (request: NormalizedRequest): GeminiRequestBody => {
  const prompt = geminiPrompt(request.instructions, request.input)
  const body: Types.Mutable<GeminiRequestBody> = { contents: prompt.contents }
  if (prompt.system.length > 0) body.systemInstruction = { parts: prompt.system }
  if (request.tools.length > 0) {
    body.tools = [
      {
        functionDeclarations: request.tools.map((tool) => {
          const declaration: { name: string; description?: string; parametersJsonSchema?: unknown } = { name: tool.name }
          if (tool.description !== undefined) declaration.description = tool.description
          if (tool.parameters !== undefined) declaration.parametersJsonSchema = tool.parameters
          return declaration
        }),
      },
    ]
    if (request.toolChoice !== undefined) body.toolConfig = toolConfigOf(request.toolChoice)
  }
  const config: GenerationConfig = {}
  if (request.temperature !== undefined) config.temperature = request.temperature
  if (request.topP !== undefined) config.topP = request.topP
  if (request.topK !== undefined) config.topK = request.topK
  if (request.frequencyPenalty !== undefined) config.frequencyPenalty = request.frequencyPenalty
  if (request.presencePenalty !== undefined) config.presencePenalty = request.presencePenalty
  const format = request.responseFormat
  if (format !== undefined && format.type !== "text") {
    config.responseMimeType = "application/json"
    if (format.type === "json_schema") config.responseJsonSchema = format.schema
  }
  const budget = geminiThinkingBudget(request.reasoning)
  if (budget !== undefined) config.thinkingConfig = budget === 0 ? { thinkingBudget: 0 } : { includeThoughts: true, thinkingBudget: budget }
  // maxOutputTokens counts thoughts too: the caller's answer budget goes on top of the thinking one.
  if (request.maxOutputTokens !== undefined) config.maxOutputTokens = request.maxOutputTokens + Math.max(0, budget ?? 0)
  if (Object.keys(config).length > 0) body.generationConfig = config
  return body
}
