/**
 * One AWS event-stream frame (the binary framing of ConverseStream) decoded by hand, for the
 * per-frame path of stream.ts: prelude (total length, headers length, prelude CRC32), headers,
 * payload, message CRC32. The message CRC32 is checked with Bun's native `Bun.hash.crc32`, the prelude's (8 bytes) in JS, and of the
 * headers only the five the stream reads become strings (`:message-type`, `:event-type`,
 * `:exception-type`, `:error-code`, `:error-message`); the others are walked over, checked for
 * their type tag and length, and not decoded. The payload is a range of the bytes, not a copy.
 *
 * @smithy/eventstream-codec is the reference: a test feeds the same frames through both (every
 * header value type, exception frames, frames split across reads, corrupt CRCs) and compares the
 * results field by field. Against `codec.decode` (JS CRC32, a header map of objects, a string per
 * header name and value) this reads a frame in ~350 ns against ~920 (bench/NOTES.md, "Bedrock streams").
 */

export interface ConverseFrame {
  /** `:message-type`: "event", "exception" or "error" (undefined when absent or not a string). */
  readonly messageType: string | undefined
  readonly eventType: string | undefined
  readonly exceptionType: string | undefined
  readonly errorCode: string | undefined
  readonly errorMessage: string | undefined
  /** The payload: `bytes[bodyStart, bodyEnd)` of the bytes decoded (not copied). */
  readonly bodyStart: number
  readonly bodyEnd: number
}

/** Prelude: total length (4), headers length (4), prelude CRC (4); then the message CRC (4). */
const PRELUDE = 12
const MIN_FRAME = 16

const utf8 = new TextDecoder("utf-8", { fatal: false })

/**
 * The header values of Converse frames repeat ("event", "contentBlockDelta", …): those seen are
 * answered from a few byte-compared entries instead of a TextDecoder call each.
 */
const SEEN_MAX = 16
const seenBytes: Array<Uint8Array> = []
const seenText: Array<string> = []
const repeatedText = (bytes: Uint8Array, start: number, end: number): string => {
  const length = end - start
  entries: for (let k = 0; k < seenBytes.length; k++) {
    const entry = seenBytes[k] as Uint8Array
    if (entry.length !== length) continue
    for (let i = 0; i < length; i++) if (entry[i] !== bytes[start + i]) continue entries
    return seenText[k] as string
  }
  const text = utf8.decode(bytes.subarray(start, end))
  if (seenBytes.length < SEEN_MAX && length <= 64) {
    seenBytes.push(bytes.slice(start, end))
    seenText.push(text)
  }
  return text
}

/** Header names the stream reads, as bytes; matched by length, then byte by byte. */
const MESSAGE_TYPE = 1
const EVENT_TYPE = 2
const EXCEPTION_TYPE = 3
const ERROR_CODE = 4
const ERROR_MESSAGE = 5
const NAMES: ReadonlyArray<readonly [Uint8Array, number]> = [
  [new TextEncoder().encode(":message-type"), MESSAGE_TYPE],
  [new TextEncoder().encode(":event-type"), EVENT_TYPE],
  [new TextEncoder().encode(":exception-type"), EXCEPTION_TYPE],
  [new TextEncoder().encode(":error-code"), ERROR_CODE],
  [new TextEncoder().encode(":error-message"), ERROR_MESSAGE],
]
const nameAt = (bytes: Uint8Array, start: number, length: number): number => {
  names: for (let k = 0; k < NAMES.length; k++) {
    const [name, id] = NAMES[k] as readonly [Uint8Array, number]
    if (name.length !== length) continue
    for (let i = 0; i < length; i++) if (name[i] !== bytes[start + i]) continue names
    return id
  }
  return 0
}

/** CRC32 (IEEE, as `Bun.hash.crc32`) of 8 bytes in JS: a native call costs ~4 times as much for so few. */
const CRC_TABLE = new Int32Array(256)
for (let n = 0; n < 256; n++) {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  CRC_TABLE[n] = c
}
const preludeCrc = (b: Uint8Array, start: number): number => {
  let c = -1
  for (let i = start; i < start + 8; i++) c = (CRC_TABLE[(c ^ (b[i] as number)) & 0xff] as number) ^ (c >>> 8)
  return (c ^ -1) >>> 0
}

const uint32 = (b: Uint8Array, at: number): number =>
  (((b[at] as number) << 24) | ((b[at + 1] as number) << 16) | ((b[at + 2] as number) << 8) | (b[at + 3] as number)) >>> 0

/** The fixed size of a header value of each type tag (-1: a 2-byte length then the bytes). */
const VALUE_SIZE = [0, 0, 1, 2, 4, 8, -1, -1, 8, 16]

/**
 * The frame in `bytes[start, end)` (exactly one frame's bytes), or an Error saying why it is not one: a length
 * that does not match, a CRC that does not, a header that overruns or has an unknown type tag.
 */
export const decodeFrame = (frame: Uint8Array, start = 0, end = frame.length): ConverseFrame => {
  const total = end - start
  if (total < MIN_FRAME) throw new Error("Provided message too short to accommodate event stream message overhead")
  if (uint32(frame, start) !== total) throw new Error("Reported message length does not match received message length")
  const headersLength = uint32(frame, start + 4)
  if (uint32(frame, start + 8) !== preludeCrc(frame, start)) throw new Error("The prelude checksum does not match the calculated CRC32 checksum")
  if (uint32(frame, end - 4) !== Bun.hash.crc32(frame.subarray(start, end - 4))) throw new Error("The message checksum does not match the calculated CRC32 checksum")
  if (headersLength > total - MIN_FRAME) throw new Error("The headers length overruns the message")
  const headersEnd = start + PRELUDE + headersLength
  let messageType: string | undefined
  let eventType: string | undefined
  let exceptionType: string | undefined
  let errorCode: string | undefined
  let errorMessage: string | undefined
  let at = start + PRELUDE
  while (at < headersEnd) {
    const nameLength = frame[at] as number
    const nameStart = at + 1
    at = nameStart + nameLength
    if (at >= headersEnd) throw new Error("A header overruns the headers")
    const tag = frame[at++] as number
    const size = VALUE_SIZE[tag]
    if (size === undefined) throw new Error("Unrecognized header type tag")
    let valueStart = at
    if (size >= 0) {
      at += size
    } else {
      if (at + 2 > headersEnd) throw new Error("A header overruns the headers")
      valueStart = at + 2
      at = valueStart + (((frame[at] as number) << 8) | (frame[at + 1] as number))
    }
    if (at > headersEnd) throw new Error("A header overruns the headers")
    // Only a string value (tag 7) of a header the stream reads becomes a string; a later header
    // of the same name replaces an earlier one, as in the codec's map.
    const id = nameAt(frame, nameStart, nameLength)
    if (id === 0) continue
    const value = tag !== 7 ? undefined : id <= EVENT_TYPE ? repeatedText(frame, valueStart, at) : utf8.decode(frame.subarray(valueStart, at))
    if (id === MESSAGE_TYPE) messageType = value
    else if (id === EVENT_TYPE) eventType = value
    else if (id === EXCEPTION_TYPE) exceptionType = value
    else if (id === ERROR_CODE) errorCode = value
    else errorMessage = value
  }
  return { messageType, eventType, exceptionType, errorCode, errorMessage, bodyStart: headersEnd, bodyEnd: end - 4 }
}
