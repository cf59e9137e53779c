/**
 * Wire shapes of POST /v1/responses: the request (validator, type and documentation in one
 * Schema, built once at module level) and the result with its output items (what strict
 * clients require, wire-compat.md). Messages name the field and the rule a caller broke.
 */
import { Either, Schema } from "effect"
import { BadRequest } from "./errors.js"
import { makeDecoder } from "./validation.js"
import { rule, oneOf, nullableOneOf, maxChars, withinChars, nonEmpty, intBetween, intAtLeast, numberBetween, nullable, AnyRecord, objectOf, otherKind } from "./schema-rules.js"

// ---------------------------------------------------------------------------------------------
// Request: shared pieces
// ---------------------------------------------------------------------------------------------

export const CacheControl = Schema.Struct({
  type: oneOf("ephemeral"),
  ttl: Schema.optional(oneOf("5m", "1h")),
})
export type CacheControl = typeof CacheControl.Type

const cacheable = { cache_control: Schema.optional(CacheControl) }

// Content parts of a message (input parts, and output parts for assistant history).
export const InputTextPart = Schema.Struct({ type: Schema.Literal("input_text"), text: Schema.String, ...cacheable })

const DATA_URL = /^data:([^;,]+)(?:;[^,]*)?;base64,/

/**
 * A `data:<media type>[;parameters];base64,<data>` URL's media type and data: the one form of data
 * URL the adapters send inline (an image, a file); undefined for any other URL.
 */
export const base64DataUrl = (url: string): { readonly mediaType: string; readonly data: string } | undefined => {
  const match = DATA_URL.exec(url)
  return match === null ? undefined : { mediaType: match[1] as string, data: url.slice(match[0].length) }
}

/** Whether a URL that says it is a `data:` URL (in any case) is one the adapters read, with data: one that is not went upstream as a plain URL. */
const isWellFormedDataUrl = (url: string): boolean =>
  url.length < 5 || url.slice(0, 5).toLowerCase() !== "data:" || (base64DataUrl(url)?.data ?? "") !== ""

export const InputImagePart = Schema.Struct({
  type: Schema.Literal("input_image"),
  image_url: nullable(Schema.String),
  file_id: nullable(Schema.String),
  detail: Schema.optional(oneOf("auto", "low", "high")),
  ...cacheable,
}).pipe(
  Schema.filter((p) =>
    p.image_url == null
      ? p.file_id != null || "input_image needs image_url or file_id"
      : isWellFormedDataUrl(p.image_url) || { path: ["image_url"], message: "a data URL must be data:<media type>;base64,<data>" },
  ),
)

export const InputFilePart = Schema.Struct({
  type: Schema.Literal("input_file"),
  file_data: nullable(Schema.String),
  file_url: nullable(Schema.String),
  file_id: nullable(Schema.String),
  filename: nullable(Schema.String),
  ...cacheable,
}).pipe(
  Schema.filter(
    (p) => p.file_data != null || p.file_url != null || p.file_id != null || "input_file needs file_data, file_url or file_id",
  ),
)

/**
 * The file-parser's annotation of a parsed file (the hosted service's shape): on the answer's text
 * (Responses `output_text.annotations`, Chat `message.annotations`, a Messages text block's
 * `annotations`); sent back on an assistant turn with the same file, it spares the parse.
 */
export const FileAnnotation = Schema.Struct({
  type: Schema.Literal("file"),
  file: Schema.Struct({
    hash: Schema.String,
    name: Schema.String,
    content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  }),
})
export type FileAnnotation = typeof FileAnnotation.Type

const isFileAnnotation = Schema.is(FileAnnotation)

/** The `file` annotations among what a client sent back (other kinds, an answer's own citations, are not carried). */
export const fileAnnotationsIn = (annotations: unknown): ReadonlyArray<FileAnnotation> =>
  Array.isArray(annotations) ? annotations.filter(isFileAnnotation) : []

export const OutputTextPart = Schema.Struct({
  type: Schema.Literal("output_text"),
  text: Schema.String,
  annotations: Schema.optional(Schema.Array(Schema.Unknown)),
  logprobs: Schema.optional(Schema.Array(Schema.Unknown)),
  ...cacheable,
})

