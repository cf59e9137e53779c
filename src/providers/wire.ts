/**
 * What an HTTP adapter tells the shared upstream caller (`http.ts`) about its wire format:
 * where to send, which headers, how to build the body, and how to read the answer.
 */
import type { HeaderReader } from "./http1"
import type { SseEvent } from "./sse"
import type { NormalizedRequest, ProviderConfig, ProviderError, ProviderEvent, ReasoningConfig } from "./types"

/** Turns one upstream stream into events; one instance per call, fed in order. */
export interface StreamTranslator {
  /** Appends the events for one SSE event; throws a `ProviderError` for an in-stream error. */
  push(event: SseEvent, out: Array<ProviderEvent>): void
  /** True once the format's terminal event was seen. */
  readonly done: boolean
  /**
   * Called when the body ends before the terminal event: appends any final events and returns
   * whether the answer is complete anyway (false: the stream was cut).
   */
  end(out: Array<ProviderEvent>): boolean
  /**
   * Optional: reads whole SSE events of a shape it has learned straight from the upstream bytes,
   * `bytes[start, end)`, appending their events; returns where it stopped (`start` when it took
   * nothing). Called only at an event boundary, with nothing held by the decoder or the SSE
   * parser; what it does not take goes through the decoder, the parser and `push` as usual.
   * Never throws: anything it cannot read as the learned shape is left to `push`. `out` holds
   * only this translator's events (it may add to a `text_literals` event of its own, last in `out`).
   */
  pushBytes?(bytes: Uint8Array, start: number, end: number, out: Array<ProviderEvent>): number
}

export interface WireFormat {
  /** The `kind` this format serves, for messages. */
  readonly name: string
  readonly defaultBaseUrl: string
  /** The path under `base_url`, e.g. "/chat/completions". */
  readonly path: string
  /** Auth and version headers; `config.headers` are added after (and may override) them. */
  readonly headers: (apiKey: string | undefined) => Record<string, string>
  readonly body: (request: NormalizedRequest, stream: boolean, config: ProviderConfig) => unknown
  /** Events of a non-streamed answer; throws a `ProviderError` when the body reports a failure. */
  readonly fromJson: (json: unknown) => Array<ProviderEvent>
  readonly translator: () => StreamTranslator
  /** Output tokens the upstream may spend thinking on top of the answer's maximum (`Provider.thinkingTokens`). */
  readonly thinkingTokens?: (reasoning: ReasoningConfig | undefined) => number
  /**
   * The error for a non-2xx answer, for a format whose error bodies say more than the status
   * (`fallback`: the message when the body has none); absent: `errorFromStatus`.
   */
  readonly errorOf?: (status: number, bodyText: string, fallback: string, headers: HeaderReader) => ProviderError
}
