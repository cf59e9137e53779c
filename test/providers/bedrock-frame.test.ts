/**
 * The hand-written event-stream frame decoder (src/providers/bedrock/frame.ts) against the
 * reference, @smithy/eventstream-codec: the same frames through both, compared field by field
 * (the five headers the stream reads, the payload's bytes), and every frame the codec refuses
 * refused too.
 */
import { describe, expect, test } from "bun:test"
import { EventStreamCodec, Int64 } from "@smithy/eventstream-codec"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"
import { decodeFrame } from "../../src/providers/bedrock/frame"
import { ConverseStreamTranslator, FrameSplitter, textDeltaInPlace } from "../../src/providers/bedrock/stream"
import type { ConverseStreamEvent } from "../../src/providers/bedrock/wire"
import type { ProviderEvent } from "../../src/providers/types"
import { literalTexts } from "./helpers"

type Headers = Parameters<EventStreamCodec["encode"]>[0]["headers"]

const codec = new EventStreamCodec(toUtf8, fromUtf8)
const encode = (headers: Headers, body: string | Uint8Array): Uint8Array =>
  codec.encode({ headers, body: typeof body === "string" ? fromUtf8(body) : body })

const str = (value: string) => ({ type: "string" as const, value })
const event = (eventType: string, payload: unknown): Uint8Array =>
  encode({ ":event-type": str(eventType), ":content-type": str("application/json"), ":message-type": str("event") }, JSON.stringify(payload))

/** What the stream reads of a frame, from the codec: a header's value when it is a string. */
const reference = (frame: Uint8Array) => {
  const message = codec.decode(frame)
  const headers = message.headers as Record<string, { type: string; value: unknown }>
  const string = (name: string) => {
    const header = headers[name]
    return header !== undefined && header.type === "string" ? (header.value as string) : undefined
  }
  return {
    messageType: string(":message-type"),
    eventType: string(":event-type"),
    exceptionType: string(":exception-type"),
    errorCode: string(":error-code"),
    errorMessage: string(":error-message"),
    body: Array.from(message.body),
  }
}
const own = (frame: Uint8Array, start = 0, end = frame.length) => {
  const f = decodeFrame(frame, start, end)
  return {
    messageType: f.messageType,
    eventType: f.eventType,
    exceptionType: f.exceptionType,
    errorCode: f.errorCode,
    errorMessage: f.errorMessage,
    body: Array.from(frame.subarray(f.bodyStart, f.bodyEnd)),
  }
}
const refuses = (decode: () => unknown): boolean => {
  try {
    decode()
    return false
  } catch {
    return true
  }
}

/** Every header value type of the event-stream format, around the headers the stream reads. */
const ALL_TYPES: Headers = {
  ":flag-true": { type: "boolean", value: true },
  ":flag-false": { type: "boolean", value: false },
  ":byte": { type: "byte", value: -7 },
  ":short": { type: "short", value: -1234 },
  ":event-type": str("contentBlockDelta"),
  ":integer": { type: "integer", value: 123456789 },
  ":long": { type: "long", value: Int64.fromNumber(-9007199254740) },
  ":binary": { type: "binary", value: new Uint8Array([0, 255, 7, 13, 10]) },
  ":message-type": str("event"),
  ":timestamp": { type: "timestamp", value: new Date(1764400000000) },
  ":uuid": { type: "uuid", value: "a1b2c3d4-e5f6-4789-abcd-ef0123456789" },
  ":content-type": str("application/json"),
}