export const RefusalPart = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String, ...cacheable })

export const ContentPartInput = objectOf(
  "a content part object with a type",
  Schema.Union(InputTextPart, InputImagePart, InputFilePart, OutputTextPart, RefusalPart),
)
export type ContentPartInput = typeof ContentPartInput.Type

// ---------------------------------------------------------------------------------------------
// Request: input items
// ---------------------------------------------------------------------------------------------

export const MessageItem = Schema.Struct({
  type: Schema.Literal("message"),
  role: oneOf("user", "assistant", "system", "developer"),
  content: Schema.Union(
    Schema.Array(ContentPartInput).annotations({ message: () => "a string, an array of content parts, or null" }),
    Schema.String,
    Schema.Null,
  ),
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
})
export type MessageItem = typeof MessageItem.Type

export const FunctionCallItem = Schema.Struct({
  type: Schema.Literal("function_call"),
  call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  id: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
})
export type FunctionCallItem = typeof FunctionCallItem.Type

export const FunctionCallOutputItem = Schema.Struct({
  type: Schema.Literal("function_call_output"),
  call_id: Schema.String,
  output: Schema.Union(
    Schema.Array(ContentPartInput).annotations({ message: () => "a string or an array of content parts" }),
    Schema.String,
  ),
  id: nullable(Schema.String),
  status: nullable(Schema.String),
})
export type FunctionCallOutputItem = typeof FunctionCallOutputItem.Type

export const SummaryText = Schema.Struct({ type: Schema.Literal("summary_text"), text: Schema.String })

export const ReasoningItem = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: Schema.optional(Schema.String),
  summary: Schema.optionalWith(Schema.Array(SummaryText), { default: () => [] }),
  encrypted_content: nullable(Schema.String),
  /** Whose token `encrypted_content` is (`ANTHROPIC_REASONING`, `openai-responses-v1`, …): an upstream of another family is not sent it. */
  format: nullable(Schema.String),
  status: Schema.optional(Schema.String),
})
export type ReasoningItem = typeof ReasoningItem.Type

/**
 * A reasoning block whose text the upstream withheld (Anthropic's `redacted_thinking`) reaches a
 * Responses or Chat client as `encrypted_content` (a `reasoning.encrypted` detail) with this mark
 * before its data, so that, sent back, it goes upstream as the redacted block it was, not as the
 * signature of an empty one. No provider's token has a colon (they are base64).
 */
export const REDACTED_REASONING = "redacted_thinking:"

/**
 * The `format` of reasoning sealed by Claude (on Anthropic or Bedrock), as this API family names
 * it: the item or detail that carries the seal says so, and a client gives it back, so that a
 * conversation moved to another family's model (a fallback, a switch) does not send it a token it
 * refuses, nor Claude another's.
 */
export const ANTHROPIC_REASONING = "anthropic-claude-v1"

/** The formats of OpenAI's encrypted reasoning (its own API's and Azure's), which an `openai-responses` upstream takes back. */
export const OPENAI_REASONING: ReadonlyArray<string> = ["openai-responses-v1", "azure-openai-responses-v1"]

/** Whether reasoning of `format` (undefined: the client did not say) can go to an upstream of `family`. */
export const reasoningFits = (format: string | undefined, ...family: ReadonlyArray<string>): boolean =>
  format === undefined || family.includes(format)

/** The token a client gets for a reasoning block's seal (`reasoning_signature`): marked when the block was redacted. */
export const sealToken = (signature: string, redacted: boolean | undefined): string =>
  redacted === true ? REDACTED_REASONING + signature : signature

export const ItemReference = Schema.Struct({ type: Schema.Literal("item_reference"), id: Schema.String })
export type ItemReference = typeof ItemReference.Type

const knownItemKinds: ReadonlySet<string> = new Set([
  "message",
  "function_call",
  "function_call_output",
  "reasoning",
  "item_reference",
])

