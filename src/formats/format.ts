/**
 * The seam between a client format and the request path (docs/pipeline.md): ingress decodes a format's
 * body into the one normalized request (the Responses request: presets, guardrails, routing and
 * money work on it), egress encodes the one normalized event stream (`ProviderEvent`s from any
 * upstream) into the format's JSON result or SSE events. `ResponseAssembler` is the Responses
 * encoder; Chat Completions and Messages each add a `ClientFormat` beside it.
 *
 * Encoders are plain classes: `push` runs per upstream read on the hot path (an Effect step per chunk costs 15-20 µs).
 */
import type { Either } from "effect"
import { type ApiError, errorHeaders, ServiceUnavailable } from "../domain/errors.js"
import type { FileAnnotation, ResponsesRequest } from "../domain/responses.js"
import type { FinishReason, ProviderEvent } from "../providers/types.js"
import type { Usage } from "../domain/pricing.js"
import type { ServerToolProgressEvent } from "../tools/types.js"

/** What the route adds when an answer ends: the charged usage and cost, and routing metadata when asked. */
export interface FinishExtras {
  /** Overrides the last usage event of the upstream (what the key is charged). */
  readonly usage?: Usage
  /** USD. */
  readonly cost?: number
  readonly isByok?: boolean
  /** Only when the caller enabled it (`X-Service-Metadata: enabled`). */
  readonly serviceMetadata?: Record<string, unknown>
  /** Enabled with the official SDK's header: the metadata also goes under `openrouter_metadata`. */
  readonly metadataAlias?: boolean
  /** The server-tool loop ran (docs/server-tools.md): its counts, for `usage.server_tool_use_details`. */
  readonly serverToolUse?: ServerToolUse
  /** The answer ends `incomplete` for this reason whatever the upstream's finish reason (the loop's `max_cost`). */
  readonly incompleteReason?: string
}

export interface ServerToolUse {
  readonly tool_calls_requested: number
  readonly tool_calls_executed: number
  readonly web_search_requests: number
}

/** A link the answer may cite: a match becomes a `url_citation` annotation (formats that have them). */
export interface CitableLink {
  readonly url: string
  readonly title: string
}

/** A failure after the first byte of a stream. */
export interface StreamFailure {
  /** A string code, e.g. `server_error`, `rate_limit_exceeded`, `timeout`, `server_shutting_down`. */
  readonly code: string
  readonly message: string
}

/** How an answer ended, as the record and the router see it. */
export type EncodedStatus = "in_progress" | "completed" | "incomplete" | "failed" | "cancelled" | "queued"

/**
 * One answer in one client format. Built per request; streaming (`stream: true`) every method
 * returns the SSE text to write (or UTF-8 bytes: a view valid until the next `push` of any
 * encoder, written to the socket at once, where it is copied); not streaming they return "" and
 * only `result()` is built.
 */
export interface Encoder {
  /** The stream's opening events (Responses: created + in_progress; Chat: nothing or a role chunk; Messages: message_start). */
  start(): string
  /** One upstream batch, or its events `[from, to)`. */
  push(events: ReadonlyArray<ProviderEvent>, from?: number, to?: number): string | Uint8Array
  /** The terminal events (and `[DONE]` where the format has it). */
  finish(extras?: FinishExtras): string
  /** A failure after the first byte, in the format's own terms, and the stream's end. */
  fail(failure: StreamFailure, extras?: FinishExtras): string
  /** The JSON body of a non-streamed answer (after `finish`). */
  result(): unknown
  /** What the route and the record read. */
  readonly status: EncodedStatus
  readonly ended: boolean
  readonly usage: Usage | undefined
  readonly finishReason: FinishReason | undefined
  readonly completionText: string
  readonly reasoningText: string
  /**
   * A server tool's call starts, before it runs: its output item (the official SDK's, given its
   * id here) opens after what came before it, in progress (Responses: `output_item.added`, then
   * `response.<eventPrefix>.in_progress` when the tool has progress events). Formats without such
   * items leave these three methods out (Chat, Messages: the loop's final text is their answer).
   */
  serverToolStarted?(opening: ServerToolOpening): ServerToolCall
  /** A progress event of the running call, as the SSE text to write now ("" when not streaming). */
  serverToolProgress?(call: ServerToolCall, progress: ServerToolProgressEvent): string
  /**
   * The call ran: `item` (without `id`) takes the started item's place in the output (Responses:
   * `response.<eventPrefix>.completed` when it completed, then `output_item.done`, same id and index).
   */
  serverToolDone?(call: ServerToolCall, item: Readonly<Record<string, unknown>>): string
  /** Links the answer may cite from here on (the tools' `citable`), for `url_citation` annotations. */
  cite?(links: ReadonlyArray<CitableLink>): void
  /**
   * The stream's first event when `debug.echo_upstream_body` asks for the body sent upstream, in
   * the format's own terms (default: the Responses `debug` event).
   */
  debugChunk?(upstreamBody: unknown): string
}