const FRAMES: Array<[string, Uint8Array]> = [
  ["messageStart", event("messageStart", { role: "assistant", p: "abcdefghijklmnopq" })],
  ["a text delta", event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Hello, wörld ✓ 🌍" }, p: "abcd" })],
  ["a tool call's start", event("contentBlockStart", { contentBlockIndex: 1, start: { toolUse: { toolUseId: "tooluse_1", name: "get_weather" } } })],
  ["a tool call's input", event("contentBlockDelta", { contentBlockIndex: 1, delta: { toolUse: { input: '{"city":"Par' } } })],
  ["reasoning", event("contentBlockDelta", { contentBlockIndex: 0, delta: { reasoningContent: { text: "thinking…" } } })],
  ["messageStop", event("messageStop", { stopReason: "end_turn" })],
  ["metadata", event("metadata", { usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 }, metrics: { latencyMs: 40 } })],
  ["every header value type", encode(ALL_TYPES, '{"contentBlockIndex":0,"delta":{"text":"x"}}')],
  [
    "an exception frame",
    encode(
      { ":exception-type": str("throttlingException"), ":content-type": str("application/json"), ":message-type": str("exception") },
      JSON.stringify({ message: "Too many tokens, please wait before trying again." }),
    ),
  ],
  [
    "an error frame (error code and message headers, empty body)",
    encode({ ":error-code": str("InternalFailure"), ":error-message": str("An internal error occurred ✗"), ":message-type": str("error") }, ""),
  ],
  ["no headers, empty body", encode({}, "")],
  ["the stream's headers as other types than string", encode({ ":event-type": { type: "integer", value: 3 }, ":message-type": { type: "boolean", value: true } }, "{}")],
  ["a header name the stream does not read, with a long string value", encode({ "x-amzn-requestid": str("r".repeat(3000)), ":event-type": str("metadata") }, "{}")],
  ["a large payload", event("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "long ".repeat(20000) } })],
]

describe("the event-stream frame decoder reads what the reference codec reads", () => {
  for (const [name, frame] of FRAMES) {
    test(`${name}: the same headers and payload`, () => {
      expect(own(frame)).toEqual(reference(frame))
    })
  }

  test("a frame inside a larger buffer (a view at an offset, or a range of it) decodes the same as a copy of it", () => {
    const frame = FRAMES[1]?.[1] as Uint8Array
    const buffer = new Uint8Array(frame.length + 37)
    buffer.fill(0xee)
    buffer.set(frame, 19)
    expect(own(buffer.subarray(19, 19 + frame.length))).toEqual(reference(frame))
    expect(own(buffer, 19, 19 + frame.length)).toEqual(reference(frame))
  })
})

describe("frames the reference refuses are refused", () => {
  const base = FRAMES[1]?.[1] as Uint8Array
  const corrupt = (at: number): Uint8Array => {
    const copy = base.slice()
    copy[at] = (copy[at] as number) ^ 0x01
    return copy
  }
  const cases: Array<[string, Uint8Array]> = [
    ["a flipped bit in the payload (message CRC)", corrupt(base.length - 10)],
    ["a flipped bit in the message CRC itself", corrupt(base.length - 1)],
    ["a flipped bit in the prelude CRC", corrupt(9)],
    ["a headers length that does not match its prelude CRC", corrupt(7)],
    ["a flipped bit in a header", corrupt(14)],
    ["a total length that is not the frame's", base.subarray(0, base.length - 1)],
    ["fewer bytes than a frame's prelude and CRC", base.subarray(0, 12)],
  ]
  for (const [name, frame] of cases) {
    test(`${name}: both refuse it`, () => {
      expect(refuses(() => codec.decode(frame))).toBe(true)
      expect(refuses(() => decodeFrame(frame))).toBe(true)
    })
  }

  /** A frame with valid CRCs around the given headers bytes (the codec would not write them). */
  const rawFrame = (headers: Array<number>, body: Array<number>): Uint8Array => {
    const total = 16 + headers.length + body.length
    const out = new Uint8Array(total)
    const view = new DataView(out.buffer)
    view.setUint32(0, total)
    view.setUint32(4, headers.length)
    view.setUint32(8, Bun.hash.crc32(out.subarray(0, 8)))
    out.set(headers, 12)
    out.set(body, 12 + headers.length)
    view.setUint32(total - 4, Bun.hash.crc32(out.subarray(0, total - 4)))
    return out
  }
  const name = Array.from(fromUtf8(":event-type"))
  const malformed: Array<[string, Uint8Array]> = [
    ["an unknown header type tag", rawFrame([name.length, ...name, 10, 0], [123, 125])],
    ["a string header whose length runs past the headers", rawFrame([name.length, ...name, 7, 0, 40, 65, 66], [123, 125])],
    ["a header name that runs past the headers", rawFrame([40, ...name], [123, 125])],
    ["a fixed-size value cut short by the headers' end", rawFrame([name.length, ...name, 4, 0, 0], [123, 125])],
  ]
  for (const [what, frame] of malformed) {
    test(`${what}, under valid CRCs: both refuse it`, () => {
      expect(refuses(() => codec.decode(frame))).toBe(true)
      expect(refuses(() => decodeFrame(frame))).toBe(true)
    })
  }

  test("a valid frame built the same way decodes (the malformed cases fail for their headers, not the CRCs)", () => {
    const frame = rawFrame([name.length, ...name, 7, 0, 2, 65, 66], [123, 125])
    expect(own(frame)).toEqual(reference(frame))
    expect(own(frame).eventType).toBe("AB")
  })
})

describe("frames split at awkward boundaries reach the decoder whole", () => {
  const stream = FRAMES.map(([, frame]) => frame)
  const joined = new Uint8Array(stream.reduce((n, f) => n + f.length, 0))
  let offset = 0
  for (const frame of stream) {
    joined.set(frame, offset)
    offset += frame.length
  }
  const expected = stream.map(reference)

  /** The stream fed in reads of `size` bytes (each read a lent buffer, reused for the next). */
  const readsOf = (size: number) => {
    const decoded: Array<ReturnType<typeof own>> = []
    const splitter = new FrameSplitter(1 << 20, (bytes, start, end) => decoded.push(own(bytes, start, end)))
    const lent = new Uint8Array(size + 8)
    for (let at = 0; at < joined.length; at += size) {
      const piece = joined.subarray(at, Math.min(at + size, joined.length))
      lent.fill(0xee)
      lent.set(piece, 3)
      splitter.feed(lent, 3, 3 + piece.length)
    }
    expect(splitter.holding).toBe(false)
    return decoded
  }

  for (const size of [1, 2, 3, 4, 5, 11, 12, 13, 15, 16, 17, 64, 1000, 4096]) {
    test(`reads of ${size} bytes: every frame decodes as the reference decodes it`, () => {
      expect(readsOf(size)).toEqual(expected)
    })
  }

  test("one read of the whole stream: every frame decodes as the reference decodes it", () => {
    expect(readsOf(joined.length)).toEqual(expected)
  })
})

describe("a text delta's payload read in place gives the events JSON.parse and the translator give", () => {
  /** The general way: the payload parsed, its event translated. */
  const parsed = (body: string): Array<ProviderEvent> => {
    const out: Array<ProviderEvent> = []
    new ConverseStreamTranslator(false).push("contentBlockDelta", JSON.parse(body) as ConverseStreamEvent, out)
    return out
  }
  /** In place, from the payload's bytes at an offset of a larger read; undefined when it goes the general way. */
  const inPlace = (body: string): Array<ProviderEvent> | undefined => {
    const bytes = fromUtf8(`xyz${body}qq`)
    const out: Array<ProviderEvent> = []
    if (!textDeltaInPlace(bytes, 3, bytes.length - 2, out)) return undefined
    // Compared as the general way gives them: the literal checked to decode to the delta, then dropped.
    return out.flatMap(literalTexts).map((e) => {
      if (e.type !== "text" || e.json === undefined) return e
      expect(JSON.parse(e.json)).toBe(e.delta)
      return { type: "text", delta: e.delta }
    })
  }

  const taken = [
    ["AWS's shape with padding", '{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123"}'],
    ["no padding", '{"contentBlockIndex":12,"delta":{"text":"Hello"}}'],
    ["empty padding", '{"contentBlockIndex":3,"delta":{"text":" world"},"p":""}'],
    ["JSON escapes in the text", '{"contentBlockIndex":0,"delta":{"text":"a \\"quote\\", a \\\\ and\\na \\u00e9 \\/ \\t"},"p":"ab"}'],
    ["text that is not ASCII", '{"contentBlockIndex":0,"delta":{"text":"日本語 ✓ 🌍"},"p":"abc"}'],
    ["an empty text (no event)", '{"contentBlockIndex":0,"delta":{"text":""},"p":"abc"}'],
  ] as const
  for (const [what, body] of taken) {
    test(`${what}: read in place, the same events`, () => {
      expect(inPlace(body)).toEqual(parsed(body))
    })
  }

  const general = [
    ["another key order", '{"delta":{"text":"Hello"},"contentBlockIndex":0,"p":"abc"}'],
    ["whitespace", '{"contentBlockIndex": 0,"delta":{"text":"Hello"},"p":"abc"}'],
    ["a second text key after the literal (JSON.parse keeps the last)", '{"contentBlockIndex":0,"delta":{"text":"a","text":"b"},"p":"abc"}'],
    ["another key after the padding", '{"contentBlockIndex":0,"delta":{"text":"a"},"p":"abc","delta":{"text":"b"}}'],
    ["padding with other characters", '{"contentBlockIndex":0,"delta":{"text":"a"},"p":"ab\\"c"}'],
    ["a leading zero in the index", '{"contentBlockIndex":01,"delta":{"text":"a"}}'],
    ["a tool call's input", '{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{}"}},"p":"abc"}'],
    ["an escape JSON does not have in the text", '{"contentBlockIndex":0,"delta":{"text":"a\\qb"},"p":"abc"}'],
    ["a raw control character in the text", '{"contentBlockIndex":0,"delta":{"text":"a\tb"},"p":"abc"}'],
    ["a cut payload", '{"contentBlockIndex":0,"delta":{"text":"abc'],
  ] as const
  for (const [what, body] of general) {
    test(`${what}: left to the general way`, () => {
      expect(inPlace(body)).toBeUndefined()
    })
  }

  test("deltas of one read go on as one run of literals of that read, in order", () => {
    const bodies = ['{"contentBlockIndex":0,"delta":{"text":"one "},"p":"a"}', '{"contentBlockIndex":0,"delta":{"text":"two"},"p":"abcd"}']
    const bytes = fromUtf8(bodies.join(""))
    const out: Array<ProviderEvent> = []
    const first = (bodies[0] as string).length
    expect(textDeltaInPlace(bytes, 0, first, out)).toBe(true)
    expect(textDeltaInPlace(bytes, first, bytes.length, out)).toBe(true)
    expect(out.length).toBe(1)
    expect(out[0]?.type).toBe("text_literals")
    expect(out.flatMap(literalTexts).map((e) => (e as { delta: string }).delta)).toEqual(["one ", "two"])
  })
})
