/**
 * JSON string literals read in place from upstream text, for the streamed-delta fast path
 * (openai-chat/stream.ts): a delta taken from its chunk's text is forwarded as it came, with no
 * `JSON.parse` of the chunk and no `JSON.stringify` of the delta (~0.1 µs instead of 0.33 µs
 * per text chunk in a micro-benchmark, Bun 1.4.5). Anything this does not accept goes the slow way.
 */

const QUOTE = 34
const BACKSLASH = 92

const isHex = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

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
    } else if (!(e === QUOTE || e === BACKSLASH || e === 47 || e === 98 || e === 102 || e === 110 || e === 114 || e === 116)) {
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
 * The end (exclusive) of the JSON string literal opening at `start` in `bytes` (UTF-8), or -1
 * when none opens there, a raw control character comes first, or it does not close. Only finds
 * the closing quote (an escape skips the byte after its backslash; no byte of a multi-byte
 * character is a quote or a backslash): `jsonStringValue` of the literal is the validation.
 */
export const jsonLiteralEndInBytes = (bytes: Uint8Array, start: number): number => {
  if (bytes[start] !== QUOTE) return -1
  const length = bytes.length
  for (let i = start + 1; i < length; i++) {
    const c = bytes[i] as number
    if (c === QUOTE) return i + 1
    if (c < 32) return -1
    if (c === BACKSLASH) i++
  }
  return -1
}

/**
 * Whether `bytes` holds `pattern` at `at`. Buffer's native compare: ~45 ns for a 140-byte
 * pattern against ~150 ns for a loop over the bytes.
 */
export const bytesAt = (bytes: Uint8Array, at: number, pattern: Buffer): boolean => {
  const end = at + pattern.length
  return end <= bytes.length && pattern.compare(bytes, at, end) === 0
}

const bufferText = Buffer.prototype.toString

/** `bytes[start, end)` read as latin1, for bytes known to be ASCII: one native call, one flat string. */
export const latin1Slice = (bytes: Uint8Array, start: number, end: number): string => bufferText.call(bytes, "latin1", start, end)

/** Slots of the token table: plain-ASCII texts seen lately, each in the slot of its bytes' hash. */
const TOKEN_SLOTS = 4096
const MAX_TOKEN_LENGTH = 32
const tokenTexts: Array<string | undefined> = new Array(TOKEN_SLOTS).fill(undefined)

/**
 * The text of `bytes[start, end)` when it is printable ASCII other than a backslash (the inside
 * of a JSON string literal that is its own value) and at most 32 bytes; undefined otherwise.
 * Tokens repeat: each is one shared string, found by its bytes in a table of the 4,096 seen
 * lately (a hash of the bytes picks the slot; the bytes are compared before it is used). No
 * decode, no JSON.parse, no native call on a hit; and no string of its own per token, which the
 * answer's text would hold until compacted, long enough to outlive young collections.
 */
export const tokenText = (bytes: Uint8Array, start: number, end: number): string | undefined => {
  const length = end - start
  if (length > MAX_TOKEN_LENGTH) return undefined
  let hash = length
  for (let i = start; i < end; i++) {
    const c = bytes[i] as number
    if (c < 32 || c > 126 || c === BACKSLASH) return undefined
    hash = (Math.imul(hash, 31) + c) | 0
  }
  const slot = (hash ^ (hash >>> 12)) & (TOKEN_SLOTS - 1)
  const seen = tokenTexts[slot]
  if (seen !== undefined && seen.length === length) {
    let same = true
    for (let i = 0; i < length; i++) {
      if (seen.charCodeAt(i) !== bytes[start + i]) {
        same = false
        break
      }
    }
    if (same) return seen
  }
  const text = latin1Slice(bytes, start, end)
  tokenTexts[slot] = text
  return text
}

/**
 * Whether every byte of `bytes[start, end)` is printable ASCII other than a backslash: the inside
 * of a JSON string literal whose bytes are its text (sliced as latin1, no UTF-8 decode needed).
 */
export const isPlainAscii = (bytes: Uint8Array, start: number, end: number): boolean => {
  for (let i = start; i < end; i++) {
    const c = bytes[i] as number
    if (c < 32 || c > 126 || c === BACKSLASH) return false
  }
  return true
}
