/**
 * Wire shape of POST /v1/chat/completions (OpenAI's Chat Completions body with this API's
 * extras) and its translation into the one normalized request, the Responses request: messages
 * become input items, chat tools and formats their Responses forms. What the gateway cannot carry
 * to an upstream (`n > 1`, log probabilities, stop sequences, seeds, sampler knobs no adapter
 * sends) is a 400 naming the field, never dropped. Messages name the field and the rule.
 */
import { Either, Schema, type Types } from "effect"
import { BadRequest } from "../../domain/errors.js"
import {
  CacheControl,
  type ContentPartInput,
  fileAnnotationsIn,
  type FunctionToolInput,
  type InputItem,
  Metadata,
  PluginEntry,
  ProviderField,
  ReasoningInput,
  REDACTED_REASONING,
  type ResponsesRequest,
  type TextFormat,
  type ToolChoiceInput,
  type ToolInput,
} from "../../domain/responses.js"
import { makeDecoder, quote } from "../../domain/validation.js"
import { rule, oneOf, nullableOneOf, maxChars, nonEmpty, intAtLeast, numberBetween, nullable, AnyRecord, objectOf, otherKind } from "../../domain/schema-rules.js"

// ---------------------------------------------------------------------------------------------
// Content parts
// ---------------------------------------------------------------------------------------------

const cacheable = { cache_control: Schema.optional(CacheControl) }

export const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String, ...cacheable })

export const ImageUrlPart = Schema.Struct({
  type: Schema.Literal("image_url"),
  image_url: Schema.Struct({ url: Schema.String, detail: Schema.optional(oneOf("auto", "low", "high")) }),
  ...cacheable,
})

export const FilePart = Schema.Struct({
  type: Schema.Literal("file"),
  file: Schema.Struct({
    file_data: nullable(Schema.String),
    file_id: nullable(Schema.String),
    file_url: nullable(Schema.String),
    filename: nullable(Schema.String),
  }).pipe(
    Schema.filter(
      (f) => f.file_data != null || f.file_id != null || f.file_url != null || "a file needs file_data, file_id or file_url",
    ),
  ),
  ...cacheable,
})

export const RefusalPart = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String })

/**
 * A part of a kind the message does not take (input_audio, video_url, an image in a system
 * message, …): decoded, then refused with the reason, not with a type dump of the union.
 */
const otherPart = (...known: Array<string>) => Schema.Struct({ type: otherKind(new Set(known)) }, AnyRecord)

const partRule = "a content part object with a type"
const UserPart = objectOf(partRule, Schema.Union(TextPart, ImageUrlPart, FilePart, otherPart("text", "image_url", "file")))
const TextOnlyPart = objectOf(partRule, Schema.Union(TextPart, otherPart("text")))
const AssistantPart = objectOf(partRule, Schema.Union(TextPart, RefusalPart, otherPart("text", "refusal")))

/** An array of parts or a string (the array first: a bad part gets its own message, another value `what`). */
const contentOf = <A, I, R>(part: Schema.Schema<A, I, R>, what: string) =>
  Schema.Union(Schema.Array(part).annotations({ message: () => what }), Schema.String)

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

const named = { name: Schema.optional(Schema.String) }

export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system"),
  content: contentOf(TextOnlyPart, "a string or an array of text parts"),
  ...named,
})

export const DeveloperMessage = Schema.Struct({
  role: Schema.Literal("developer"),
  content: contentOf(TextOnlyPart, "a string or an array of text parts"),
  ...named,
})

export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: contentOf(UserPart, "a string or an array of content parts"),
  ...named,
})

export const ToolCall = Schema.Struct({
  id: Schema.String,
  type: oneOf("function"),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String }),
})

