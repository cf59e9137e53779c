/**
 * Incremental server-sent events parser (the WHATWG `text/event-stream` rules) for upstream
 * streams. Plain functions and one mutable state object: it runs once per upstream chunk on the
 * hot path, where an Effect Stream step would cost 15-20 µs.
 */

export interface SseEvent {
  /** The `event:` field; absent for the default ("message") type. */
  readonly event?: string
  /** The `data:` lines joined with "\n". */
  readonly data: string
}

export interface SseParser {
  /** An incomplete line carried over from the previous chunk. */
  pending: string
  /** The data of the event being built; undefined until a `data` field arrives. */
  data: string | undefined
  event: string | undefined
  /** The previous chunk ended with "\r": a "\n" opening the next chunk belongs to it. */
  skipLineFeed: boolean
  /** Nothing fed yet: a leading byte order mark is dropped. */
  atStart: boolean
}

export const createSseParser = (): SseParser => ({
  pending: "",
  data: undefined,
  event: undefined,
  skipLineFeed: false,
  atStart: true,
})

/** At an event boundary: no partial line, no event being built (the next byte may start an event). */
export const sseIdle = (parser: SseParser): boolean =>
  parser.pending === "" && parser.data === undefined && parser.event === undefined && !parser.skipLineFeed && !parser.atStart

const LF = 10
const CR = 13
const COLON = 58
const SPACE = 32

/**
 * Where the event at `from` in an SSE body's bytes ends (after its blank line, LF LF or LF CR LF),
 * or -1 when it does not end before `end` (or its lines end in CR alone): the bytes up to there
 * can be decoded and fed on their own, leaving the parser idle.
 */
export const sseEventEnd = (bytes: Uint8Array, from: number, end: number): number => {
  let at = bytes.indexOf(LF, from)
  while (at !== -1 && at + 1 < end) {
    const next = bytes[at + 1]
    if (next === LF) return at + 2
    if (next === CR && at + 2 < end && bytes[at + 2] === LF) return at + 3
    at = bytes.indexOf(LF, at + 2)
  }
  return -1
}

const processLine = (parser: SseParser, text: string, start: number, end: number, out: Array<SseEvent>): void => {
  if (start === end) {
    // A blank line dispatches; an event without data is dropped, as the spec says.
    if (parser.data !== undefined) {
      out.push(parser.event === undefined ? { data: parser.data } : { event: parser.event, data: parser.data })
    }
    parser.data = undefined
    parser.event = undefined
    return
  }
  const first = text.charCodeAt(start)
  if (first === COLON) return
  let colon = text.indexOf(":", start)
  if (colon === -1 || colon > end) colon = end
  let valueStart = colon + 1
  if (valueStart < end && text.charCodeAt(valueStart) === SPACE) valueStart++
  const value = valueStart >= end ? "" : text.slice(valueStart, end)
  const nameLength = colon - start
  // Field names compared in place: `data` is by far the most common, so it is tested first.
  if (nameLength === 4 && text.startsWith("data", start)) {
    parser.data = parser.data === undefined ? value : parser.data + "\n" + value
  } else if (nameLength === 5 && text.startsWith("event", start)) {
    parser.event = value
  }
  // `id` and `retry` do not matter to an upstream client that never reconnects.
}

/** Feeds one decoded chunk (split anywhere) and returns the events it completed, in order. */
export const feedSse = (parser: SseParser, chunk: string): Array<SseEvent> => {
  const out: Array<SseEvent> = []
  if (chunk.length === 0) return out
  let text = chunk
  let pos = 0
  if (parser.atStart) {
    parser.atStart = false
    if (text.charCodeAt(0) === 0xfeff) pos = 1
  }
  if (parser.skipLineFeed) {
    parser.skipLineFeed = false
    if (text.charCodeAt(pos) === LF) pos++
  }
  if (parser.pending.length > 0) {
    text = parser.pending + text.slice(pos)
    pos = 0
    parser.pending = ""
  }
  const length = text.length
  let cr = text.indexOf("\r", pos)
  while (pos < length) {
    const lf = text.indexOf("\n", pos)
    if (cr !== -1 && cr < pos) cr = text.indexOf("\r", pos)
    let end: number
    let next: number
    if (cr !== -1 && (lf === -1 || cr < lf)) {
      end = cr
      if (cr + 1 < length) {
        next = text.charCodeAt(cr + 1) === LF ? cr + 2 : cr + 1
      } else {
        next = length
        parser.skipLineFeed = true
      }
    } else if (lf !== -1) {
      end = lf
      next = lf + 1
    } else {
      break
    }
    processLine(parser, text, pos, end, out)
    pos = next
  }
  if (pos < length) parser.pending = pos === 0 ? text : text.slice(pos)
  return out
}

/**
 * Ends the stream. Lenient where the spec is strict: a last line without its newline is
 * processed, and an event with data but no closing blank line is still dispatched, since
 * some upstreams close right after their final `data:` line.
 */
export const endSse = (parser: SseParser): Array<SseEvent> => {
  const out: Array<SseEvent> = []
  const rest = parser.pending
  parser.pending = ""
  parser.skipLineFeed = false
  if (rest.length > 0) {
    const last = rest.charCodeAt(rest.length - 1)
    processLine(parser, rest, 0, last === CR ? rest.length - 1 : rest.length, out)
  }
  processLine(parser, "", 0, 0, out)
  return out
}

/**
 * Reads a byte stream as SSE: yields one batch per network chunk (possibly empty, so a caller
 * can see liveness), then a final batch for what the end of the stream completes. Stopping the
 * iteration early cancels the stream.
 */
export async function* sseBatches(body: ReadableStream<Uint8Array>): AsyncGenerator<ReadonlyArray<SseEvent>, void, undefined> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  const parser = createSseParser()
  let finished = false
  try {
    for (;;) {
      const chunk = await reader.read()
      if (chunk.done) break
      yield feedSse(parser, decoder.decode(chunk.value, { stream: true }))
    }
    finished = true
    const tail = feedSse(parser, decoder.decode())
    const last = endSse(parser)
    if (tail.length > 0 || last.length > 0) yield tail.concat(last)
  } finally {
    if (!finished) reader.cancel().catch(() => undefined)
  }
}
