/**
 * The normalized model between the gateway and the upstream adapters.
 *
 * The gateway turns a decoded Responses request into a `NormalizedRequest`; an adapter turns it
 * into its wire format, and turns the upstream answer (JSON or SSE) back into `ProviderEvent`s.
 * Both JSON and streamed answers are event lists, so one assembler builds the result and the
 * client's stream. Everything here is plain data: per-chunk work on the hot path is plain
 * functions (an Effect Stream step costs 15-20 µs per chunk).
 */
import type { ProviderKind } from "./kinds"

import type { AbortLike } from "./abort"
import type { Usage } from "../domain/pricing"

export type Role = "system" | "developer" | "user" | "assistant"

export interface CacheControl {
  readonly type: "ephemeral"
  readonly ttl?: "5m" | "1h"
}

export type ContentPart =
  | { readonly type: "text"; readonly text: string; readonly cacheControl?: CacheControl }
  | { readonly type: "image"; readonly url: string; readonly detail?: "auto" | "low" | "high"; readonly cacheControl?: CacheControl }
  | {
      readonly type: "file"
      readonly filename?: string
      readonly fileData?: string
      readonly fileUrl?: string
      readonly fileId?: string
      readonly cacheControl?: CacheControl
    }

export type InputItem =
  | { readonly type: "message"; readonly role: Role; readonly content: ReadonlyArray<ContentPart> }
  | { readonly type: "function_call"; readonly callId: string; readonly name: string; readonly arguments: string }
  | { readonly type: "function_call_output"; readonly callId: string; readonly output: string }
  /**
   * `encryptedContent`: the upstream's opaque token that came with the reasoning (Anthropic's and
   * Bedrock's signature, OpenAI's encrypted content), sent back with it. `redacted`: a block whose
   * text the upstream withheld (Anthropic's `redacted_thinking`): the token is all of it. `format`:
   * whose token it is, when the client said (`reasoningFits`).
   */
  | { readonly type: "reasoning"; readonly summary: string; readonly encryptedContent?: string; readonly redacted?: boolean; readonly format?: string }

export interface FunctionTool {
  readonly type: "function"
  readonly name: string
  readonly description?: string
  readonly parameters?: Record<string, unknown>
  readonly strict?: boolean
}

export type ToolChoice = "auto" | "none" | "required" | { readonly type: "function"; readonly name: string }

export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | { readonly type: "json_schema"; readonly name: string; readonly schema: Record<string, unknown>; readonly strict?: boolean }

export interface ReasoningConfig {
  readonly effort?: "minimal" | "low" | "medium" | "high" | "none" | "xhigh"
  readonly summary?: "auto" | "concise" | "detailed"
  readonly maxTokens?: number
  readonly enabled?: boolean
}

export interface NormalizedRequest {
  /** The model id as the upstream knows it (the endpoint's `upstream_model`). */
  readonly model: string
  readonly instructions?: string
  readonly input: ReadonlyArray<InputItem>
  readonly tools: ReadonlyArray<FunctionTool>
  readonly toolChoice?: ToolChoice
  readonly parallelToolCalls?: boolean
  readonly temperature?: number
  readonly topP?: number
  readonly topK?: number
  readonly maxOutputTokens?: number
  readonly frequencyPenalty?: number
  readonly presencePenalty?: number
  readonly responseFormat?: ResponseFormat
  readonly reasoning?: ReasoningConfig
  /** Top-level cache_control: a breakpoint on the last cacheable block. */
  readonly cacheControl?: CacheControl
  readonly user?: string
  readonly metadata?: Record<string, string>
}

export type FinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error"

/**
 * What an adapter yields. Indexes of tool calls are the adapter's own (upstream) indexes;
 * the assembler gives output items their places.
 */
export type ProviderEvent =
  | {
      readonly type: "text"
      readonly delta: string
      /** The delta as a JSON string literal, when the upstream's own text of it is at hand (not re-encoded). */
      readonly json?: string
    }
  | {
      /**
       * Text deltas as the upstream wrote them, in place in its read: the i-th is the JSON string
       * literal `source[spans[2i], spans[2i + 1])`, quotes included, none of them `""`; each is
       * printable ASCII with only JSON's escapes (`isPlainLiteral`), so its bytes are its JSON
       * text. A consumer copies what it keeps: `source` is a whole upstream read.
       */
      readonly type: "text_literals"
      readonly source: Uint8Array
      readonly spans: ReadonlyArray<number>
    }
  | { readonly type: "reasoning"; readonly delta: string }
  /**
   * Ends the reasoning block given so far with the upstream's opaque token for it (Claude's
   * `signature`, on Anthropic or Bedrock: clients are told its format is `ANTHROPIC_REASONING`),
   * which a client sends back with that block on a later turn; with `redacted`, a whole block
   * whose text the upstream withheld, the token being all of it.
   */
  | { readonly type: "reasoning_signature"; readonly signature: string; readonly redacted?: boolean }
  | { readonly type: "tool_call_start"; readonly index: number; readonly callId: string; readonly name: string }
  | { readonly type: "tool_call_delta"; readonly index: number; readonly delta: string }
  | { readonly type: "usage"; readonly usage: Usage }
  /**
   * `native`: the upstream's own word for the reason where it has words of its own (Anthropic's and
   * Bedrock's `end_turn`, Gemini's `STOP`): Chat's `native_finish_reason`. Left out where it is
   * the same word (OpenAI's formats).
   */
  | { readonly type: "finish"; readonly reason: FinishReason; readonly native?: string }

/** The finish event, with the upstream's own word when it gave one (null and undefined: none). */
export const finishEvent = (reason: FinishReason, native: string | null | undefined): ProviderEvent =>
  native == null ? { type: "finish", reason } : { type: "finish", reason, native }