/** Reasoning given back with an assistant turn (what this endpoint answered as `reasoning_details`). */
export const ReasoningDetail = objectOf(
  "a reasoning detail object with a type",
  Schema.Union(
    Schema.Struct({ type: Schema.Literal("reasoning.text"), text: nullable(Schema.String) }, AnyRecord),
    Schema.Struct({ type: Schema.Literal("reasoning.summary"), summary: Schema.String }, AnyRecord),
    Schema.Struct({ type: Schema.Literal("reasoning.encrypted"), data: Schema.String }, AnyRecord),
    Schema.Struct({ type: otherKind(new Set(["reasoning.text", "reasoning.summary", "reasoning.encrypted"])) }, AnyRecord),
  ),
)

export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: nullable(contentOf(AssistantPart, "a string, an array of text or refusal parts, or null")),
  refusal: nullable(Schema.String),
  tool_calls: nullable(Schema.Array(objectOf("a tool call object", ToolCall))),
  reasoning: nullable(Schema.String),
  reasoning_details: nullable(Schema.Array(ReasoningDetail)),
  /** What this endpoint answered (citations): not sent on; its `file` annotations spare the file-parser a parse. */
  annotations: Schema.optional(Schema.Unknown),
  function_call: Schema.optional(Schema.Unknown),
  audio: Schema.optional(Schema.Unknown),
  ...named,
})

export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  tool_call_id: Schema.String,
  content: contentOf(TextOnlyPart, "a string or an array of text parts"),
})

/** The deprecated predecessor of `tool` messages: decoded so it can be refused with the way out. */
export const FunctionMessage = Schema.Struct({ role: Schema.Literal("function") }, AnyRecord)

const roles = ["system", "developer", "user", "assistant", "tool", "function"] as const

/** The role is checked first, so an unknown role is refused with the list of roles. */
const messageHead = Schema.Struct({ role: oneOf(...roles) }, AnyRecord).annotations({
  message: () => "a message object with a role",
})

export const ChatMessage = Schema.compose(
  messageHead,
  Schema.Union(SystemMessage, DeveloperMessage, UserMessage, AssistantMessage, ToolMessage, FunctionMessage),
  { strict: false },
)
export type ChatMessage = typeof ChatMessage.Type

// ---------------------------------------------------------------------------------------------
// Tools, tool choice, response format
// ---------------------------------------------------------------------------------------------

export const ChatFunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: nonEmpty,
    description: nullable(Schema.String),
    parameters: nullable(AnyRecord),
    strict: nullable(Schema.Boolean),
  }),
})

const functionKind: ReadonlySet<string> = new Set(["function"])

/** Server tools and other kinds: passed on as the Responses request's tools (the normalizer judges them). */
export const ChatOtherTool = Schema.Struct({ type: otherKind(functionKind) }, AnyRecord)

export const ChatTool = objectOf("a tool object with a type", Schema.Union(ChatFunctionTool, ChatOtherTool))
export type ChatTool = typeof ChatTool.Type

const toolChoiceRule = `"auto", "none", "required", or {type: "function", function: {name}}`

export const ChatNamedToolChoice = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({ name: Schema.String }),
})

export const ChatToolChoice = Schema.Union(
  objectOf(toolChoiceRule, Schema.Union(ChatNamedToolChoice, Schema.Struct({ type: otherKind(functionKind) }, AnyRecord))),
  Schema.Literal("auto", "none", "required").annotations(rule(toolChoiceRule)),
)

export const ResponseFormat = objectOf(
  "a response format object with a type",
  Schema.Union(
    Schema.Struct({ type: Schema.Literal("text") }),
    Schema.Struct({ type: Schema.Literal("json_object") }),
    Schema.Struct({
      type: Schema.Literal("json_schema"),
      json_schema: Schema.Struct({
        name: Schema.String,
        schema: AnyRecord,
        description: Schema.optional(Schema.String),
        strict: nullable(Schema.Boolean),
      }),
    }),
  ).annotations(rule("one of {type: text}, {type: json_object}, {type: json_schema, json_schema: {name, schema}}")),
)

