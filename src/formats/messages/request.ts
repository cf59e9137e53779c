/**
 * Ingress of POST /v1/messages: the Anthropic Messages body (validator, type and documentation in
 * one Schema, built once at module level) and its translation into the normalized request, the
 * Responses request. What the gateway cannot carry is a 400 naming the field, never dropped:
 * top-level fields it does not know, server tools, non-empty `stop_sequences`, blocks of server
 * tools. Messages name the field and the rule as POST /v1/responses does (`Invalid request: path: rule`).
 */
import { Either, Schema, type Types } from "effect"
import { BadRequest } from "../../domain/errors.js"
import {
  ANTHROPIC_REASONING,
  CacheControl,
  type ContentPartInput,
  fileAnnotationsIn,
  type InputItem,
  ResponsesRequest,
  sealToken,
  type ToolChoiceInput,
  type ToolInput,
} from "../../domain/responses.js"
import { clipped, makeDecoder, quote } from "../../domain/validation.js"
import { rule, oneOf, nonEmpty, intAtLeast, numberBetween, AnyRecord, objectOf } from "../../domain/schema-rules.js"
import { serverToolTypeOf } from "../../tools/index.js"

/** A `type` this gateway does not model: decoded, then refused by name in `toResponsesRequest`. */
const otherType = (known: ReadonlyArray<string>) =>
  Schema.String.pipe(Schema.filter((t) => !known.includes(t), { message: () => "a kind not modelled above" }))

const cacheable = { cache_control: Schema.optional(Schema.NullOr(CacheControl)) }

// ---------------------------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------------------------

const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  /** Citations of an earlier answer: not carried, so only an empty or absent list is taken. */
  citations: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))),
  /** What this gateway answered on the block (the file-parser's `file` annotations): sent back, they spare a parse. */
  annotations: Schema.optional(Schema.Unknown),
  ...cacheable,
})

/**
 * Whether `data` is standard base64, padded to a multiple of 4 characters. Checked natively, not by a
 * scan in JS: Buffer's decoder skips what is not base64 (so fewer bytes than the length promises means
 * a stray character), and it takes base64url's `-` and `_`, looked for apart. 7 MB (a 5 MB image)
 * costs about 1.5 ms, against 10 ms for a character loop and 5 ms for a regex.
 */
const isBase64 = (data: string): boolean => {
  if (data.length === 0 || data.length % 4 !== 0) return false
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0
  return !data.includes("-") && !data.includes("_") && Buffer.from(data, "base64").length === (data.length / 4) * 3 - padding
}

const Base64Data = Schema.String.pipe(
  Schema.filter((data) => isBase64(data) || "base64 data (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4 characters)"),
)

/** The image types Anthropic takes. */
const ImageMediaType = oneOf("image/jpeg", "image/png", "image/gif", "image/webp")

const Base64Source = Schema.Struct({ type: Schema.Literal("base64"), media_type: nonEmpty, data: Base64Data })
const ImageBase64Source = Schema.Struct({ type: Schema.Literal("base64"), media_type: ImageMediaType, data: Base64Data })
const UrlSource = Schema.Struct({ type: Schema.Literal("url"), url: nonEmpty })
const FileSource = Schema.Struct({ type: Schema.Literal("file"), file_id: nonEmpty })
const PlainTextSource = Schema.Struct({ type: Schema.Literal("text"), media_type: Schema.optional(Schema.String), data: Schema.String })
const ContentSource = Schema.Struct({ type: Schema.Literal("content"), content: Schema.Unknown })

const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  source: objectOf("a source object: base64, url or file", Schema.Union(ImageBase64Source, UrlSource, FileSource)),
  ...cacheable,
})

const DocumentBlock = Schema.Struct({
  type: Schema.Literal("document"),
  source: objectOf(
    "a source object: base64, text, url, file or content",
    Schema.Union(Base64Source, PlainTextSource, UrlSource, FileSource, ContentSource),
  ),
  title: Schema.optional(Schema.NullOr(Schema.String)),
  context: Schema.optional(Schema.NullOr(Schema.String)),
  citations: Schema.optional(Schema.NullOr(Schema.Struct({ enabled: Schema.optional(Schema.Boolean) }))),
  ...cacheable,
})

const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: nonEmpty,
  name: nonEmpty,
  input: AnyRecord.annotations(rule("an object")),
  ...cacheable,
})

