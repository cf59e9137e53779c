/**
 * A decoded Responses request → the provider-neutral `NormalizedRequest`. Refuses, with a 400
 * that names the place, what no adapter can send: item references (the service is stateless),
 * item kinds of server-side tools, non-function tools and tool choices. Nulls become absent keys.
 */
import { Either, type Types } from "effect"
import { BadRequest } from "../domain/errors.js"
import { quote } from "../domain/validation.js"
import {
  type ContentPartInput,
  type InputItem,
  isFunctionTool,
  isFunctionToolChoice,
  isKnownInputItem,
  REDACTED_REASONING,
  type ResponsesRequest,
  type ToolChoiceInput,
  type ToolInput,
} from "../domain/responses.js"
import type {
  ContentPart,
  FunctionTool,
  InputItem as NormalizedItem,
  NormalizedRequest,
  ReasoningConfig,
  ResponseFormat,
  ToolChoice,
} from "../providers/types.js"

type Result<A> = Either.Either<A, BadRequest>

const refuse = (message: string): Result<never> => Either.left(new BadRequest({ message: `Invalid request: ${message}` }))

const contentPart = (part: ContentPartInput, at: string): Result<ContentPart> => {
  const cache = part.cache_control === undefined ? {} : { cacheControl: part.cache_control }
  switch (part.type) {
    case "input_text":
    case "output_text":
      return Either.right({ type: "text", text: part.text, ...cache })
    case "refusal":
      return Either.right({ type: "text", text: part.refusal, ...cache })
    case "input_image":
      if (part.image_url == null) {
        return refuse(`${at}: an input_image by file_id cannot be sent to this provider; send image_url (a URL or a data URL)`)
      }
      return Either.right({
        type: "image",
        url: part.image_url,
        ...(part.detail === undefined ? {} : { detail: part.detail }),
        ...cache,
      })
    case "input_file": {
      const file: Types.Mutable<Extract<ContentPart, { type: "file" }>> = { type: "file" }
      if (part.filename != null) file.filename = part.filename
      if (part.file_data != null) file.fileData = part.file_data
      if (part.file_url != null) file.fileUrl = part.file_url
      if (part.file_id != null) file.fileId = part.file_id
      if (part.cache_control !== undefined) file.cacheControl = part.cache_control
      return Either.right(file)
    }
  }
}

/** A function call's output as one string: its text parts joined; other parts cannot travel. */
const callOutput = (output: string | ReadonlyArray<ContentPartInput>, at: string): Result<string> => {
  if (typeof output === "string") return Either.right(output)
  let text = ""
  for (let j = 0; j < output.length; j++) {
    const part = output[j]
    if (part.type !== "input_text" && part.type !== "output_text") {
      return refuse(`${at}.output[${j}]: only text parts can be sent as a function call output to this provider`)
    }
    text += part.text
  }
  return Either.right(text)
}

const inputItem = (item: InputItem, i: number): Result<NormalizedItem> => {
  const at = `input[${i}]`
  if (!isKnownInputItem(item)) return refuse(`${at}: item kind ${quote(String(item.type))} cannot be sent to this provider`)
  switch (item.type) {
    case "message": {
      if (item.content === null) return Either.right({ type: "message", role: item.role, content: [] })
      if (typeof item.content === "string") {
        return Either.right({ type: "message", role: item.role, content: [{ type: "text", text: item.content }] })
      }
      return Either.map(
        Either.all(item.content.map((part, j) => contentPart(part, `${at}.content[${j}]`))),
        (content): NormalizedItem => ({ type: "message", role: item.role, content }),
      )
    }
    case "function_call":
      return Either.right({ type: "function_call", callId: item.call_id, name: item.name, arguments: item.arguments })
    case "function_call_output":
      return Either.map(
        callOutput(item.output, at),
        (output): NormalizedItem => ({ type: "function_call_output", callId: item.call_id, output }),
      )
    case "reasoning": {
      const summary = item.summary.map((part) => part.text).join("\n\n")
      const token = item.encrypted_content
      if (token == null) return Either.right({ type: "reasoning", summary })
      const format = item.format == null ? {} : { format: item.format }
      return Either.right(
        token.startsWith(REDACTED_REASONING)
          ? { type: "reasoning", summary, encryptedContent: token.slice(REDACTED_REASONING.length), redacted: true, ...format }
          : { type: "reasoning", summary, encryptedContent: token, ...format },
      )
    }
    case "item_reference":
      return refuse(`${at}: item kind "item_reference" cannot be sent to this provider; the service is stateless, send the full item`)
  }
}

/** What makes `parameters` no object schema (the contract's rule for a function tool), or undefined. */
const objectSchemaProblem = (parameters: Readonly<Record<string, unknown>>): string | undefined => {
  const { type, properties, required } = parameters
  if (type !== undefined && type !== "object" && !(Array.isArray(type) && type.includes("object"))) return `must be an object schema (type "object")`
  if (properties !== undefined && (typeof properties !== "object" || properties === null || Array.isArray(properties))) {
    return "properties must be an object of property schemas"
  }
  if (required !== undefined && !(Array.isArray(required) && required.every((r) => typeof r === "string"))) return "required must be an array of property names"
  return undefined
}