// ---------------------------------------------------------------------------------------------
// The body
// ---------------------------------------------------------------------------------------------

const efforts = ["none", "minimal", "low", "medium", "high", "xhigh"] as const
const serviceTiers = ["auto", "default", "flex", "priority", "scale"] as const

/**
 * The body of POST /v1/chat/completions. `messages` is required (the preset endpoint allows it
 * empty). The fields at the end are decoded only to be refused unless they ask for nothing.
 */
export const ChatRequest = Schema.Struct({
  model: Schema.optional(Schema.String),
  models: Schema.optional(Schema.Array(Schema.String)),
  messages: Schema.Array(ChatMessage).annotations({ message: () => "an array of message objects" }),
  stream: Schema.optionalWith(Schema.NullOr(Schema.Boolean), { default: () => false }),
  stream_options: nullable(Schema.Struct({ include_usage: nullable(Schema.Boolean) })),
  temperature: nullable(numberBetween(0, 2)),
  top_p: nullable(numberBetween(0, 1)),
  top_k: nullable(intAtLeast(0)),
  frequency_penalty: nullable(numberBetween(-2, 2)),
  presence_penalty: nullable(numberBetween(-2, 2)),
  max_tokens: nullable(intAtLeast(1)),
  max_completion_tokens: nullable(intAtLeast(1)),
  max_tool_calls: nullable(intAtLeast(0)),
  parallel_tool_calls: nullable(Schema.Boolean),
  tools: nullable(Schema.Array(ChatTool)),
  tool_choice: nullable(ChatToolChoice),
  response_format: nullable(ResponseFormat),
  verbosity: Schema.optional(nullableOneOf("low", "medium", "high")),
  reasoning: nullable(ReasoningInput),
  reasoning_effort: Schema.optional(nullableOneOf(...efforts)),
  provider: nullable(ProviderField),
  plugins: Schema.optional(Schema.Array(PluginEntry)),
  session_id: Schema.optional(maxChars(256)),
  user: Schema.optional(maxChars(256)),
  metadata: nullable(Metadata),
  debug: Schema.optional(Schema.Struct({ echo_upstream_body: Schema.optional(Schema.Boolean) })),
  cache_control: Schema.optional(CacheControl),
  prompt_cache_key: nullable(Schema.String),
  safety_identifier: nullable(Schema.String),
  service_tier: Schema.optional(nullableOneOf(...serviceTiers)),
  modalities: nullable(Schema.Array(oneOf("text", "image"))),
  image_config: Schema.optional(AnyRecord),
  store: nullable(Schema.Boolean),
  // Listed by the contract without a structure: accepted as given, carried as the Responses request's.
  trace: Schema.optional(Schema.Unknown),
  prompt_cache_options: Schema.optional(Schema.Unknown),
  route: Schema.optional(Schema.Unknown),
  stop_server_tools_when: Schema.optional(Schema.Unknown),
  /** Our extension: the slug of a preset whose configuration this request starts from. */
  preset: Schema.optional(nonEmpty),
  // Not carried: refused unless they ask for nothing (see `refusals`).
  n: nullable(Schema.Unknown),
  logprobs: nullable(Schema.Unknown),
  top_logprobs: nullable(Schema.Unknown),
  stop: nullable(Schema.Unknown),
  seed: nullable(Schema.Unknown),
  logit_bias: nullable(Schema.Unknown),
  min_p: nullable(Schema.Unknown),
  top_a: nullable(Schema.Unknown),
  repetition_penalty: nullable(Schema.Unknown),
  prediction: nullable(Schema.Unknown),
  audio: nullable(Schema.Unknown),
  web_search_options: nullable(Schema.Unknown),
  functions: nullable(Schema.Unknown),
  function_call: nullable(Schema.Unknown),
})
export type ChatRequest = typeof ChatRequest.Type