/** What a tool result may hold: text is carried; images and documents are refused by name. */
const ToolResultPart = objectOf(
  "a content block object with a type",
  Schema.Union(TextBlock, ImageBlock, DocumentBlock, Schema.Struct({ type: otherType(["text", "image", "document"]) }, AnyRecord)),
)

const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: nonEmpty,
  content: Schema.optional(
    Schema.Union(Schema.Array(ToolResultPart).annotations({ message: () => "a string or an array of content blocks" }), Schema.String),
  ),
  is_error: Schema.optional(Schema.Boolean),
  ...cacheable,
})

const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.optional(Schema.String),
})

const RedactedThinkingBlock = Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String })

const blockTypes = ["text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"] as const

/** Server-tool blocks (server_tool_use, web_search_tool_result, …), search results, containers: refused by name. */
const OtherBlock = Schema.Struct({ type: otherType(blockTypes) }, AnyRecord)

const ContentBlock = objectOf(
  "a content block object with a type",
  Schema.Union(TextBlock, ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock, RedactedThinkingBlock, OtherBlock),
)
type KnownBlock =
  | typeof TextBlock.Type
  | typeof ImageBlock.Type
  | typeof DocumentBlock.Type
  | typeof ToolUseBlock.Type
  | typeof ToolResultBlock.Type
  | typeof ThinkingBlock.Type
  | typeof RedactedThinkingBlock.Type
const isKnownBlock = (block: typeof ContentBlock.Type): block is KnownBlock => (blockTypes as ReadonlyArray<string>).includes(block.type)

const Message = Schema.Struct({
  role: oneOf("user", "assistant", "system"),
  content: Schema.Union(
    Schema.Array(ContentBlock).annotations({ message: () => "a string or an array of content blocks" }),
    Schema.String,
  ),
})
type Message = typeof Message.Type

// ---------------------------------------------------------------------------------------------
// Tools, tool choice, thinking, output config
// ---------------------------------------------------------------------------------------------

const CustomTool = Schema.Struct({
  type: Schema.Literal("custom"),
  name: nonEmpty,
  description: Schema.optional(Schema.NullOr(Schema.String)),
  input_schema: AnyRecord.annotations(rule("a JSON Schema object")),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean)),
  ...cacheable,
})

/** A tool without `type` is a custom tool (Anthropic's own default). */
const withCustomDefault = Schema.transform(Schema.Object.annotations(rule("a tool object")), Schema.Object, {
  strict: true,
  decode: (tool) => ("type" in tool ? tool : { ...tool, type: "custom" }),
  encode: (tool) => tool,
})

/** Anthropic's server tools (web_search_20250305, bash_20250124, …): refused by name. */
const ServerTool = Schema.Struct({ type: otherType(["custom"]) }, AnyRecord)

const Tool = Schema.compose(withCustomDefault, Schema.Union(CustomTool, ServerTool), { strict: false })
type Tool = typeof Tool.Type

const parallel = { disable_parallel_tool_use: Schema.optional(Schema.Boolean) }
const ToolChoice = objectOf(
  "a tool choice object: {type: auto}, {type: any}, {type: tool, name} or {type: none}",
  Schema.Union(
    Schema.Struct({ type: Schema.Literal("auto"), ...parallel }),
    Schema.Struct({ type: Schema.Literal("any"), ...parallel }),
    Schema.Struct({ type: Schema.Literal("tool"), name: nonEmpty, ...parallel }),
    Schema.Struct({ type: Schema.Literal("none") }),
  ),
)
type ToolChoice = typeof ToolChoice.Type

const display = { display: Schema.optional(Schema.NullOr(oneOf("summarized", "omitted"))) }
const Thinking = objectOf(
  "a thinking object: {type: enabled, budget_tokens}, {type: adaptive} or {type: disabled}",
  Schema.Union(
    Schema.Struct({ type: Schema.Literal("enabled"), budget_tokens: intAtLeast(1024), ...display }),
    Schema.Struct({ type: Schema.Literal("adaptive"), ...display }),
    Schema.Struct({ type: Schema.Literal("disabled") }),
  ),
)