/** Any other item kind of the contract (web_search_call, mcp_call, …): decoded, refused by the normalizer. */
export const OtherItem = Schema.Struct({ type: otherKind(knownItemKinds) }, AnyRecord)
export type OtherItem = typeof OtherItem.Type

export type KnownInputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem | ItemReference

/** A message without `type` is a message (the "easy input message" form). */
const withMessageDefault = Schema.transform(Schema.Object.annotations(rule("an input item object")), Schema.Object, {
  strict: true,
  decode: (item) => ("type" in item ? item : { ...item, type: "message" }),
  encode: (item) => item,
})

export const InputItem = Schema.compose(
  withMessageDefault,
  Schema.Union(MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem, ItemReference, OtherItem),
  { strict: false },
)
export type InputItem = typeof InputItem.Type

/** Narrows an item to the kinds modelled field by field (`type` alone cannot: the catch-all's is `string`). */
export const isKnownInputItem = (item: InputItem): item is KnownInputItem => knownItemKinds.has(item.type)

// ---------------------------------------------------------------------------------------------
// Request: tools, tool choice, text, reasoning
// ---------------------------------------------------------------------------------------------

export const FunctionToolInput = Schema.Struct({
  type: Schema.Literal("function"),
  name: nonEmpty,
  description: nullable(Schema.String),
  parameters: nullable(AnyRecord),
  strict: nullable(Schema.Boolean),
})
export type FunctionToolInput = typeof FunctionToolInput.Type

/** Web search, file search, MCP, server tools, …: accepted with every field kept (echoed in the result). */
const functionKind: ReadonlySet<string> = new Set(["function"])
export const OtherTool = Schema.Struct({ type: otherKind(functionKind) }, AnyRecord)
export type OtherTool = typeof OtherTool.Type

export const ToolInput = objectOf("a tool object with a type", Schema.Union(FunctionToolInput, OtherTool))
export type ToolInput = typeof ToolInput.Type

export const isFunctionTool = (tool: ToolInput): tool is FunctionToolInput => tool.type === "function"

const toolChoiceRule = `"auto", "none", "required", or a tool choice object such as {type: "function", name}`

export const FunctionToolChoice = Schema.Struct({ type: Schema.Literal("function"), name: Schema.String })
export type FunctionToolChoice = typeof FunctionToolChoice.Type
export const OtherToolChoice = Schema.Struct({ type: otherKind(functionKind) }, AnyRecord)

export const ToolChoiceInput = Schema.Union(
  objectOf(toolChoiceRule, Schema.Union(FunctionToolChoice, OtherToolChoice)),
  Schema.Literal("auto", "none", "required").annotations(rule(toolChoiceRule)),
)
export type ToolChoiceInput = typeof ToolChoiceInput.Type

export const isFunctionToolChoice = (choice: ToolChoiceInput): choice is FunctionToolChoice =>
  typeof choice === "object" && choice.type === "function"

export const TextFormat = objectOf(
  "a format object with a type",
  Schema.Union(
    Schema.Struct({ type: Schema.Literal("text") }),
    Schema.Struct({ type: Schema.Literal("json_object") }),
    Schema.Struct({
      type: Schema.Literal("json_schema"),
      name: Schema.String,
      schema: AnyRecord,
      description: Schema.optional(Schema.String),
      strict: nullable(Schema.Boolean),
    }),
  ),
)
export type TextFormat = typeof TextFormat.Type

export const TextConfig = Schema.Struct({
  format: Schema.optional(TextFormat),
  verbosity: Schema.optional(nullableOneOf("low", "medium", "high")),
})
export type TextConfig = typeof TextConfig.Type

export const ReasoningInput = Schema.Struct({
  effort: Schema.optional(nullableOneOf("none", "minimal", "low", "medium", "high", "xhigh")),
  summary: Schema.optional(nullableOneOf("auto", "concise", "detailed")),
  enabled: nullable(Schema.Boolean),
  max_tokens: nullable(intAtLeast(0)),
})
export type ReasoningInput = typeof ReasoningInput.Type

// ---------------------------------------------------------------------------------------------
// Request: provider routing preferences (as clients send them, wire-compat.md)
// ---------------------------------------------------------------------------------------------

