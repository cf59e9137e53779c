import { describe, expect, test } from "bun:test"
import { createSseParser, endSse, feedSse, type SseEvent, sseBatches, sseEventEnd } from "../../src/providers/sse"

const parseWhole = (text: string): Array<SseEvent> => {
  const parser = createSseParser()
  return feedSse(parser, text).concat(endSse(parser))
}

const parseSplit = (chunks: ReadonlyArray<string>): Array<SseEvent> => {
  const parser = createSseParser()
  const out: Array<SseEvent> = []
  for (const chunk of chunks) out.push(...feedSse(parser, chunk))
  return out.concat(endSse(parser))
}

const COMPLEX =
  "\uFEFF: a comment\r\n" +
  "event: first\r\ndata: one\r\n\r\n" +
  "data:no-space\n\n" +
  "data: line 1\ndata: line 2\ndata\n\n" +
  "id: 7\nretry: 100\nevent: ignored-without-data\n\n" +
  "event: cr-only\rdata: {\"x\": \"é ✓\"}\r\r" +
  "data: last\n\n"

const COMPLEX_EVENTS: Array<SseEvent> = [
  { event: "first", data: "one" },
  { data: "no-space" },
  { data: "line 1\nline 2\n" },
  { event: "cr-only", data: '{"x": "é ✓"}' },
  { data: "last" },
]

describe("SSE parser", () => {
  test("parses events, event names, multi-line data, comments, CRLF, CR and a BOM", () => {
    expect(parseWhole(COMPLEX)).toEqual(COMPLEX_EVENTS)
  })

  test("gives the same events for a split at every position", () => {
    for (let at = 0; at <= COMPLEX.length; at++) {
      expect(parseSplit([COMPLEX.slice(0, at), COMPLEX.slice(at)])).toEqual(COMPLEX_EVENTS)
    }
  })

  test("gives the same events for every pair of split positions", () => {
    for (let a = 0; a <= COMPLEX.length; a += 3) {
      for (let b = a; b <= COMPLEX.length; b++) {
        expect(parseSplit([COMPLEX.slice(0, a), COMPLEX.slice(a, b), COMPLEX.slice(b)])).toEqual(COMPLEX_EVENTS)
      }
    }
  })

  test("gives the same events fed one character at a time", () => {
    expect(parseSplit([...COMPLEX])).toEqual(COMPLEX_EVENTS)
  })

  test("a CRLF split between CR and LF makes one line end, not a blank line", () => {
    // Were the LF taken as a second line end, "a" would be dispatched alone.
    expect(parseSplit(["data: a\r", "\ndata: b\r", "\n\r", "\n"])).toEqual([{ data: "a\nb" }])
  })

  test("returns events only once they are complete", () => {
    const parser = createSseParser()
    expect(feedSse(parser, "data: hel")).toEqual([])
    expect(feedSse(parser, "lo\n")).toEqual([])
    expect(feedSse(parser, "\n")).toEqual([{ data: "hello" }])
  })

  test("keeps the value's spaces after the first one, and colons inside it", () => {
    expect(parseWhole("data:   two spaces: and a colon\n\n")).toEqual([{ data: "  two spaces: and a colon" }])
  })

  test("an empty data field dispatches an empty string", () => {
    expect(parseWhole("data:\n\n")).toEqual([{ data: "" }])
  })

  test("unknown fields and comments are ignored", () => {
    expect(parseWhole(": ping\nfoo: bar\ndata: x\n\n:\n\n")).toEqual([{ data: "x" }])
  })

  test("the end of the stream dispatches a last event without its blank line", () => {
    expect(parseWhole("data: [DONE]")).toEqual([{ data: "[DONE]" }])
    expect(parseWhole("event: e\ndata: x\n")).toEqual([{ event: "e", data: "x" }])
  })

  test("the event name does not leak into the next event", () => {
    expect(parseWhole("event: a\ndata: 1\n\ndata: 2\n\n")).toEqual([{ event: "a", data: "1" }, { data: "2" }])
  })
})

const byteStream = (chunks: ReadonlyArray<Uint8Array>, onCancel?: () => void): ReadableStream<Uint8Array> => {
  let i = 0
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++])
      else controller.close()
    },
    cancel() {
      onCancel?.()
    },
  })
}

describe("SSE over a byte stream", () => {
  test("yields one batch per chunk and decodes characters split across chunks", async () => {
    const bytes = new TextEncoder().encode('data: {"t":"é"}\n\ndata: 2\n\n')
    const cut = bytes.indexOf(0xc3) + 1 // inside the two bytes of "é"
    const batches: Array<ReadonlyArray<unknown>> = []
    for await (const batch of sseBatches(byteStream([bytes.slice(0, cut), bytes.slice(cut)]))) batches.push(batch)
    expect(batches).toEqual([[], [{ data: '{"t":"é"}' }, { data: "2" }]])
  })

  test("flushes a last event that has no blank line at the end", async () => {
    const batches: Array<ReadonlyArray<unknown>> = []
    for await (const batch of sseBatches(byteStream([new TextEncoder().encode("data: a\n\ndata: b")]))) batches.push(batch)
    expect(batches).toEqual([[{ data: "a" }], [{ data: "b" }]])
  })

  test("stopping early cancels the stream", async () => {
    let cancelled = false
    const chunk = new TextEncoder().encode("data: x\n\n")
    const stream = byteStream([chunk, chunk, chunk], () => {
      cancelled = true
    })
    for await (const batch of sseBatches(stream)) {
      expect(batch).toEqual([{ data: "x" }])
      break
    }
    expect(cancelled).toBe(true)
  })
})

test("sseEventEnd: after an event's blank line (LF LF or LF CR LF), within the range, or -1", () => {
  const bytes = new TextEncoder().encode('data: {"a":1}\n\ndata: b\r\n\r\ndata: c\ndata: d\n\ndata: e\r\rdata: f\n')
  const first = bytes.indexOf(10) + 2
  expect(sseEventEnd(bytes, 0, bytes.length)).toBe(first)
  const second = sseEventEnd(bytes, first, bytes.length)
  expect(new TextDecoder().decode(bytes.subarray(first, second))).toBe("data: b\r\n\r\n")
  const third = sseEventEnd(bytes, second, bytes.length)
  expect(new TextDecoder().decode(bytes.subarray(second, third))).toBe("data: c\ndata: d\n\n")
  // Lines ended by CR alone, and an event not finished in the range: not found.
  expect(sseEventEnd(bytes, third, bytes.length)).toBe(-1)
  expect(sseEventEnd(bytes, 0, first - 1)).toBe(-1)
})