const OutputConfig = Schema.Struct({
  effort: Schema.optional(Schema.NullOr(oneOf("low", "medium", "high", "xhigh", "max"))),
  format: Schema.optional(
    Schema.NullOr(Schema.Struct({ type: Schema.Literal("json_schema"), schema: AnyRecord.annotations(rule("a JSON Schema object")) })),
  ),
})

// ---------------------------------------------------------------------------------------------
// The body
// ---------------------------------------------------------------------------------------------

/**
 * The body of POST /v1/messages. `messages` and `max_tokens` are required there (as by Anthropic)
 * and checked by `decodeMessagesRequest`; a preset body or a count_tokens body may leave them out.
 */
export const MessagesRequest = Schema.Struct({
  model: Schema.optional(Schema.String),
  messages: Schema.optional(Schema.Array(Message)),
  system: Schema.optional(
    Schema.Union(
      Schema.Array(TextBlock).annotations({ message: () => "a string or an array of text blocks" }),
      Schema.String,
    ),
  ),
  max_tokens: Schema.optional(intAtLeast(1)),
  temperature: Schema.optional(Schema.NullOr(numberBetween(0, 1))),
  top_p: Schema.optional(Schema.NullOr(numberBetween(0, 1))),
  top_k: Schema.optional(Schema.NullOr(intAtLeast(0))),
  stop_sequences: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Tool))),
  tool_choice: Schema.optional(Schema.NullOr(ToolChoice)),
  thinking: Schema.optional(Schema.NullOr(Thinking)),
  output_config: Schema.optional(Schema.NullOr(OutputConfig)),
  metadata: Schema.optional(
    Schema.NullOr(Schema.Struct({ user_id: Schema.optional(Schema.NullOr(ResponsesRequest.fields.user.from)) })),
  ),
  /** Anthropic's `auto` is the only tier this gateway knows (the default). */
  service_tier: Schema.optional(Schema.Literal("auto").annotations(rule(`only "auto" is supported on this gateway`))),
  cache_control: cacheable.cache_control,
  // This API's extras, with the Responses request's rules.
  models: ResponsesRequest.fields.models,
  provider: ResponsesRequest.fields.provider,
  plugins: ResponsesRequest.fields.plugins,
  session_id: ResponsesRequest.fields.session_id,
  trace: ResponsesRequest.fields.trace,
  // The gateway's server tools (`openrouter:*` in `tools`) and their loop's budget.
  max_tool_calls: ResponsesRequest.fields.max_tool_calls,
  stop_server_tools_when: ResponsesRequest.fields.stop_server_tools_when,
})
export type MessagesRequest = typeof MessagesRequest.Type

const KNOWN_FIELDS: ReadonlySet<string> = new Set(Object.keys(MessagesRequest.fields))

/** Fields of Anthropic's API the gateway does not carry, with what to do instead. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  container: "containers (code execution) are not available on this gateway",
  mcp_servers: "MCP servers are not available on this gateway",
  context_management: "context management is not available on this gateway",
  inference_geo: "not supported on this gateway; route with `provider` instead",
  speed: "not supported on this gateway",
  diagnostics: "not supported on this gateway",
  user_profile_id: "not supported on this gateway",
  workspace_id: "not supported on this gateway; the key names the workspace",
}

const refuse = (message: string): Either.Either<never, BadRequest> =>
  Either.left(new BadRequest({ message: `Invalid request: ${message}` }))

const BodyObject = AnyRecord.annotations(rule("the body must be a JSON object"))
const decodeShape = makeDecoder(Schema.compose(BodyObject, MessagesRequest, { strict: false }))

/** The body's keys are all known: the first unknown one is a 400 naming it (Anthropic refuses them too). */
const unknownField = (body: unknown): BadRequest | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  for (const key in body) {
    if (KNOWN_FIELDS.has(key)) continue
    // Own keys only: a field named `constructor` or `toString` is an unknown field, not a lookup of the prototype.
    const why = Object.hasOwn(UNSUPPORTED, key) ? UNSUPPORTED[key] : "unknown field; this gateway does not carry it"
    return new BadRequest({ message: `Invalid request: ${clipped(key)}: ${why}` })
  }
  return undefined
}

/** The body validated as a Messages body, required fields not checked. */
export const decodeMessagesShape = (body: unknown): Either.Either<MessagesRequest, BadRequest> => {
  const unknown = unknownField(body)
  return unknown === undefined ? decodeShape(body) : Either.left(unknown)
}