/** USD per million tokens; clients send numbers or numeric strings. Decodes to a number. */
const PriceLimit = Schema.Union(Schema.Number, Schema.NumberFromString)
  .annotations(rule("a number or a numeric string"))
  .pipe(Schema.filter((n) => (Number.isFinite(n) && n >= 0) || "a non-negative amount"))

const sortRule = "one of price, throughput, latency, exacto, or {by, partition}"
const sortBy = ["price", "throughput", "latency", "exacto"] as const

const Percentiles = Schema.Record({ key: Schema.String, value: Schema.Number }).annotations({
  message: () => "a number or an object of percentile numbers",
})

export const ProviderPreferences = Schema.Struct({
  order: nullable(Schema.Array(Schema.String)),
  only: nullable(Schema.Array(Schema.String)),
  ignore: nullable(Schema.Array(Schema.String)),
  allow_fallbacks: Schema.optionalWith(Schema.Boolean, { nullable: true, default: () => true }),
  require_parameters: Schema.optionalWith(Schema.Boolean, { nullable: true, default: () => false }),
  data_collection: Schema.optional(nullableOneOf("allow", "deny")),
  zdr: nullable(Schema.Boolean),
  quantizations: nullable(Schema.Array(Schema.String)),
  sort: nullable(
    Schema.Union(
      Schema.Struct({ by: oneOf(...sortBy), partition: Schema.optional(nullableOneOf("model", "none")) }).annotations({
        message: () => sortRule,
      }),
      Schema.Literal(...sortBy).annotations(rule(sortRule)),
    ),
  ),
  preferred_min_throughput: nullable(Schema.Union(Percentiles, Schema.Number)),
  preferred_max_latency: nullable(Schema.Union(Percentiles, Schema.Number)),
  max_price: Schema.optional(
    objectOf(
      "an object of amounts: {prompt?, completion?, request?, image?}",
      Schema.Struct({
        prompt: Schema.optional(PriceLimit),
        completion: Schema.optional(PriceLimit),
        request: Schema.optional(PriceLimit),
        image: Schema.optional(PriceLimit),
      }),
    ),
  ),
})
export type ProviderPreferences = typeof ProviderPreferences.Type
/** `provider` as a request carries it: a value that is no object is refused with the rule, not the Struct's text. */
export const ProviderField = objectOf("an object of provider preferences (order, only, ignore, sort, max_price, …)", ProviderPreferences)

// ---------------------------------------------------------------------------------------------
// Request: plugins
// ---------------------------------------------------------------------------------------------

/**
 * An entry of `plugins` as the domain sees it: an object; its `id` and its own fields are each
 * plugin's Schema, assembled from the plugin registry above the domain (src/pipeline/plugins/index.ts:
 * the request's plugins are decoded there, right after the body, with the same messages).
 */
export interface PluginEntry {
  readonly id: string
  /** Filled in (default true) once the registry has decoded the entry. */
  readonly enabled?: boolean
  readonly [field: string]: unknown
}
export const PluginEntry = AnyRecord.annotations({ message: () => "a plugin object with an id" }) as unknown as Schema.Schema<
  PluginEntry,
  PluginEntry
>

// ---------------------------------------------------------------------------------------------
// Request: metadata and the request itself
// ---------------------------------------------------------------------------------------------

const METADATA_PAIRS = 16
const METADATA_KEY = 64
const METADATA_VALUE = 512

/**
 * `JSON.parse` makes a `"__proto__"` key an own key; a Record's decode assigns it, which sets the
 * prototype instead: the pair vanished and did not count toward the 16. Refused before it.
 */
const NoProtoKey = Schema.Unknown.pipe(
  Schema.filter((u) => typeof u !== "object" || u === null || !Object.hasOwn(u, "__proto__") || "key __proto__ is not allowed"),
)

