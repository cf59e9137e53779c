/**
 * The upstream call every HTTP adapter shares: a keep-alive request (`http1.ts`) with the
 * caller's abort signal and a deadline, status → `ProviderError` before the first byte, then the
 * body read as JSON or as SSE translated read by read. Per-chunk work is plain code (an Effect Stream
 * step costs 15-20 µs per chunk).
 */
import { type Deadline, Deadlines } from "../deadlines"
import { type AbortLike, PlainAbort } from "./abort"
import { errorDetailOf, errorFromStatus, isJsonObject, notAnAnswer } from "./errors"
import { type BodySink, DEFAULT_MAX_CONNECTIONS, defaultTransport, type Transport, type UpstreamResponse } from "./http1"
import { DONE, PushedEvents } from "./pushed-events"
import { createSseParser, endSse, feedSse, sseEventEnd, sseIdle } from "./sse"
import { DEFAULT_UPSTREAM_LIMITS, ProviderError, type NormalizedRequest, type Provider, type ProviderConfig, type ProviderEvent, type CallOptions, type UpstreamCall } from "./types"
import type { WireFormat } from "./wire"

export const DEFAULT_TIMEOUT_MS = 120_000

let shared: Transport | undefined
/** One client (one connection pool) for every adapter, chosen from the environment on first use. */
export const sharedTransport = (): Transport => (shared ??= defaultTransport())

/**
 * The silence checks of the upstream calls, one list per timeout length (a provider's
 * `timeout_ms`): a native timer per call (setTimeout, clearTimeout at its end) was ~1 µs of a JSON
 * request's CPU (bun --cpu-prof); on a list, adding and removing a check are plain assignments.
 */
const silenceChecks = new Map<number, Deadlines>()
const checksOf = (timeoutMs: number): Deadlines => {
  let list = silenceChecks.get(timeoutMs)
  if (list === undefined) {
    list = new Deadlines(timeoutMs)
    silenceChecks.set(timeoutMs, list)
  }
  return list
}

/**
 * Ties the upstream request to the caller's signal and to a deadline of `timeoutMs` that bounds the wait
 * for the response head, for a JSON body, and for each gap between stream chunks.
 */
export class UpstreamLink {
  readonly controller = new PlainAbort()
  timedOut = false
  /** The reader paused the body: its silence is the client's, not the upstream's. */
  paused = false
  private lastActivity = performance.now()
  private readonly checks: Deadlines
  private pending: Deadline | undefined

  constructor(
    private readonly caller: AbortLike,
    private readonly timeoutMs: number,
  ) {
    caller.addEventListener("abort", this.onCallerAbort, { once: true })
    this.checks = checksOf(timeoutMs)
    this.pending = this.checks.add(this.check)
  }

  /** Marks the upstream alive: a timestamp only, so a chunk costs no timer re-arming. */
  touch(): void {
    this.lastActivity = performance.now()
  }

  close(): void {
    if (this.pending !== undefined) this.checks.remove(this.pending)
    this.pending = undefined
    this.caller.removeEventListener("abort", this.onCallerAbort)
  }

  /** The error to report for a failed request or read, knowing why it may have been aborted. */
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