// ---------------------------------------------------------------------------------------------
// Messages body → Responses request
// ---------------------------------------------------------------------------------------------

type Result<A> = Either.Either<A, BadRequest>
type InputPart = ContentPartInput

const cacheOf = (block: { readonly cache_control?: typeof CacheControl.Type | null }) =>
  block.cache_control == null ? {} : { cache_control: block.cache_control }

const imagePart = (block: Extract<KnownBlock, { type: "image" }>, at: string): Result<InputPart> => {
  const source = block.source
  switch (source.type) {
    case "base64":
      return Either.right({ type: "input_image", image_url: `data:${source.media_type};base64,${source.data}`, ...cacheOf(block) })
    case "url":
      return Either.right({ type: "input_image", image_url: source.url, ...cacheOf(block) })
    case "file":
      return refuse(`${at}.source: an image by file_id cannot be sent on this gateway; send a base64 or url source`)
  }
}

const documentPart = (block: Extract<KnownBlock, { type: "document" }>, at: string): Result<InputPart> => {
  if (block.context != null) return refuse(`${at}.context: not supported on this gateway; put the context in a text block`)
  if (block.citations?.enabled === true) return refuse(`${at}.citations: citations are not available on this gateway`)
  const source = block.source
  const filename = block.title == null ? {} : { filename: block.title }
  switch (source.type) {
    case "base64":
      return Either.right({ type: "input_file", file_data: `data:${source.media_type};base64,${source.data}`, ...filename, ...cacheOf(block) })
    case "text":
      return Either.right({ type: "input_text", text: source.data, ...cacheOf(block) })
    case "url":
      return Either.right({ type: "input_file", file_url: source.url, ...filename, ...cacheOf(block) })
    case "file":
      return Either.right({ type: "input_file", file_id: source.file_id, ...filename, ...cacheOf(block) })
    case "content":
      return refuse(`${at}.source: a content source is not supported on this gateway; send its text as text blocks`)
  }
}

const textPart = (block: Extract<KnownBlock, { type: "text" }>, role: Message["role"], at: string): Result<InputPart> => {
  if (block.citations != null && block.citations.length > 0) return refuse(`${at}.citations: citations are not available on this gateway`)
  if (role !== "assistant") return Either.right({ type: "input_text", text: block.text, ...cacheOf(block) })
  const files = fileAnnotationsIn(block.annotations)
  return Either.right({ type: "output_text", text: block.text, ...cacheOf(block), ...(files.length === 0 ? {} : { annotations: files }) })
}

/** A tool result's content as the function call output: its text (blocks joined), an error marked as one. */
const toolOutput = (block: Extract<KnownBlock, { type: "tool_result" }>, at: string): Result<string> => {
  let text = ""
  if (typeof block.content === "string") text = block.content
  else if (block.content !== undefined) {
    for (let k = 0; k < block.content.length; k++) {
      const part = block.content[k]
      if (part.type !== "text") {
        return refuse(`${at}.content[${k}]: only text blocks can be sent as a tool result on this gateway (got ${quote(String(part.type))})`)
      }
      text += (k === 0 ? "" : "\n") + (part as { readonly text: string }).text
    }
  }
  // The normalized request has no error flag: the model is told in the text itself.
  return Either.right(block.is_error === true ? `Error: ${text}` : text)
}

/**
 * One message → input items, in order: runs of text/image/document blocks become one message
 * item; tool_use, tool_result and thinking blocks become their own items between them.
 */