/** String keys and values; at most 16 pairs; key ≤ 64 characters without brackets; value ≤ 512. */
export const Metadata = Schema.compose(NoProtoKey, Schema.Record({ key: Schema.String, value: Schema.String }), { strict: false }).pipe(
  Schema.filter((m) => {
    const keys = Object.keys(m)
    if (keys.length > METADATA_PAIRS) return `at most ${METADATA_PAIRS} pairs`
    for (const key of keys) {
      if (!withinChars(key, METADATA_KEY)) return `key at most ${METADATA_KEY} characters`
      if (key.includes("[") || key.includes("]")) return `key must not contain brackets ([ or ])`
      if (!withinChars(m[key], METADATA_VALUE)) return { path: [key], message: `value at most ${METADATA_VALUE} characters` }
    }
    return undefined
  }),
)

const serviceTiers = ["auto", "default", "flex", "priority", "scale"] as const
const includables = [
  "file_search_call.results",
  "message.input_image.image_url",
  "computer_call_output.output.image_url",
  "reasoning.encrypted_content",
  "code_interpreter_call.outputs",
] as const

const ImageConfigValue = Schema.Union(Schema.String, Schema.Number, Schema.Array(Schema.Unknown)).annotations(
  rule("a string, a number, or an array"),
)

/** The body of POST /v1/responses. No field is required; unknown keys are ignored. */
export const ResponsesRequest = Schema.Struct({
  model: Schema.optional(Schema.String),
  models: Schema.optional(Schema.Array(Schema.String)),
  input: Schema.optional(
    Schema.Union(
      Schema.Array(InputItem).annotations({ message: () => "a string or an array of input items" }),
      Schema.String,
    ),
  ),
  instructions: nullable(Schema.String),
  stream: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Only false is allowed: `decodeResponsesRequest` refuses true (the service is stateless). */
  store: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  background: nullable(Schema.Boolean),
  temperature: nullable(numberBetween(0, 2)),
  top_p: nullable(numberBetween(0, 1)),
  top_k: nullable(intAtLeast(0)),
  top_logprobs: nullable(intBetween(0, 20)),
  frequency_penalty: nullable(numberBetween(-2, 2)),
  presence_penalty: nullable(numberBetween(-2, 2)),
  max_output_tokens: nullable(intAtLeast(1)),
  max_tool_calls: nullable(intAtLeast(0)),
  parallel_tool_calls: nullable(Schema.Boolean),
  previous_response_id: nullable(Schema.String),
  prompt_cache_key: nullable(Schema.String),
  safety_identifier: nullable(Schema.String),
  service_tier: Schema.optional(nullableOneOf(...serviceTiers)),
  include: nullable(Schema.Array(oneOf(...includables))),
  modalities: Schema.optional(Schema.Array(oneOf("text", "image"))),
  image_config: Schema.optional(Schema.Record({ key: Schema.String, value: ImageConfigValue })),
  metadata: nullable(Metadata),
  session_id: Schema.optional(maxChars(256)),
  user: Schema.optional(maxChars(256)),
  debug: Schema.optional(objectOf("an object: {echo_upstream_body?: boolean}", Schema.Struct({ echo_upstream_body: Schema.optional(Schema.Boolean) }))),
  cache_control: Schema.optional(CacheControl),
  plugins: Schema.optional(Schema.Array(PluginEntry)),
  tools: Schema.optional(Schema.compose(Schema.Array(Schema.Unknown).annotations(rule("an array of tools")), Schema.Array(ToolInput), { strict: false })),
  tool_choice: Schema.optional(ToolChoiceInput),
  text: Schema.optional(objectOf("an object: {format?, verbosity?}", TextConfig)),
  reasoning: nullable(objectOf("an object: {effort?, summary?, enabled?, max_tokens?}", ReasoningInput)),
  provider: nullable(ProviderField),
  // Listed by the contract without a structure: accepted as given.
  prompt: Schema.optional(Schema.Unknown),
  prompt_cache_options: Schema.optional(Schema.Unknown),
  /** Deprecated; accepted. */
  route: Schema.optional(Schema.Unknown),
  stop_server_tools_when: Schema.optional(Schema.Unknown),
  trace: Schema.optional(Schema.Unknown),
  truncation: Schema.optional(Schema.Unknown),
  /** Our extension: the slug of a preset whose configuration this request starts from. */
  preset: Schema.optional(nonEmpty),
})
export type ResponsesRequest = typeof ResponsesRequest.Type

