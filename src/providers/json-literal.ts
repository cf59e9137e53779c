/**
 * JSON string literals read in place from upstream text, for the streamed-delta fast path
 * (openai-chat/stream.ts): a delta taken from its chunk's text is forwarded as it came, with no
 * `JSON.parse` of the chunk and no `JSON.stringify` of the delta (~0.1 µs instead of 0.33 µs
 * per text chunk in a micro-benchmark, Bun 1.4.5). Anything this does not accept goes the slow way.
 */

const QUOTE = 34
const BACKSLASH = 92

const isHex = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

/** JSON's escapes of one character after the backslash: `"` `\\` `/` `b` `f` `n` `r` `t`. */
const isShortEscape = (e: number) => e === QUOTE || e === BACKSLASH || e === 47 || e === 98 || e === 102 || e === 110 || e === 114 || e === 116

/**
 * The end (exclusive) of the JSON string literal opening at `start` in `text`, or -1 if none
 * opens there or it breaks JSON's rules (a raw control character, an unknown escape, a short
 * `\u` escape, no closing quote).
 */
export const jsonLiteralEnd = (text: string, start: number): number => {
  if (text.charCodeAt(start) !== QUOTE) return -1
  const length = text.length
  for (let i = start + 1; i < length; i++) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) return i + 1
    if (c < 32) return -1
    if (c !== BACKSLASH) continue
    const e = text.charCodeAt(++i)
    if (e === 117) {
      // \uXXXX
      if (i + 4 >= length) return -1
      if (!isHex(text.charCodeAt(i + 1)) || !isHex(text.charCodeAt(i + 2)) || !isHex(text.charCodeAt(i + 3)) || !isHex(text.charCodeAt(i + 4))) return -1
      i += 4
    } else if (!isShortEscape(e)) {
      return -1
    }
  }
  return -1
}

/**
 * The string `text` is the JSON of, as a string of its own; undefined when `text` is not the JSON
 * of a string (JSON.parse is the validation). Not a slice of `text`: a slice keeps its whole
 * upstream read alive for as long as the answer's text holds it (2,000 held streams grew
 * ~6 MB/s, ~300 bytes per token, until they ended; parsed: flat).
 */
export const jsonStringValue = (text: string): string | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The end (exclusive) of the JSON string literal opening at `start` in `bytes` (UTF-8), looking
 * no further than `end`, or -1 when none opens there, a raw control character comes first, or it
 * does not close. Only finds the closing quote (an escape skips the byte after its backslash; no
 * byte of a multi-byte character is a quote or a backslash): `jsonStringValue` of the literal is
 * the validation.
 */
export const jsonLiteralEndInBytes = (bytes: Uint8Array, start: number, end: number): number => {
  if (bytes[start] !== QUOTE) return -1
  for (let i = start + 1; i < end; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) return i + 1
    if (c < 32) return -1
    if (c === BACKSLASH) i++
  }
  return -1
}

/**
 * The last bytes a view was asked for, and the view. Every chunk of one network read is handled
 * before the next read, so one slot for the whole process is hit for all but the first chunk of
 * a read, and it keeps no stream's read alive (one read in all, until the next).
 */
let viewed: Uint8Array | undefined
let view: DataView | undefined
const viewOf = (bytes: Uint8Array): DataView => {
  if (bytes === viewed && view !== undefined) return view
  viewed = bytes
  view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  return view
}

/**
 * Fixed bytes looked for at a given place, four at a time through a DataView: ~22 ns per match of
 * a chunk's 140-byte head or its tail, against ~60 for Buffer's native compare (a call with its
 * argument checks) and ~70 for a loop over the bytes (micro-benchmark, Bun 1.4.5).
 */
export class BytePattern {
  readonly length: number
  private readonly bytes: Uint8Array
  /** The pattern's whole 4-byte words, as the DataView reads them. */
  private readonly words: Int32Array

  constructor(bytes: Uint8Array) {
    this.bytes = bytes
    this.length = bytes.length
    // Big-endian, as DataView#getInt32 reads them; composed from the bytes, not through a view of
    // their own (a learned pattern's `.buffer` and DataView were ~1 % of a short stream's CPU).
    const words = new Int32Array(bytes.length >>> 2)
    for (let i = 0; i < words.length; i++) {
      const at = i * 4
      words[i] = ((bytes[at] as number) << 24) | ((bytes[at + 1] as number) << 16) | ((bytes[at + 2] as number) << 8) | (bytes[at + 3] as number)
    }
    this.words = words
  }

  /** Whether `bytes[at, end)` starts with the pattern. */
  foundAt(bytes: Uint8Array, at: number, end: number): boolean {
    if (at + this.length > end) return false
    const view = viewOf(bytes)
    const words = this.words
    for (let i = 0; i < words.length; i++) if (view.getInt32(at + i * 4) !== words[i]) return false
    const pattern = this.bytes
    for (let i = words.length * 4; i < pattern.length; i++) if (bytes[at + i] !== pattern[i]) return false
    return true
  }
}

const bufferText = Buffer.prototype.toString

/** `bytes[start, end)` read as latin1, for bytes known to be ASCII: one native call, one flat string. */
export const latin1Slice = (bytes: Uint8Array, start: number, end: number): string => bufferText.call(bytes, "latin1", start, end)

/**
 * Whether `bytes[start, end)`, the inside of a JSON string literal, is printable ASCII whose
 * escapes are all JSON's (`\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t` `\uXXXX`): a literal that can be
 * forwarded byte for byte and decoded later, all at once (its bytes are its latin1 text).
 * A quote is only ever escaped there (`jsonLiteralEndInBytes` stops at the first other).
 */
export const isPlainLiteral = (bytes: Uint8Array, start: number, end: number): boolean => {
  for (let i = start; i < end; i++) {
    const c = bytes[i] as number
    if (c < 32 || c > 126) return false
    if (c !== BACKSLASH) continue
    if (++i >= end) return false
    const e = bytes[i] as number
    if (e === 117) {
      if (i + 4 >= end) return false
      if (!isHex(bytes[i + 1] as number) || !isHex(bytes[i + 2] as number) || !isHex(bytes[i + 3] as number) || !isHex(bytes[i + 4] as number)) return false
      i += 4
    } else if (!isShortEscape(e)) {
      return false
    }
  }
  return true
}