const messageItems = (message: Message, i: number, out: Array<InputItem>): Result<void> => {
  const role = message.role
  if (typeof message.content === "string") {
    out.push({ type: "message", role, content: message.content })
    return Either.right(undefined)
  }
  let parts: Array<InputPart> = []
  const flush = () => {
    if (parts.length > 0) out.push({ type: "message", role, content: parts })
    parts = []
  }
  for (let j = 0; j < message.content.length; j++) {
    const given = message.content[j]
    const at = `messages[${i}].content[${j}]`
    if (!isKnownBlock(given)) return refuse(`${at}: block type ${quote(String(given.type))} is not supported on this gateway`)
    const block = given
    const belongs = (owner: Message["role"]): Result<void> =>
      role === owner ? Either.right(undefined) : refuse(`${at}: ${block.type} blocks belong to ${owner} messages`)
    let part: Result<InputPart> | undefined
    switch (block.type) {
      case "text":
        part = textPart(block, role, at)
        break
      case "image":
        part = role === "user" ? imagePart(block, at) : refuse(`${at}: image blocks belong to user messages`)
        break
      case "document":
        part = role === "user" ? documentPart(block, at) : refuse(`${at}: document blocks belong to user messages`)
        break
      case "tool_use": {
        const owned = belongs("assistant")
        if (Either.isLeft(owned)) return owned
        flush()
        out.push({ type: "function_call", call_id: block.id, name: block.name, arguments: JSON.stringify(block.input) })
        break
      }
      case "tool_result": {
        const owned = belongs("user")
        if (Either.isLeft(owned)) return owned
        const output = toolOutput(block, at)
        if (Either.isLeft(output)) return output
        flush()
        out.push({ type: "function_call_output", call_id: block.tool_use_id, output: output.right })
        break
      }
      case "thinking":
      case "redacted_thinking": {
        const owned = belongs("assistant")
        if (Either.isLeft(owned)) return owned
        flush()
        // Earlier thinking travels as reasoning, its signature (or a redacted block's data) as the
        // item's encrypted content: Anthropic's adapters send it back, the others drop what they cannot send.
        if (block.type === "redacted_thinking") {
          out.push({ type: "reasoning", summary: [], encrypted_content: sealToken(block.data, true), format: ANTHROPIC_REASONING })
          break
        }
        const summary = block.thinking !== "" ? [{ type: "summary_text" as const, text: block.thinking }] : []
        out.push(
          block.signature === undefined || block.signature === ""
            ? { type: "reasoning", summary }
            : { type: "reasoning", summary, encrypted_content: block.signature, format: ANTHROPIC_REASONING },
        )
        break
      }
    }
    if (part !== undefined) {
      if (Either.isLeft(part)) return part
      parts.push(part.right)
    }
  }
  flush()
  return Either.right(undefined)
}

const functionTool = (tool: Tool, i: number): Result<ToolInput> => {
  // The gateway's own server tools (`openrouter:datetime`, …) go on as the Responses request lists them.
  if (tool.type !== "custom" && serverToolTypeOf(tool.type) !== undefined) return Either.right(tool as ToolInput)
  if (tool.type !== "custom") {
    return refuse(`tools[${i}].type: server tool ${quote(String(tool.type))} is not available on this gateway; send a custom tool with input_schema`)
  }
  const custom = tool as Extract<Tool, { type: "custom" }>
  return Either.right({
    type: "function",
    name: custom.name,
    ...(custom.description == null ? {} : { description: custom.description }),
    parameters: custom.input_schema,
    ...(custom.strict == null ? {} : { strict: custom.strict }),
  })
}

const toolChoiceOf = (choice: ToolChoice): ToolChoiceInput => {
  switch (choice.type) {
    case "auto":
      return "auto"
    case "any":
      return "required"
    case "none":
      return "none"
    case "tool":
      return { type: "function", name: choice.name }
  }
}

export interface TranslateOptions {
  /** A preset's body: the system prompt is kept as text whatever its cache breakpoints (it becomes `system_prompt`). */
  readonly forPreset?: boolean
}