const BodyObject = AnyRecord.annotations(rule("the body must be a JSON object"))
/** A body that is not a JSON object gets one plain message instead of the Struct's type dump. */
const decodeWhole = makeDecoder(Schema.compose(BodyObject, ResponsesRequest, { strict: false }))

type Field = keyof typeof ResponsesRequest.fields
const FIELDS = Object.keys(ResponsesRequest.fields) as Array<Field>
const FIELD_INDEX = new Map<string, number>(FIELDS.map((name, i) => [name, i]))
/** Fields with a default: always in a subset, so the default applies when the body leaves them out. */
const DEFAULTED = [FIELD_INDEX.get("stream"), FIELD_INDEX.get("store")] as Array<number>
/** Decoders of the Struct cut to one set of fields, by the set (field indexes in schema order). */
const bySubset = new Map<string, (input: unknown) => Either.Either<ResponsesRequest, BadRequest>>()
/** Distinct sets of fields seen beyond this many are decoded whole: the cache cannot be grown by callers. */
const MAX_SUBSETS = 256
/**
 * The cut is sound only while no field is required: an empty body decodes. (A rule across fields
 * would make `ResponsesRequest` a filter, which has no `fields`: this file would not compile.)
 */
const CUTTABLE = Either.isRight(decodeWhole({}))

/**
 * The body decoded by the Struct cut to the fields it has. Every field of `ResponsesRequest` is
 * optional and the Struct has no rule across fields, so a field the body leaves out adds nothing
 * to the result and cannot fail it: the cut Struct succeeds with the same value exactly when the
 * whole one does. The whole Struct visits all 45 fields per body (~3.6 µs for a two-field body);
 * the cut one only those given (~2.5 µs). A failure is decoded again whole, so the message is the
 * whole Struct's whatever path found it. Bodies are `JSON.parse` output, whose own keys are all
 * enumerable (an object with a hidden own `stream` would be read differently by the two).
 * The first 256 sets of fields seen are cached for the life of the process; later sets are
 * decoded whole (correct, only slower), so no caller can make the cache grow. The commonest body
 * (model and a string input) does not reach the Struct at all: see `decodeSimple`.
 */
const decodeShape = (input: unknown): Either.Either<ResponsesRequest, BadRequest> => {
  if (!CUTTABLE || typeof input !== "object" || input === null || Array.isArray(input)) return decodeWhole(input)
  const simple = decodeSimple(input)
  if (simple !== undefined) return Either.right(simple)
  const present = [...DEFAULTED]
  for (const name of Object.keys(input)) {
    const at = FIELD_INDEX.get(name)
    if (at !== undefined && !DEFAULTED.includes(at)) present.push(at)
  }
  present.sort((a, b) => a - b)
  const key = present.join(",")
  let decode = bySubset.get(key)
  if (decode === undefined) {
    if (bySubset.size >= MAX_SUBSETS) return decodeWhole(input)
    const fields = Object.fromEntries(present.map((at) => [FIELDS[at], ResponsesRequest.fields[FIELDS[at] as Field]]))
    // The cut Struct's type is ResponsesRequest without the fields the body does not have (all optional).
    // The body is known to be an object here: no record stage before the Struct.
    decode = makeDecoder(Schema.Struct(fields)) as unknown as (
      input: unknown,
    ) => Either.Either<ResponsesRequest, BadRequest>
    bySubset.set(key, decode)
  }
  const decoded = decode(input)
  return Either.isRight(decoded) ? decoded : decodeWhole(input)
}

const SIMPLE_KEYS = new Set(["model", "input", "stream", "store"])

/**
 * The commonest body, checked in plain code: `model` and `input` strings, `stream` and `store`
 * booleans, no other key. The value is the Struct's for it (its fields in the Struct's order, the
 * two defaults filled in): ~0.1 µs instead of ~2 µs. Any other body, or a value of another type,
 * is undefined here and goes to the Struct.
 */