const BodyObject = AnyRecord.annotations(rule("the body must be a JSON object"))
const decodeShape = makeDecoder(Schema.compose(BodyObject, ChatRequest, { strict: false }))

// ---------------------------------------------------------------------------------------------
// Refusals: fields with no place in the normalized request
// ---------------------------------------------------------------------------------------------

type Result<A> = Either.Either<A, BadRequest>

const refuse = (message: string): Result<never> => Either.left(new BadRequest({ message: `Invalid request: ${message}` }))

const NOT_CARRIED = "is not supported by this gateway (no upstream request it sends carries it); leave it out"

/** A field that asks for nothing (its default) passes; anything else is refused with the reason. */
const refusals: ReadonlyArray<readonly [keyof ChatRequest, (value: unknown) => boolean, string]> = [
  ["n", (v) => v === 1, "only 1 is supported (the gateway answers one choice)"],
  ["logprobs", (v) => v === false, "only false is supported (the gateway does not return log probabilities)"],
  ["top_logprobs", (v) => v === 0, "only 0 is supported (the gateway does not return log probabilities)"],
  ["stop", (v) => Array.isArray(v) && v.length === 0, NOT_CARRIED],
  ["seed", () => false, NOT_CARRIED],
  ["logit_bias", (v) => typeof v === "object" && v !== null && Object.keys(v).length === 0, NOT_CARRIED],
  ["min_p", () => false, NOT_CARRIED],
  ["top_a", () => false, NOT_CARRIED],
  ["repetition_penalty", () => false, NOT_CARRIED],
  ["prediction", () => false, NOT_CARRIED],
  ["audio", () => false, "is not supported: the gateway answers text only"],
  ["web_search_options", () => false, 'is not supported; use the plugin {"id": "web"} or a web search tool'],
  ["functions", () => false, "is deprecated and not supported; send `tools` with {type: \"function\", function: {…}}"],
  ["function_call", () => false, "is deprecated and not supported; send `tool_choice`"],
]

// ---------------------------------------------------------------------------------------------
// Messages → input items
// ---------------------------------------------------------------------------------------------

type Part = typeof UserPart.Type | typeof AssistantPart.Type

const cacheOf = (part: { readonly cache_control?: CacheControl }) =>
  part.cache_control === undefined ? {} : { cache_control: part.cache_control }

const partKindRule = (type: string, at: string): string =>
  type === "input_audio"
    ? `${at}: audio input is not supported by this gateway (no upstream request it sends carries audio)`
    : `${at}: content part type ${quote(type)} is not supported here`

/** A message's parts as the Responses request's; `output` for assistant text (history). */
const partsOf = (
  parts: ReadonlyArray<Part>,
  at: string,
  allowed: ReadonlySet<string>,
  output: boolean,
): Result<Array<ContentPartInput>> => {
  const out: Array<ContentPartInput> = []
  for (let j = 0; j < parts.length; j++) {
    const part = parts[j]
    const where = `${at}.content[${j}]`
    if (!allowed.has(part.type)) return refuse(partKindRule(part.type, where))
    switch (part.type) {
      case "text": {
        const text = part as typeof TextPart.Type
        out.push(output
          ? { type: "output_text", text: text.text, ...cacheOf(text) }
          : { type: "input_text", text: text.text, ...cacheOf(text) })
        break
      }
      case "refusal":
        out.push({ type: "refusal", refusal: (part as typeof RefusalPart.Type).refusal })
        break
      case "image_url": {
        const image = part as typeof ImageUrlPart.Type
        out.push({
          type: "input_image",
          image_url: image.image_url.url,
          ...(image.image_url.detail === undefined ? {} : { detail: image.image_url.detail }),
          ...cacheOf(image),
        })
        break
      }
      case "file": {
        const { file, ...rest } = part as typeof FilePart.Type
        const input: Types.Mutable<Extract<ContentPartInput, { type: "input_file" }>> = { type: "input_file" }
        if (file.file_data != null) input.file_data = file.file_data
        if (file.file_url != null) input.file_url = file.file_url
        if (file.file_id != null) input.file_id = file.file_id
        if (file.filename != null) input.filename = file.filename
        if (rest.cache_control !== undefined) input.cache_control = rest.cache_control
        out.push(input)
        break
      }
    }
  }
  return Either.right(out)
}