/** What a server tool's item is when it starts (the loop's, from the tool). */
export interface ServerToolOpening {
  /** The item with its `type` (`openrouter:…`) and what is known before the call runs; no `id` or `status`. */
  readonly item: Readonly<Record<string, unknown>>
  /** The prefix of the SDK's progress events for it (`web_search_call`); absent: none. */
  readonly eventPrefix?: string | undefined
}

/** A server tool's started item, until its done. */
export interface ServerToolCall {
  readonly id: string
  readonly outputIndex: number
  readonly eventPrefix: string | undefined
  /** The SSE text that opened it, to write now ("" when not streaming). */
  readonly sse: string
}

export interface EncoderOptions {
  readonly stream: boolean
  /** The model id the answer names (the routed endpoint's model id). */
  readonly model: string
  /** The provider that answers (the routed endpoint's provider id), for formats whose answer names it. */
  readonly provider?: string
  /**
   * Annotations of the answer's text, known before the model is called (the file-parser's `file`
   * annotations): on its first text part (Responses `output_text`, Chat `message`, a Messages text block).
   */
  readonly annotations?: ReadonlyArray<FileAnnotation> | undefined
  /** What the format's `stateOf` read from this request's body (undefined: nothing, the common case). */
  readonly formatState?: unknown
}

/** A client format: its decoder, its encoder, and its error envelope. */
export interface ClientFormat {
  /** `responses`, `chat`, `messages`. */
  readonly name: string
  /** The parsed JSON body → the normalized request, or a 400 naming the field and the rule. */
  readonly decode: (body: unknown) => Either.Either<ResponsesRequest, ApiError>
  /**
   * The body's list of items (`key`) decodes item by item into the request's `input`, in order:
   * a long one may be decoded slice by slice (src/pipeline/ingress.ts, `decodeBody`), the fields
   * of `firstOnly` (which add items of their own) given to the first slice only.
   */
  readonly slicedItems?: { readonly key: "input" | "messages"; readonly firstOnly?: ReadonlyArray<string> }
  /** The encoder of one answer to `request` (as ingress decoded it and the pre-model stages left it). */
  readonly encoder: (request: ResponsesRequest, options: EncoderOptions) => Encoder
  /** The format's error body for `e` (Responses and Chat: the contract's envelope; Messages: Anthropic's). */
  readonly errorBody: (e: ApiError) => string
  /**
   * The caller's own fields in the Responses shape, laid over a preset's config key by key
   * (`@preset/slug`). Default: the decoded request itself.
   */
  readonly ownFields?: (body: unknown, request: ResponsesRequest) => Record<string, unknown>
  /**
   * The format's own per-request state that the Responses request cannot carry (Chat's
   * `stream_options.include_usage`), read from the body `decode` accepted: kept with the
   * request's state (whatever the stages replace the request with) and given back to this
   * format's encoder as `EncoderOptions.formatState`. Undefined when there is none.
   */
  readonly stateOf?: (body: unknown) => unknown
}

/** `e` as an HTTP answer in `format`'s envelope, with its status and headers (`Retry-After`). */
export const errorResponseIn = (format: ClientFormat, e: ApiError, extraHeaders?: Record<string, string>): Response =>
  new Response(format.errorBody(e), {
    status: e.status,
    headers: { "content-type": "application/json", ...errorHeaders(e), ...extraHeaders },
  })

/**
 * With `ledger.durable_answers`, an answer whose record could be neither committed nor put in the
 * ledger spool's file (the database and the disk both refused it): the answer is not delivered
 * (docs/operations.md, "When the database goes away").
 */
export const notRecorded = (): ServiceUnavailable =>
  new ServiceUnavailable({ message: "The answer could not be recorded (the database and the ledger spool are unavailable); try again", retry_after: 5 })

/**
 * A stream's failure event for `e` in `format`'s terms, sent instead of its terminal events when they
 * were held back for the record (durable answers) and the record could not be kept.
 */
export const storeFailureEvent = (format: ClientFormat, e: ApiError): string => {
  const message = JSON.stringify(e.message)
  switch (format.name) {
    case "messages":
      return `event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":${message}}}\n\n`
    case "chat":
      return `data: {"object":"chat.completion.chunk","error":{"code":${e.status},"message":${message},"metadata":{"error_type":"service_unavailable"}},"choices":[{"index":0,"delta":{},"finish_reason":"error","native_finish_reason":"error"}]}\n\n`
    default:
      return `event: error\ndata: {"type":"error","code":"service_unavailable","message":${message},"param":null}\n\n`
  }
}

/**
 * Whether a tool call's arguments are whole, so a call the upstream begins next does not interleave
 * with it: a JSON object (nothing valid follows its last brace). The encoders check it once per new
 * call, not per delta; a call begun while the open one is not whole waits for it to close.
 */
export const isWholeObject = (args: string): boolean => {
  if (!args.endsWith("}")) return false
  try {
    JSON.parse(args)
    return true
  } catch {
    return false
  }
}