const decodeSimple = (body: object): ResponsesRequest | undefined => {
  const fields = body as Record<string, unknown>
  for (const name in fields) {
    if (!SIMPLE_KEYS.has(name) || !Object.hasOwn(fields, name) || fields[name] === undefined) return undefined
  }
  const { model, input, stream, store } = fields
  if (model !== undefined && typeof model !== "string") return undefined
  if (input !== undefined && typeof input !== "string") return undefined
  if (stream !== undefined && typeof stream !== "boolean") return undefined
  if (store !== undefined && typeof store !== "boolean") return undefined
  // Built in the Struct's field order: JSON made from the request keeps its key order.
  const out: { model?: string; input?: string; stream?: boolean; store?: boolean } = {}
  if (model !== undefined) out.model = model
  if (input !== undefined) out.input = input
  out.stream = stream ?? false
  out.store = store ?? false
  return out as ResponsesRequest
}

/** The whole Struct's decoder and the cut one, for the test that holds them equal. */
export const decodersForTest = { whole: decodeWhole, cut: decodeShape, simple: decodeSimple, subsets: () => bySubset.size, cuttable: CUTTABLE } as const

/** Decodes a request body and applies the rules that make the service stateless. */
export const decodeResponsesRequest = (input: unknown): Either.Either<ResponsesRequest, BadRequest> =>
  Either.flatMap(decodeShape(input), (req) => {
    if (req.store) {
      return Either.left(new BadRequest({ message: "Invalid request: store: only false is allowed (the service is stateless)" }))
    }
    if (req.previous_response_id != null) {
      return Either.left(
        new BadRequest({
          message: "Invalid request: previous_response_id: not supported; the service is stateless, send the full input",
        }),
      )
    }
    return Either.right(req)
  })

/**
 * The refusal of a request with neither `input` nor `prompt` (nothing to answer): a Chat
 * Completions body (`messages`) was answered "Echo: " and billed. Preset bodies carry no input,
 * so this is checked on POST /v1/responses only, after the preset is applied.
 */
export const missingInput = (body: unknown): BadRequest =>
  new BadRequest({
    message:
      typeof body === "object" && body !== null && "messages" in body
        ? 'Invalid request: input: is missing; `messages` is a Chat Completions field: send this body to POST /v1/chat/completions, or send the conversation as `input`, a string or items like {"type":"message","role":"user","content":"…"}'
        : "Invalid request: input: is missing (send `input`, a string or an array of input items, or `prompt`)",
  })

// ---------------------------------------------------------------------------------------------
// Result (non-streaming body, and the `response` of lifecycle stream events)
// ---------------------------------------------------------------------------------------------

export const ItemStatus = Schema.Literal("in_progress", "completed", "incomplete")
export type ItemStatus = typeof ItemStatus.Type

export const OutputText = Schema.Struct({
  type: Schema.Literal("output_text"),
  text: Schema.String,
  annotations: Schema.Array(Schema.Unknown),
  logprobs: Schema.Array(Schema.Unknown),
})
export type OutputText = typeof OutputText.Type

export const OutputRefusal = Schema.Struct({ type: Schema.Literal("refusal"), refusal: Schema.String })

export const OutputMessage = Schema.Struct({
  type: Schema.Literal("message"),
  id: Schema.String,
  role: Schema.Literal("assistant"),
  status: ItemStatus,
  content: Schema.Array(Schema.Union(OutputText, OutputRefusal)),
})
export type OutputMessage = typeof OutputMessage.Type

export const OutputReasoning = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: Schema.String,
  summary: Schema.Array(SummaryText),
  encrypted_content: Schema.optional(Schema.NullOr(Schema.String)),
  format: Schema.optional(Schema.String),
  status: Schema.optional(ItemStatus),
})
export type OutputReasoning = typeof OutputReasoning.Type

export const OutputFunctionCall = Schema.Struct({
  type: Schema.Literal("function_call"),
  id: Schema.String,
  call_id: Schema.String,
  name: Schema.String,
  /** A JSON string. */
  arguments: Schema.String,
  status: ItemStatus,
})
export type OutputFunctionCall = typeof OutputFunctionCall.Type