const TEXT_ONLY: ReadonlySet<string> = new Set(["text"])
const USER_KINDS: ReadonlySet<string> = new Set(["text", "image_url", "file"])
const ASSISTANT_KINDS: ReadonlySet<string> = new Set(["text", "refusal"])

type Message = ChatMessage

/**
 * The reasoning given back with an assistant turn, as Responses reasoning items. A text detail
 * with a `signature` (Anthropic's) ends a block: its texts so far, joined as they came (the
 * signature covers them exactly), with the signature as its encrypted content. A redacted block
 * (`reasoning.encrypted` with the mark, `sealToken`) is an item of its own; other encrypted data
 * (OpenAI's, one a message) goes with the summaries.
 */
const reasoningItems = (message: Extract<Message, { role: "assistant" }>, at: string): Result<ReadonlyArray<InputItem>> => {
  const details = message.reasoning_details
  if (details == null || details.length === 0) {
    return Either.right(message.reasoning == null || message.reasoning === "" ? [] : [{
      type: "reasoning",
      summary: [{ type: "summary_text", text: message.reasoning }],
    }])
  }
  const items: Array<InputItem> = []
  let summary: Array<{ readonly type: "summary_text"; readonly text: string }> = []
  /** The message's encrypted detail that is not a redacted block (OpenAI's), with its format. */
  let encrypted: { readonly encrypted_content: string; readonly format?: string } | undefined
  for (let k = 0; k < details.length; k++) {
    const detail = details[k] as {
      readonly type: string
      readonly text?: unknown
      readonly summary?: unknown
      readonly data?: unknown
      readonly signature?: unknown
      readonly format?: unknown
    }
    const format = typeof detail.format === "string" ? { format: detail.format } : {}
    if (detail.type === "reasoning.text") {
      if (typeof detail.text === "string") summary.push({ type: "summary_text", text: detail.text })
      if (typeof detail.signature === "string" && detail.signature !== "") {
        const text = summary.map((part) => part.text).join("")
        items.push({ type: "reasoning", summary: [{ type: "summary_text", text }], encrypted_content: detail.signature, ...format })
        summary = []
      }
    } else if (detail.type === "reasoning.summary" && typeof detail.summary === "string") summary.push({ type: "summary_text", text: detail.summary })
    else if (detail.type === "reasoning.encrypted" && typeof detail.data === "string") {
      if (detail.data.startsWith(REDACTED_REASONING)) items.push({ type: "reasoning", summary: [], encrypted_content: detail.data, ...format })
      else if (encrypted !== undefined) return refuse(`${at}.reasoning_details[${k}]: at most one reasoning.encrypted detail per message`)
      else encrypted = { encrypted_content: detail.data, ...format }
    } else {
      return refuse(`${at}.reasoning_details[${k}]: detail type ${quote(detail.type)} cannot be sent back`)
    }
  }
  if (summary.length > 0 || encrypted !== undefined) {
    items.push({ type: "reasoning", summary, ...encrypted })
  }
  return Either.right(items)
}