const functionTool = (tool: ToolInput, i: number): Result<FunctionTool> => {
  if (!isFunctionTool(tool)) return refuse(`tools[${i}]: tool type ${quote(String(tool.type))} cannot be sent to this provider`)
  const fn: Types.Mutable<FunctionTool> = { type: "function", name: tool.name }
  if (tool.description != null) fn.description = tool.description
  if (tool.parameters != null) {
    const problem = objectSchemaProblem(tool.parameters)
    if (problem !== undefined) return refuse(`tools[${i}].parameters: ${problem}`)
    fn.parameters = tool.parameters
  }
  if (tool.strict != null) fn.strict = tool.strict
  return Either.right(fn)
}

const toolChoice = (choice: ToolChoiceInput): Result<ToolChoice> => {
  if (typeof choice === "string") return Either.right(choice)
  if (isFunctionToolChoice(choice)) return Either.right({ type: "function", name: choice.name })
  return refuse(`tool_choice: type ${quote(String(choice.type))} cannot be sent to this provider`)
}

/**
 * A tool choice the request's function tools cannot meet, as the 400's text: a function it does
 * not declare, or "required" with none. Providers refuse these too, but with their own wording,
 * and a model forced to call a function the caller does not have answers with a call it cannot run.
 */
const unmetChoice = (choice: ToolChoice, tools: ReadonlyArray<FunctionTool>): string | undefined => {
  if (choice === "required" && tools.length === 0) return `tool_choice: "required" needs at least one function tool in tools`
  if (typeof choice !== "object" || tools.some((t) => t.name === choice.name)) return undefined
  return `tool_choice.name: ${quote(choice.name)} is not the name of a function tool of this request (tools[].name)`
}

const responseFormat = (format: NonNullable<NonNullable<ResponsesRequest["text"]>["format"]>): ResponseFormat => {
  switch (format.type) {
    case "text":
      return { type: "text" }
    case "json_object":
      return { type: "json_object" }
    case "json_schema":
      return format.strict == null
        ? { type: "json_schema", name: format.name, schema: format.schema }
        : { type: "json_schema", name: format.name, schema: format.schema, strict: format.strict }
  }
}

export const reasoningConfig = (reasoning: NonNullable<ResponsesRequest["reasoning"]>): ReasoningConfig | undefined => {
  const out: Types.Mutable<ReasoningConfig> = {}
  if (reasoning.effort != null) out.effort = reasoning.effort
  if (reasoning.summary != null) out.summary = reasoning.summary
  if (reasoning.max_tokens != null) out.maxTokens = reasoning.max_tokens
  if (reasoning.enabled != null) out.enabled = reasoning.enabled
  return Object.keys(out).length === 0 ? undefined : out
}

const inputOf = (input: ResponsesRequest["input"]): Result<ReadonlyArray<NormalizedItem>> => {
  if (input === undefined) return Either.right([])
  if (typeof input === "string") return Either.right([{ type: "message", role: "user", content: [{ type: "text", text: input }] }])
  return Either.all(input.map(inputItem))
}

/**
 * The request as the adapters take it, for one endpoint's `upstreamModel`; or a 400 naming the
 * field. Plain code, not `Either.gen`: it runs once per attempt on every request.
 */
export const toNormalizedRequest = (
  req: ResponsesRequest,
  upstreamModel: string,
  /** Overrides `max_output_tokens` (the route bounds every answer by what was reserved for it). */
  maxOutputTokens: number | undefined = req.max_output_tokens ?? undefined,
): Result<NormalizedRequest> => {
  const input = inputOf(req.input)
  if (Either.isLeft(input)) return Either.left(input.left)
  const tools = req.tools == null ? Either.right([]) : Either.all(req.tools.map(functionTool))
  if (Either.isLeft(tools)) return Either.left(tools.left)
  const out: Types.Mutable<NormalizedRequest> = { model: upstreamModel, input: input.right, tools: tools.right }
  if (req.tool_choice !== undefined) {
    const choice = toolChoice(req.tool_choice)
    if (Either.isLeft(choice)) return Either.left(choice.left)
    const unmet = unmetChoice(choice.right, tools.right)
    if (unmet !== undefined) return refuse(unmet)
    out.toolChoice = choice.right
  }
  if (req.instructions != null) out.instructions = req.instructions
  if (req.parallel_tool_calls != null) out.parallelToolCalls = req.parallel_tool_calls
  if (req.temperature != null) out.temperature = req.temperature
  if (req.top_p != null) out.topP = req.top_p
  if (req.top_k != null) out.topK = req.top_k
  if (maxOutputTokens !== undefined) out.maxOutputTokens = maxOutputTokens
  if (req.frequency_penalty != null) out.frequencyPenalty = req.frequency_penalty
  if (req.presence_penalty != null) out.presencePenalty = req.presence_penalty
  if (req.text?.format !== undefined) out.responseFormat = responseFormat(req.text.format)
  const reasoning = req.reasoning == null ? undefined : reasoningConfig(req.reasoning)
  if (reasoning !== undefined) out.reasoning = reasoning
  if (req.cache_control !== undefined) out.cacheControl = req.cache_control
  if (req.user !== undefined) out.user = req.user
  if (req.metadata != null) out.metadata = req.metadata
  return Either.right(out)
}