/** A decoded Messages body → the normalized (Responses) request, or a 400 naming the field. */
export const toResponsesRequest = (body: MessagesRequest, options: TranslateOptions = {}): Result<ResponsesRequest> => {
  if (body.stop_sequences != null && body.stop_sequences.length > 0) {
    return refuse("stop_sequences: stop sequences are not available on this gateway (the routed providers are not sent them)")
  }
  const out: Types.Mutable<ResponsesRequest> = { stream: body.stream ?? false, store: false }
  if (body.model !== undefined) out.model = body.model
  if (body.models !== undefined) out.models = body.models

  const input: Array<InputItem> = []
  const system = body.system
  if (typeof system === "string") {
    if (system !== "") out.instructions = system
  } else if (system !== undefined) {
    for (let j = 0; j < system.length; j++) {
      const citations = system[j].citations
      if (citations != null && citations.length > 0) return refuse(`system[${j}].citations: citations are not available on this gateway`)
    }
    if (options.forPreset === true || system.every((block) => block.cache_control == null)) {
      const text = system.map((block) => block.text).join("\n\n")
      if (text !== "") out.instructions = text
    } else {
      // Cache breakpoints in the system prompt: a system message keeps them on its parts.
      input.push({ type: "message", role: "system", content: system.map((block) => ({ type: "input_text", text: block.text, ...cacheOf(block) })) })
    }
  }
  const messages = body.messages ?? []
  for (let i = 0; i < messages.length; i++) {
    const done = messageItems(messages[i], i, input)
    if (Either.isLeft(done)) return Either.left(done.left)
  }
  if (body.messages !== undefined) out.input = input

  if (body.max_tokens !== undefined) out.max_output_tokens = body.max_tokens
  if (body.temperature != null) out.temperature = body.temperature
  if (body.top_p != null) out.top_p = body.top_p
  if (body.top_k != null) out.top_k = body.top_k

  if (body.max_tool_calls != null) out.max_tool_calls = body.max_tool_calls
  if (body.stop_server_tools_when !== undefined) out.stop_server_tools_when = body.stop_server_tools_when
  if (body.tools != null && body.tools.length > 0) {
    const tools: Array<ToolInput> = []
    for (let i = 0; i < body.tools.length; i++) {
      const tool = functionTool(body.tools[i], i)
      if (Either.isLeft(tool)) return Either.left(tool.left)
      tools.push(tool.right)
    }
    out.tools = tools
  }
  if (body.tool_choice != null) {
    out.tool_choice = toolChoiceOf(body.tool_choice)
    if ("disable_parallel_tool_use" in body.tool_choice && body.tool_choice.disable_parallel_tool_use === true) {
      out.parallel_tool_calls = false
    }
  }

  const thinking = body.thinking
  const effort = body.output_config?.effort
  if (thinking != null || effort != null) {
    const reasoning: Types.Mutable<NonNullable<ResponsesRequest["reasoning"]>> = {}
    if (thinking?.type === "enabled") {
      if (body.max_tokens !== undefined && thinking.budget_tokens >= body.max_tokens) {
        return refuse("thinking.budget_tokens: must be less than max_tokens")
      }
      reasoning.enabled = true
      reasoning.max_tokens = thinking.budget_tokens
    } else if (thinking?.type === "adaptive") {
      reasoning.enabled = true
    } else if (thinking?.type === "disabled") {
      reasoning.enabled = false
    }
    if (effort != null) reasoning.effort = effort === "max" ? "xhigh" : effort
    out.reasoning = reasoning
  }
  const format = body.output_config?.format
  if (format != null) out.text = { format: { type: "json_schema", name: "output", schema: format.schema, strict: true } }

  const userId = body.metadata?.user_id
  if (userId != null) out.user = userId
  if (body.cache_control != null) out.cache_control = body.cache_control
  if (body.provider !== undefined) out.provider = body.provider
  if (body.plugins !== undefined) out.plugins = body.plugins
  if (body.session_id !== undefined) out.session_id = body.session_id
  if (body.trace !== undefined) out.trace = body.trace
  return Either.right(out)
}

/** POST /v1/messages: the body decoded, its required fields checked, translated. */
export const decodeMessagesRequest = (body: unknown): Result<ResponsesRequest> =>
  Either.flatMap(decodeMessagesShape(body), (shape) => {
    if (shape.max_tokens === undefined) return refuse("max_tokens: is missing (an integer of at least 1, as Anthropic requires)")
    if (shape.messages === undefined) return refuse("messages: is missing")
    if (shape.messages.length === 0) return refuse("messages: at least one message")
    return toResponsesRequest(shape)
  })

/** POST /v1/presets/{slug}/messages: the body as a preset's configuration (no field required). */
export const decodeMessagesPreset = (body: unknown): Result<ResponsesRequest> =>
  Either.flatMap(decodeMessagesShape(body), (shape) => toResponsesRequest(shape, { forPreset: true }))

/** POST /v1/messages/count_tokens: `messages` required, `max_tokens` not (Anthropic's count takes none). */
export const decodeCountTokensRequest = (body: unknown): Result<ResponsesRequest> =>
  Either.flatMap(decodeMessagesShape(body), (shape) => {
    // As Anthropic's count_tokens: the model is required, though the count does not depend on it.
    if (shape.model === undefined) return refuse("model: is missing")
    if (shape.messages === undefined) return refuse("messages: is missing")
    return toResponsesRequest(shape)
  })