/** One message as its input items (an assistant turn: its reasoning, its message, its calls). */
const itemsOf = (message: Message, i: number, out: Array<InputItem>): Result<void> => {
  const at = `messages[${i}]`
  if (message.role === "function") {
    return refuse(`${at}.role: "function" messages are deprecated and not supported; send {"role": "tool", "tool_call_id", "content"}`)
  }
  if ("name" in message && message.name !== undefined) {
    return refuse(`${at}.name: ${NOT_CARRIED}`)
  }
  switch (message.role) {
    case "system":
    case "developer":
    case "user": {
      if (typeof message.content === "string") {
        out.push({ type: "message", role: message.role, content: message.content })
        return Either.right(undefined)
      }
      const parts = partsOf(message.content, at, message.role === "user" ? USER_KINDS : TEXT_ONLY, false)
      if (Either.isLeft(parts)) return Either.left(parts.left)
      out.push({ type: "message", role: message.role, content: parts.right })
      return Either.right(undefined)
    }
    case "assistant": {
      if (message.function_call != null) return refuse(`${at}.function_call: is deprecated and not supported; send tool_calls`)
      if (message.audio != null) return refuse(`${at}.audio: ${NOT_CARRIED}`)
      const reasoning = reasoningItems(message, at)
      if (Either.isLeft(reasoning)) return Either.left(reasoning.left)
      out.push(...reasoning.right)
      const content: Array<ContentPartInput> = []
      if (typeof message.content === "string") {
        if (message.content !== "") content.push({ type: "output_text", text: message.content })
      } else if (message.content != null) {
        const parts = partsOf(message.content, at, ASSISTANT_KINDS, true)
        if (Either.isLeft(parts)) return Either.left(parts.left)
        content.push(...parts.right)
      }
      // The file-parser's annotations ride on the turn's text, where the Responses form has them.
      const files = fileAnnotationsIn(message.annotations)
      const first = files.length === 0 ? -1 : content.findIndex((part) => part.type === "output_text")
      if (first >= 0) content[first] = { ...(content[first] as Extract<ContentPartInput, { type: "output_text" }>), annotations: files }
      if (message.refusal != null && message.refusal !== "") content.push({ type: "refusal", refusal: message.refusal })
      const calls = message.tool_calls ?? []
      // A turn of only calls has no message item (the Responses form of a tool-calling turn).
      if (content.length > 0 || calls.length === 0) out.push({ type: "message", role: "assistant", content })
      for (const call of calls) {
        out.push({ type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments })
      }
      return Either.right(undefined)
    }
    case "tool": {
      if (typeof message.content === "string") {
        out.push({ type: "function_call_output", call_id: message.tool_call_id, output: message.content })
        return Either.right(undefined)
      }
      const parts = partsOf(message.content, at, TEXT_ONLY, false)
      if (Either.isLeft(parts)) return Either.left(parts.left)
      out.push({ type: "function_call_output", call_id: message.tool_call_id, output: parts.right })
      return Either.right(undefined)
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tools and formats
// ---------------------------------------------------------------------------------------------

const toolOf = (tool: ChatTool): ToolInput => {
  if (tool.type !== "function") return tool as ToolInput
  const fn = (tool as typeof ChatFunctionTool.Type).function
  const out: Types.Mutable<typeof FunctionToolInput.Type> = { type: "function", name: fn.name }
  if (fn.description !== undefined) out.description = fn.description
  if (fn.parameters !== undefined) out.parameters = fn.parameters
  if (fn.strict !== undefined) out.strict = fn.strict
  return out
}

const toolChoiceOf = (choice: typeof ChatToolChoice.Type): ToolChoiceInput => {
  if (typeof choice === "string") return choice
  if (choice.type === "function") return { type: "function", name: (choice as typeof ChatNamedToolChoice.Type).function.name }
  return choice as ToolChoiceInput
}

const formatOf = (format: typeof ResponseFormat.Type): TextFormat => {
  switch (format.type) {
    case "text":
      return { type: "text" }
    case "json_object":
      return { type: "json_object" }
    case "json_schema": {
      const spec = format.json_schema
      const out: Types.Mutable<Extract<TextFormat, { type: "json_schema" }>> = { type: "json_schema", name: spec.name, schema: spec.schema }
      if (spec.description !== undefined) out.description = spec.description
      if (spec.strict !== undefined) out.strict = spec.strict
      return out
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The translation
// ---------------------------------------------------------------------------------------------

/** What the chat answer needs that the Responses request has no field for. */
/** `stream_options.include_usage`: the usage chunk is sent unless the caller says false. */
export const includesUsage = (streamOptions: { readonly include_usage?: unknown } | null | undefined): boolean => streamOptions?.include_usage !== false

export interface ChatOptions {
  /** `stream_options.include_usage`; the usage chunk is sent unless this is false. */
  readonly includeUsage: boolean
}

/** Fields copied as they are: the same name, the same rules, in both requests. */
const SAME_FIELDS = [
  "model",
  "models",
  "temperature",
  "top_p",
  "top_k",
  "frequency_penalty",
  "presence_penalty",
  "max_tool_calls",
  "parallel_tool_calls",
  "provider",
  "plugins",
  "session_id",
  "user",
  "metadata",
  "debug",
  "cache_control",
  "prompt_cache_key",
  "safety_identifier",
  "service_tier",
  "image_config",
  "trace",
  "prompt_cache_options",
  "route",
  "stop_server_tools_when",
  "preset",
] as const satisfies ReadonlyArray<keyof ChatRequest & keyof ResponsesRequest>

/**
 * A decoded chat body → the Responses request and the chat-only options. `requireMessages`:
 * the data plane needs a conversation; a preset body may carry none.
 */
export const toResponsesRequest = (
  chat: ChatRequest,
  requireMessages: boolean,
): Result<{ readonly request: ResponsesRequest; readonly options: ChatOptions }> => {
  for (const [field, allowed, reason] of refusals) {
    const value = chat[field]
    if (value != null && !allowed(value)) return refuse(`${field}: ${reason}`)
  }
  if (chat.store === true) return refuse("store: only false is allowed (the service is stateless)")
  if (requireMessages && chat.messages.length === 0) return refuse("messages: at least one message is required")
  const input: Array<InputItem> = []
  for (let i = 0; i < chat.messages.length; i++) {
    const done = itemsOf(chat.messages[i], i, input)
    if (Either.isLeft(done)) return Either.left(done.left)
  }
  if (chat.max_tokens != null && chat.max_completion_tokens != null && chat.max_tokens !== chat.max_completion_tokens) {
    return refuse("max_tokens: contradicts max_completion_tokens; send one of them (max_tokens is deprecated)")
  }
  const effort = chat.reasoning_effort
  if (effort != null && chat.reasoning?.effort != null && chat.reasoning.effort !== effort) {
    return refuse("reasoning_effort: contradicts reasoning.effort; send one of them")
  }

  const out: Types.Mutable<Record<string, unknown>> = {}
  for (const field of SAME_FIELDS) if (chat[field] !== undefined) out[field] = chat[field]
  out.input = input
  out.stream = chat.stream === true
  out.store = false
  const maxTokens = chat.max_completion_tokens ?? chat.max_tokens
  if (maxTokens != null) out.max_output_tokens = maxTokens
  if (chat.tools != null) out.tools = chat.tools.map(toolOf)
  if (chat.tool_choice != null) out.tool_choice = toolChoiceOf(chat.tool_choice)
  if (chat.response_format != null || chat.verbosity != null) {
    const text: Types.Mutable<NonNullable<ResponsesRequest["text"]>> = {}
    if (chat.response_format != null) text.format = formatOf(chat.response_format)
    if (chat.verbosity != null) text.verbosity = chat.verbosity
    out.text = text
  }
  if (chat.reasoning != null || effort != null) out.reasoning = effort == null ? chat.reasoning : { ...chat.reasoning, effort }
  if (chat.modalities != null) out.modalities = chat.modalities
  return Either.right({
    // The fields above are the Responses request's, decoded by the same Schemas.
    request: out as ResponsesRequest,
    options: { includeUsage: includesUsage(chat.stream_options) },
  })
}

/** A body of POST /v1/chat/completions → the Responses request and the chat-only options, or a 400. */
const SIMPLE_KEYS = new Set(["model", "messages", "stream", "temperature", "top_p", "max_tokens", "max_completion_tokens"])
const SIMPLE_ROLES = new Set(["system", "developer", "user", "assistant"])
const between = (v: unknown, min: number, max: number) => typeof v === "number" && v >= min && v <= max
const positiveInt = (v: unknown) => Number.isInteger(v) && (v as number) >= 1

/**
 * The commonest body, checked in plain code: `model`, string-content messages of the four plain
 * roles, `stream`, `temperature`, `top_p` and a token bound, no other key, every value of its
 * type and range. The value is the Schema's for it (its fields in the Schema's order, `stream`
 * defaulted): ~1 µs instead of ~30 µs for the Schema's decode of a one-message body (Bun 1.4.5).
 * Any other body, or a value the Schema would refuse, is undefined here and goes to the Schema,
 * so every refusal keeps its message. `decodersForTest` holds the two equal.
 */
const decodeSimple = (body: unknown): ChatRequest | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const fields = body as Record<string, unknown>
  for (const name in fields) {
    if (!SIMPLE_KEYS.has(name) || !Object.hasOwn(fields, name) || fields[name] === undefined) return undefined
  }
  const { model, messages, stream, temperature, top_p, max_tokens, max_completion_tokens } = fields
  if (model !== undefined && typeof model !== "string") return undefined
  if (stream !== undefined && typeof stream !== "boolean") return undefined
  if (temperature !== undefined && !between(temperature, 0, 2)) return undefined
  if (top_p !== undefined && !between(top_p, 0, 1)) return undefined
  if (max_tokens !== undefined && !positiveInt(max_tokens)) return undefined
  if (max_completion_tokens !== undefined && !positiveInt(max_completion_tokens)) return undefined
  if (!Array.isArray(messages)) return undefined
  const decoded = new Array<ChatMessage>(messages.length)
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i]
    if (typeof m !== "object" || m === null || Array.isArray(m)) return undefined
    let keys = 0
    for (const name in m) {
      if ((name !== "role" && name !== "content") || !Object.hasOwn(m, name)) return undefined
      keys++
    }
    const { role, content } = m as { role?: unknown; content?: unknown }
    if (keys !== 2 || typeof role !== "string" || !SIMPLE_ROLES.has(role) || typeof content !== "string") return undefined
    decoded[i] = { role, content } as ChatMessage
  }
  const out: Types.Mutable<Record<string, unknown>> = {}
  if (model !== undefined) out.model = model
  out.messages = decoded
  out.stream = stream ?? false
  if (temperature !== undefined) out.temperature = temperature
  if (top_p !== undefined) out.top_p = top_p
  if (max_tokens !== undefined) out.max_tokens = max_tokens
  if (max_completion_tokens !== undefined) out.max_completion_tokens = max_completion_tokens
  return out as unknown as ChatRequest
}

/** The Schema's decoder and the plain one, for the test that holds them equal. */
export const decodersForTest = { schema: decodeShape, simple: decodeSimple } as const

export const decodeChatBody = (
  body: unknown,
): Result<{ readonly request: ResponsesRequest; readonly options: ChatOptions }> => {
  const simple = decodeSimple(body)
  return simple !== undefined ? toResponsesRequest(simple, true) : Either.flatMap(decodeShape(body), (chat) => toResponsesRequest(chat, true))
}

/** A preset version's body (POST /v1/presets/{slug}/chat/completions): messages may be empty. */
export const decodeChatPresetBody = (body: unknown): Result<ResponsesRequest> =>
  Either.flatMap(decodeShape(body), (chat) => Either.map(toResponsesRequest(chat, false), ({ request }) => request))