  /** Due `timeoutMs` after the call began or after the last check: silent that long, the call is aborted. */
  private readonly check = (): void => {
    const idle = performance.now() - this.lastActivity
    // Paused: checked again a whole timeout from now. Active since: due a timeout after that activity.
    if (this.paused) {
      this.pending = this.checks.add(this.check)
      return
    }
    if (idle + 1 < this.timeoutMs) {
      this.pending = this.checks.add(this.check, -idle)
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
  if (!isJsonObject(json)) throw notAnAnswer(wire.name, "not a JSON object")
  return fromJsonChecked(wire.name, json, wire.fromJson)
}

/**
 * A JSON answer's events; a reader throws a ProviderError on what it checks, and anything else
 * (a TypeError on a part of another type) is a body of another shape, not gateway code's text.
 */
export const fromJsonChecked = <A>(name: string, json: A, fromJson: (json: A) => Array<ProviderEvent>): Array<ProviderEvent> => {
  try {
    return fromJson(json)
  } catch (cause) {
    throw cause instanceof ProviderError ? cause : notAnAnswer(name, "a body of another shape")
  }
}

/**
 * Events a stream parses one by one so its translator can take the rest of their read as bytes:
 * a role chunk, the first text chunk, the finish, the usage and `[DONE]`, with room to spare. Past
 * it, what the translator does not take is decoded with the rest of its read, as before.
 */
const PARSED_ALONE_MAX = 8

/** How long the rest of a body may take after its terminal event before the connection is dropped. */
const DRAIN_GRACE_MS = 1000

/**
 * An upstream SSE body as event batches: each network read is decoded, parsed and translated in
 * the transport's callback, then handed on by PushedEvents (pushed-events.ts) to a subscribed
 * consumer (no promise), or queued for an iterating one (one promise per batch at most). After the terminal event the rest of the body
 * (the end of the chunked encoding) is still read, so the connection goes back to the pool.
 */
class StreamEvents extends PushedEvents<UpstreamLink> implements BodySink {
  private readonly decoder = new TextDecoder()
  private readonly parser = createSseParser()
  private readonly translator: ReturnType<WireFormat["translator"]>
  /** Text of the current network read, handled once the read is over. */
  private text = ""
  /**
   * Events translated during this read, before `text`: undefined between reads. An array kept
   * here from one read to the next outlived the held-stream pacer's young collections and was
   * left as old garbage at the next read (2,000 held streams: ~1 MB/s until they ended).
   */
  private taken: Array<ProviderEvent> | undefined
  /** The decoder holds no part of a character (the last byte it was given was ASCII). */
  private decoderClear = true
  /** Events of a read parsed one by one for the translator to learn their shape (`data`), at most `PARSED_ALONE_MAX` a stream. */
  private parsedAlone = 0
  private grace: ReturnType<typeof setTimeout> | undefined

  constructor(
    private readonly wire: WireFormat,
    response: UpstreamResponse,
    link: UpstreamLink,
    /** The longest event (its text so far) the parser may hold. */
    private readonly maxEvent: number,
  ) {
    super(response, link)
    this.translator = wire.translator()
    response.pipe(this)
  }

  data(bytes: Uint8Array, start: number, end: number): void {
    if (this.last !== undefined) return
    let from = start
    // At an event boundary, with nothing held before it, the translator may take whole events
    // from the bytes themselves; the rest is decoded and parsed as usual. Text decoded earlier
    // in this read is translated first (the events keep their order), so that one chunk that is
    // not of the learned shape does not send the rest of the read the slow way.
    const translator = this.translator
    if (translator.pushBytes !== undefined && this.decoderClear && !translator.done) {
      if (this.text !== "" && !this.translateText()) return
      while (!translator.done) {
        if (sseIdle(this.parser)) {
          const taken = this.taken ?? []
          from = translator.pushBytes(bytes, from, end, taken)
          if (taken.length > 0) this.taken = taken
          if (from === end) return
        }
        // An event the translator did not take: the first of a stream (nothing learned yet), or
        // one of another shape (a finish, the usage). The first few are parsed on their own, so
        // that a read holding a whole answer (a fast upstream, a cached one) is taken as bytes
        // after its first text event, not decoded and split into lines as a whole.
        if (this.parsedAlone === PARSED_ALONE_MAX) break
        const eventEnd = sseEventEnd(bytes, from, end)
        if (eventEnd === -1) break
        this.parsedAlone++
        this.text = this.decoder.decode(bytes.subarray(from, eventEnd), { stream: true })
        from = eventEnd
        if (!this.translateText()) return
      }
    }
    this.text += this.decoder.decode(bytes.subarray(from, end), { stream: true })
    if (end > start) this.decoderClear = (bytes[end - 1] as number) < 0x80
  }

  /** Translates the decoded text so far into `taken`; false (the call settled) when the upstream reported an error. */
  private translateText(): boolean {
    const text = this.text
    this.text = ""
    const sse = feedSse(this.parser, text)
    const translator = this.translator
    const taken = this.taken ?? []
    try {
      for (let i = 0; i < sse.length && !translator.done; i++) translator.push(sse[i], taken)
    } catch (cause) {
      this.taken = undefined
      this.closeBody(true)
      // What this read held before the failure goes out first: text already received is the answer's.
      // A translator throws only on what it reads: an error event (a ProviderError), or an event
      // that is not one of its format (a TypeError or SyntaxError, whose text names gateway code).
      this.failAfter(cause instanceof ProviderError ? cause : new ProviderError("server", `${this.wire.name} upstream sent an event that is not one of its format`), taken, translator)
      return false
    }
    if (taken.length > 0) this.taken = taken
    // What the parser holds is one event not yet complete: bounded, or the answer fails (two lengths per read).
    const parser = this.parser
    if (parser.pending.length + (parser.data === undefined ? 0 : parser.data.length) > this.maxEvent) {
      // The events before it go out first, as before a failure the translator reads (above).
      const before = this.taken ?? []
      this.taken = undefined
      this.closeBody(true)
      this.failAfter(new ProviderError("server", `${this.wire.name} upstream sent an event larger than ${this.maxEvent} bytes`), before, translator)
      return false
    }
    return true
  }

  read(): void {
    this.link.touch()
    if (this.last !== undefined || (this.text === "" && this.taken === undefined)) return
    if (this.text !== "" && !this.translateText()) return
    const out = this.taken ?? []
    this.taken = undefined
    const translator = this.translator
    if (out.length > 0) this.push(out)
    if (translator.done) {
      this.settle(DONE)
      // The rest of the body is read off the caller's path, for a while.
      if (!this.bodyOver) this.grace = setTimeout(() => this.closeBody(true), DRAIN_GRACE_MS)
    }
  }

  end(): void {
    this.closeBody(false)
    if (this.last !== undefined) return
    const translator = this.translator
    const out = this.taken ?? []
    this.taken = undefined
    let complete: boolean
    try {
      const rest = feedSse(this.parser, this.text + this.decoder.decode()).concat(endSse(this.parser))
      for (let i = 0; i < rest.length && !translator.done; i++) translator.push(rest[i], out)
      complete = translator.done || translator.end(out)
    } catch (cause) {
      this.failAfter(cause instanceof ProviderError ? cause : this.link.failure(cause), out, translator)
      return
    }
    if (out.length > 0) this.push(out)
    this.settle(complete ? DONE : new ProviderError("connection", `${this.wire.name} upstream stream ended before its terminal event`))
  }

  error(cause: Error): void {
    const failure = this.link.failure(cause)
    this.closeBody(false)
    if (this.last !== undefined) return
    const out = this.taken ?? []
    this.taken = undefined
    this.failAfter(failure, out, this.translator)
  }

  protected override closeBody(drop: boolean): void {
    if (this.grace !== undefined) clearTimeout(this.grace)
    this.grace = undefined
    super.closeBody(drop)
  }
}

const copyHeaders = (from: Readonly<Record<string, string>>, to: Record<string, string>): void => {
  for (const name in from) to[name] = from[name] as string
}

export const trimSlash = (url: string): string => (url.endsWith("/") ? url.slice(0, -1) : url)

/**
 * The request URL of a provider config on a wire, kept per config object: the same string each
 * time, whose hash the transport's origin lookup has already computed (a URL concatenated per
 * request was flattened and hashed again every time).
 */
const urls = new WeakMap<ProviderConfig, Map<WireFormat, string>>()
const urlOf = (wire: WireFormat, config: ProviderConfig): string => {
  let byWire = urls.get(config)
  if (byWire === undefined) {
    byWire = new Map()
    urls.set(config, byWire)
  }
  let url = byWire.get(wire)
  if (url === undefined) {
    url = trimSlash(config.base_url ?? wire.defaultBaseUrl) + wire.path
    byWire.set(wire, url)
  }
  return url
}

/**
 * One upstream call of `wire` to `url` with the auth headers `auth`: for adapters whose URL or
 * credentials depend on the call (the model in the path, a token from an exchange), which cannot
 * be a fixed `path` and a header of the key.
 */
export const openUpstreamAt = async (
  transport: Transport,
  wire: WireFormat,
  request: NormalizedRequest,
  config: ProviderConfig,
  options: CallOptions,
  url: string,
  auth: Readonly<Record<string, string>>,
): Promise<UpstreamCall> => {
  if (options.signal.aborted) throw new ProviderError("connection", "the upstream call was aborted by the caller")
  const upstreamBody = wire.body(request, options.stream, config)
  // Copied in a loop, not spread (a spread is a builtin call per object, per request).
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: options.stream ? "text/event-stream" : "application/json",
  }
  copyHeaders(auth, headers)
  if (config.headers !== undefined) copyHeaders(config.headers, headers)
  const link = new UpstreamLink(options.signal, config.timeout_ms ?? DEFAULT_TIMEOUT_MS)
  const limits = options.limits ?? DEFAULT_UPSTREAM_LIMITS
  let response: UpstreamResponse
  try {
    response = await transport({
      url,
      headers,
      body: JSON.stringify(upstreamBody),
      signal: link.controller,
      maxConnections: config.max_connections ?? DEFAULT_MAX_CONNECTIONS,
      receiveBufferBytes: limits.receiveBufferBytes,
    })
  } catch (cause) {
    link.close()
    throw link.failure(cause)
  }
  link.touch()
  if (response.status < 200 || response.status > 299) {
    let text = ""
    try {
      text = await response.text(limits.bodyBytes)
    } catch (cause) {
      if (link.timedOut || options.signal.aborted) {
        link.close()
        throw link.failure(cause)
      }
    }
    link.close()
    const fallback = `${wire.name} upstream answered ${response.status} ${response.statusText}`.trim()
    if (wire.errorOf !== undefined) throw wire.errorOf(response.status, text, fallback, response.headers)
    throw errorFromStatus(response.status, errorDetailOf(text, fallback), response.headers)
  }
  const contentType = response.headers.get("content-type") ?? ""
  // Some OpenAI-compatible servers ignore `stream: true` and answer JSON: read it as JSON.
  if (!options.stream || contentType.startsWith("application/json")) {
    let text: string
    try {
      text = await response.text(limits.bodyBytes)
    } catch (cause) {
      const failure = link.failure(cause)
      failure.answerBegun = true
      throw failure
    } finally {
      link.close()
    }
    const whole = eventsOfJson(wire, text)
    return {
      upstreamBody,
      whole,
      get events() {
        return oneBatch(whole)
      },
    }
  }
  const events = new StreamEvents(wire, response, link, limits.eventBytes)
  // The answer becomes the client's (its 200, its first event) once the upstream's first event is
  // read: a stream that fails first (Anthropic's overloaded error after its 200, a body that is no
  // stream of its format) fails before the first byte, and the next endpoint is tried.
  await events.firstEvent()
  return { upstreamBody, events, subscribe: (consumer) => events.subscribe(consumer) }
}

/** A `Provider` for an HTTP wire format. */
export const httpProvider = (wire: WireFormat, transport: Transport = sharedTransport()): Provider => {
  const provider: Provider = {
    open: (request, config, options) => openUpstreamAt(transport, wire, request, config, options, urlOf(wire, config), wire.headers(options.apiKey)),
  }
  return wire.thinkingTokens === undefined ? provider : { ...provider, thinkingTokens: wire.thinkingTokens }
}
