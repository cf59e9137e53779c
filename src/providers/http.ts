/**
 * The upstream call every HTTP adapter shares: keep-alive `fetch` with the caller's abort signal
 * and a deadline, status → `ProviderError` before the first byte, then the body read as JSON or
 * as SSE translated chunk by chunk. Per-chunk work is plain code (DESIGN §4: an Effect Stream
 * step costs 15-20 µs per chunk).
 */
import { errorDetailOf, errorFromStatus } from "./errors"
import { createSseParser, endSse, feedSse } from "./sse"
import { ProviderError, type NormalizedRequest, type Provider, type ProviderConfig, type ProviderEvent, type CallOptions, type UpstreamCall } from "./types"
import type { WireFormat } from "./wire"

export const DEFAULT_TIMEOUT_MS = 120_000

/**
 * Ties the fetch to the caller's signal and to a deadline of `timeoutMs` that bounds the wait
 * for the response head, for a JSON body, and for each gap between stream chunks.
 */
class UpstreamLink {
  readonly controller = new AbortController()
  timedOut = false
  private lastActivity = performance.now()
  private timer: ReturnType<typeof setTimeout> | undefined

  constructor(
    private readonly caller: AbortSignal,
    private readonly timeoutMs: number,
  ) {
    caller.addEventListener("abort", this.onCallerAbort, { once: true })
    this.timer = setTimeout(this.check, timeoutMs)
  }

  /** Marks the upstream alive: a timestamp only, so a chunk costs no timer re-arming. */
  touch(): void {
    this.lastActivity = performance.now()
  }

  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.caller.removeEventListener("abort", this.onCallerAbort)
  }

  /** The error to report for a rejected fetch or read, knowing why it may have been aborted. */
  failure(cause: unknown): ProviderError {
    if (this.timedOut) return new ProviderError("timeout", `the upstream did not answer within ${this.timeoutMs} ms`)
    if (this.caller.aborted) return new ProviderError("connection", "the upstream call was aborted by the caller")
    if (cause instanceof ProviderError) return cause
    const detail = cause instanceof Error ? cause.message : String(cause)
    return new ProviderError("connection", `upstream connection failed: ${detail}`)
  }

  private readonly onCallerAbort = (): void => {
    this.close()
    this.controller.abort()
  }

  private readonly check = (): void => {
    const idle = performance.now() - this.lastActivity
    if (idle + 1 < this.timeoutMs) {
      this.timer = setTimeout(this.check, this.timeoutMs - idle)
      return
    }
    this.timedOut = true
    this.close()
    this.controller.abort()
  }
}

const oneBatch = (events: ReadonlyArray<ProviderEvent>): AsyncIterable<ReadonlyArray<ProviderEvent>> => ({
  async *[Symbol.asyncIterator]() {
    yield events
  },
})

const eventsOfJson = (wire: WireFormat, text: string): Array<ProviderEvent> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new ProviderError("server", `${wire.name} upstream sent a body that is not JSON`)
  }
  return wire.fromJson(json)
}

/** How long the rest of a body may take after its terminal event before the connection is dropped. */
const DRAIN_GRACE_MS = 1000

/**
 * Reads what follows the terminal event (usually just the end of the chunked body) off the
 * caller's path, so the keep-alive connection goes back to the pool instead of being dropped.
 */
const drain = async (reader: ReadableStreamDefaultReader<Uint8Array>, link: UpstreamLink): Promise<void> => {
  const grace = setTimeout(() => reader.cancel().catch(() => undefined), DRAIN_GRACE_MS)
  try {
    for (;;) if ((await reader.read()).done) return
  } catch {
    // The answer is already complete: a failure after it changes nothing.
  } finally {
    clearTimeout(grace)
    link.close()
  }
}

async function* streamEvents(
  wire: WireFormat,
  body: ReadableStream<Uint8Array>,
  link: UpstreamLink,
): AsyncGenerator<ReadonlyArray<ProviderEvent>, void, undefined> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  const parser = createSseParser()
  const translator = wire.translator()
  let bodyDone = false
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch (cause) {
        throw link.failure(cause)
      }
      if (chunk.done) break
      link.touch()
      const sse = feedSse(parser, decoder.decode(chunk.value, { stream: true }))
      if (sse.length === 0) continue
      const out: Array<ProviderEvent> = []
      for (let i = 0; i < sse.length && !translator.done; i++) translator.push(sse[i], out)
      if (out.length > 0) yield out
      if (translator.done) return
    }
    bodyDone = true
    const out: Array<ProviderEvent> = []
    const rest = feedSse(parser, decoder.decode()).concat(endSse(parser))
    for (let i = 0; i < rest.length && !translator.done; i++) translator.push(rest[i], out)
    const complete = translator.done || translator.end(out)
    if (out.length > 0) yield out
    if (!complete) throw new ProviderError("connection", `${wire.name} upstream stream ended before its terminal event`)
  } finally {
    if (translator.done && !bodyDone) {
      void drain(reader, link)
    } else {
      link.close()
      // A no-op when the body is done; otherwise it drops the upstream stream at once.
      if (!bodyDone) reader.cancel().catch(() => undefined)
    }
  }
}

const trimSlash = (url: string): string => (url.endsWith("/") ? url.slice(0, -1) : url)

const openUpstream = async (
  wire: WireFormat,
  request: NormalizedRequest,
  config: ProviderConfig,
  options: CallOptions,
): Promise<UpstreamCall> => {
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const upstreamBody = wire.body(request, options.stream, config)
  const url = trimSlash(config.base_url ?? wire.defaultBaseUrl) + wire.path
  const headers = {
    "content-type": "application/json",
    accept: options.stream ? "text/event-stream" : "application/json",
    ...wire.headers(options.apiKey),
    ...config.headers,
  }
  const link = new UpstreamLink(options.signal, config.timeout_ms ?? DEFAULT_TIMEOUT_MS)
  let response: Response
  try {
    // keepalive: reuse upstream connections across calls (Bun pools them per host).
    response = await fetch(url, { method: "POST", headers, body: JSON.stringify(upstreamBody), signal: link.controller.signal, keepalive: true })
  } catch (cause) {
    link.close()
    throw link.failure(cause)
  }
  link.touch()
  if (!response.ok) {
    let text = ""
    try {
      text = await response.text()
    } catch (cause) {
      if (link.timedOut || options.signal.aborted) {
        link.close()
        throw link.failure(cause)
      }
    }
    link.close()
    const detail = errorDetailOf(text, `${wire.name} upstream answered ${response.status} ${response.statusText}`.trim())
    throw errorFromStatus(response.status, detail, response.headers)
  }
  const contentType = response.headers.get("content-type") ?? ""
  // Some OpenAI-compatible servers ignore `stream: true` and answer JSON: read it as JSON.
  if (!options.stream || response.body === null || contentType.startsWith("application/json")) {
    let text: string
    try {
      text = await response.text()
    } catch (cause) {
      throw link.failure(cause)
    } finally {
      link.close()
    }
    return { upstreamBody, events: oneBatch(eventsOfJson(wire, text)) }
  }
  return { upstreamBody, events: streamEvents(wire, response.body, link) }
}

/** A `Provider` for an HTTP wire format. */
export const httpProvider = (wire: WireFormat): Provider => ({
  open: (request, config, options) => openUpstream(wire, request, config, options),
})