/** A server tool's call as its client sees it (`openrouter:datetime`, …: the official SDK's item schemas). */
export const OutputServerToolItem = Schema.Struct(
  {
    type: Schema.TemplateLiteral("openrouter:", Schema.String),
    id: Schema.String,
    status: ItemStatus,
  },
  AnyRecord,
)
export type OutputServerToolItem = typeof OutputServerToolItem.Type

export const OutputItem = Schema.Union(OutputMessage, OutputReasoning, OutputFunctionCall, OutputServerToolItem)
export type OutputItem = typeof OutputItem.Type

export const ResponseUsage = Schema.Struct({
  input_tokens: Schema.Int,
  input_tokens_details: Schema.Struct({ cached_tokens: Schema.Int }),
  output_tokens: Schema.Int,
  output_tokens_details: Schema.Struct({ reasoning_tokens: Schema.Int }),
  total_tokens: Schema.Int,
  /** USD. */
  cost: Schema.optional(Schema.Number),
  is_byok: Schema.optional(Schema.Boolean),
  /** Server tools of the request: calls the model asked for, calls run, web searches made. */
  server_tool_use_details: Schema.optional(
    Schema.Struct({ tool_calls_requested: Schema.Int, tool_calls_executed: Schema.Int, web_search_requests: Schema.Int }),
  ),
})
export type ResponseUsage = typeof ResponseUsage.Type

export const ResultToolChoice = Schema.Union(Schema.Literal("auto", "none", "required"), FunctionToolChoice)
export type ResultToolChoice = typeof ResultToolChoice.Type

export const ResultFunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  parameters: Schema.NullOr(AnyRecord),
  strict: Schema.NullOr(Schema.Boolean),
})
export const ResultTool = Schema.Union(ResultFunctionTool, Schema.Struct({ type: Schema.String }, AnyRecord))
export type ResultTool = typeof ResultTool.Type

export const ResultText = Schema.Struct({
  format: Schema.Union(
    Schema.Struct({ type: Schema.Literal("text") }),
    Schema.Struct({ type: Schema.Literal("json_object") }),
    Schema.Struct({
      type: Schema.Literal("json_schema"),
      name: Schema.String,
      schema: AnyRecord,
      description: Schema.optional(Schema.String),
      strict: Schema.optional(Schema.NullOr(Schema.Boolean)),
    }),
  ),
  verbosity: Schema.optional(Schema.NullOr(Schema.String)),
})
export type ResultText = typeof ResultText.Type

export const ResponseStatus = Schema.Literal("completed", "incomplete", "in_progress", "failed", "cancelled", "queued")
export type ResponseStatus = typeof ResponseStatus.Type

export const ResponseResult = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("response"),
  created_at: Schema.Int,
  completed_at: Schema.NullOr(Schema.Int),
  model: Schema.String,
  status: ResponseStatus,
  output: Schema.Array(OutputItem),
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  incomplete_details: Schema.NullOr(Schema.Struct({ reason: Schema.String })),
  instructions: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  temperature: Schema.NullOr(Schema.Number),
  top_p: Schema.NullOr(Schema.Number),
  frequency_penalty: Schema.NullOr(Schema.Number),
  presence_penalty: Schema.NullOr(Schema.Number),
  parallel_tool_calls: Schema.Boolean,
  tool_choice: ResultToolChoice,
  tools: Schema.Array(ResultTool),
  usage: Schema.optional(Schema.NullOr(ResponseUsage)),
  max_output_tokens: Schema.NullOr(Schema.Int),
  service_tier: Schema.NullOr(Schema.String),
  text: ResultText,
  /** Routing metadata; only when the caller enables it with `X-Service-Metadata: enabled`. */
  service_metadata: Schema.optional(AnyRecord),
  /** The same object, when asked for with the official SDK's header (`X-OpenRouter-Metadata`). */
  openrouter_metadata: Schema.optional(AnyRecord),
  error_type: Schema.optional(Schema.String),
})
export type ResponseResult = typeof ResponseResult.Type