/** How an upstream failed; the gateway maps kinds to the contract's statuses and decides failover. */
export type ProviderErrorKind =
  | "bad_request" // upstream 400/404/409/413/422 about the request: 400/422 to the caller
  | "context_length" // the prompt does not fit: next candidate, else 400
  | "auth" // upstream 401/403: our config, 502
  | "rate_limited" // 429
  | "overloaded" // 529 or an 'overloaded' error
  | "timeout" // upstream deadline: 524
  | "server" // 5xx
  | "connection" // reset, refused, DNS: 502

export class ProviderError extends Error {
  readonly _tag = "ProviderError"
  /** The upstream had begun to answer (a 2xx head) when this failed: it has used the prompt. */
  answerBegun = false
  constructor(
    readonly kind: ProviderErrorKind,
    message: string,
    readonly upstreamStatus?: number,
    readonly retryAfterSeconds?: number,
  ) {
    super(message)
  }
}

/** One provider from the config file. */
export interface ProviderConfig {
  readonly id: string
  readonly kind: ProviderKind
  readonly base_url?: string
  /** The env var holding the upstream API key. */
  readonly api_key_env?: string
  readonly timeout_ms?: number
  readonly headers?: Record<string, string>
  /** Spend through this provider is the workspace's own key (BYOK). */
  readonly byok?: boolean
  /** Open connections to the provider's origin at most (default 512); calls beyond wait in line. */
  readonly max_connections?: number
  /** `vertex`: the Google Cloud project and location (`global` or a region such as `us-central1`). */
  readonly project?: string
  readonly location?: string
  /** `vertex`: the service-account JSON file (else `GOOGLE_APPLICATION_CREDENTIALS`), and where its token is exchanged. */
  readonly credentials_file?: string
  readonly token_url?: string
  /** `vertex`: whose model format an endpoint speaks; set per endpoint (`publisher`), not in the provider entry. */
  readonly publisher?: "google" | "anthropic"
  /** `azure-openai`: a dated version (the deployments paths) or `v1`/`preview` (the v1 paths); absent: the v1 paths. */
  readonly api_version?: string
  /** `azure-openai`: the variable holding an Entra ID bearer token (instead of an `api-key`). */
  readonly bearer_token_env?: string
  /** `azure-openai`: the API called on the deployment (default `chat-completions`). */
  readonly api?: "chat-completions" | "responses"
  /** Bedrock: the AWS region, and the variables holding a key pair for SigV4 (bedrock/credentials.ts). */
  readonly region?: string
  readonly access_key_id_env?: string
  readonly secret_access_key_env?: string
  readonly session_token_env?: string
}

/** The most the gateway reads of an upstream answer (502 beyond): a JSON or error body, one SSE event. */
export interface UpstreamLimits {
  readonly bodyBytes: number
  /** Counted in characters of the decoded text. */
  readonly eventBytes: number
  /**
   * The kernel receive buffer of a new upstream connection (0: autotuned), which bounds one read:
   * a stream paused part way through a read holds its rest (socket-buffers.ts).
   */
  readonly receiveBufferBytes?: number
}

export const DEFAULT_UPSTREAM_LIMITS: UpstreamLimits = { bodyBytes: 32 * 1024 * 1024, eventBytes: 1024 * 1024, receiveBufferBytes: 64 * 1024 }

export interface CallOptions {
  readonly stream: boolean
  readonly signal: AbortLike
  /** Resolved API key (from `api_key_env`), if any. */
  readonly apiKey?: string
  /** `server.max_upstream_body_bytes` and `max_upstream_event_bytes`; the defaults when absent. */
  readonly limits?: UpstreamLimits
}

/** Takes an upstream call's event batches as they are translated (`consumeEvents`). */
export interface EventConsumer {
  batch(events: ReadonlyArray<ProviderEvent>): void
  /** The answer is complete. */
  end(): void
  /** The answer failed after its first byte (usually a `ProviderError`). */
  error(cause: unknown): void
}

/**
 * A consumer's hold on an upstream call's events. `pause` stops reading the upstream (its socket
 * is paused, an iteration is not continued); batches already read may still come. `stop` drops it.
 */
export interface Subscription {
  readonly stop: () => void
  readonly pause: () => void
  readonly resume: () => void
}

/** An opened upstream call: events arrive in batches, one batch per upstream chunk. */
export interface UpstreamCall {
  /** The body sent upstream, for `debug.echo_upstream_body`. */
  readonly upstreamBody: unknown
  readonly events: AsyncIterable<ReadonlyArray<ProviderEvent>>
  /**
   * The same batches pushed to `consumer` from the upstream's read callback, with no promise per
   * batch; instead of iterating `events`, not both.
   */
  readonly subscribe?: (consumer: EventConsumer) => Subscription
  /** A non-streamed answer already read whole: its events, the one batch `events` yields (no iteration needed). */
  readonly whole?: ReadonlyArray<ProviderEvent>
}

/**
 * An adapter. `open` resolves once the upstream has answered with a success status and, for a
 * stream, its first event is read (or `FIRST_EVENT_WAIT_MS` has passed, src/providers/pushed-events.ts);
 * it rejects with a `ProviderError` otherwise, a stream that failed before its first event
 * included. Iterating `events` may throw a `ProviderError` (a failure after the first byte).
 * Aborting `signal` cancels the upstream.
 */
export interface Provider {
  readonly open: (request: NormalizedRequest, config: ProviderConfig, options: CallOptions) => Promise<UpstreamCall>
  /**
   * Output tokens the upstream may spend thinking on top of the answer's maximum for `reasoning`
   * (Anthropic's thinking budget); absent: none. The reservation bounds the answer with it.
   */
  readonly thinkingTokens?: (reasoning: ReasoningConfig | undefined) => number
}
