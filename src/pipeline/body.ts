/** Request bodies read with a cap (413 without reading past the limit) and a deadline (408). */
import { BadRequest, PayloadTooLarge, RateLimited, RequestTimeout, UnsupportedMediaType } from "../domain/errors.js"
import { Deadlines } from "../deadlines.js"

export const tooLarge = (max: number) =>
  new PayloadTooLarge({ message: `Request body is larger than the maximum of ${max} bytes` })

/** The body's bytes, or a PayloadTooLarge once more than `max` bytes arrive (the rest is not read). */
export const readCapped = async (req: Request, max: number): Promise<Uint8Array<ArrayBuffer> | PayloadTooLarge> => {
  const declared = req.headers.get("content-length")
  if (declared !== null && Number(declared) > max) return tooLarge(max)
  // Length known and within the cap: one native read, without materializing `req.body` as a stream.
  if (declared !== null) return new Uint8Array(await req.arrayBuffer())
  if (req.body === null) return new Uint8Array(0)
  const reader = req.body.getReader()
  const parts: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > max) {
      await reader.cancel().catch(() => {})
      return tooLarge(max)
    }
    parts.push(value)
  }
  const out = new Uint8Array(size)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

const utf8 = new TextDecoder()

/** The request codings read (`Content-Encoding`), by the name `DecompressionStream` knows them by. */
const CODINGS: Readonly<Record<string, CompressionFormat | "brotli" | "zstd">> = { gzip: "gzip", "x-gzip": "gzip", br: "brotli", zstd: "zstd" }

/** A body that fails anywhere: the cap, the coding, the bytes. */
export type BodyRefusal = PayloadTooLarge | UnsupportedMediaType | BadRequest

/**
 * A compressed body (gzip, br, zstd) as text, decompressed as it streams in: the cap counts the
 * decompressed bytes and the read stops once they pass it, so a small bomb is a 413 holding at
 * most the cap (docs/operations.md#compression). An unknown coding is 415; bytes that are not
 * what the coding says, 400.
 */
const readEncodedText = (req: Request, max: number, encoding: string): Promise<string | BodyRefusal> | BodyRefusal => {
  const name = encoding.trim().toLowerCase()
  if (name === "identity" || name === "") return readCappedText(req, max, false)
  const format = Object.hasOwn(CODINGS, name) ? CODINGS[name] : undefined
  if (format === undefined) {
    return new UnsupportedMediaType({
      message: `Unsupported Content-Encoding '${encoding.slice(0, 200)}': send the body as it is, or in gzip, br or zstd`,
    })
  }
  const declared = req.headers.get("content-length")
  if (declared !== null && Number(declared) > max) return tooLarge(max)
  if (req.body === null) return Promise.resolve("")
  return (async () => {
    const reader = req.body!.pipeThrough(new DecompressionStream(format as CompressionFormat)).getReader()
    const parts: Array<Uint8Array> = []
    let size = 0
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        size += value.byteLength
        if (size > max) {
          await reader.cancel().catch(() => {})
          return new PayloadTooLarge({ message: `Request body is larger than the maximum of ${max} bytes once decompressed (${name})` })
        }
        parts.push(value)
      }
    } catch {
      return new BadRequest({ message: `The request body is not valid ${name} data (Content-Encoding: ${name})` })
    }
    const out = new Uint8Array(size)
    let at = 0
    for (const p of parts) {
      out.set(p, at)
      at += p.byteLength
    }
    return utf8.decode(out)
  })()
}

/**
 * The body as text (UTF-8: a BOM dropped, bad bytes replaced), under the same cap. With a length
 * it is read and decoded in one native call (no bytes object, no decoder call); without one, by
 * `readCapped`. Not async: a refusal by length needs no promise. A `Content-Encoding` (one header
 * read for every body) sends it through `readEncodedText`.
 */
export const readCappedText = (req: Request, max: number, encoded = true): Promise<string | BodyRefusal> | BodyRefusal => {
  if (encoded) {
    const encoding = req.headers.get("content-encoding")
    if (encoding !== null) return readEncodedText(req, max, encoding)
  }
  const declared = req.headers.get("content-length")
  if (declared === null) return readCapped(req, max).then((bytes) => (bytes instanceof Uint8Array ? utf8.decode(bytes) : bytes))
  return Number(declared) > max ? tooLarge(max) : req.text()
}

export const hasBody = (req: Request) => {
  const len = req.headers.get("content-length")
  return (len !== null && len !== "0") || req.headers.has("transfer-encoding")
}

/** JSON bodies only: `application/json` or `+json` types. */
export const checkJsonContentType = (req: Request): UnsupportedMediaType | undefined => {
  const type = req.headers.get("content-type")
  if (type !== null && /^application\/([\w.+-]*\+)?json\b/i.test(type.trim())) return undefined
  return new UnsupportedMediaType({
    message: `Unsupported Content-Type ${type === null ? "(none)" : `'${type}'`}: send application/json`,
  })
}

export const BODY_TIMED_OUT = Symbol("body timed out")
/** The slowest body rate allowed on top of the base body deadline: 64 KB/s. */
const MIN_BODY_BYTES_PER_S = 64 * 1024

/** Milliseconds a body of `bytes` may take beyond the base deadline. */
export const bodyAllowanceMs = (bytes: number) => (bytes > 0 ? Math.ceil((bytes * 1000) / MIN_BODY_BYTES_PER_S) : 0)

export const bodyTimedOut = (baseMs: number) =>
  new RequestTimeout({
    message: `The request body did not arrive in time (${baseMs} ms plus its length at 64 KB/s)`,
  })

/**
 * A body read raced against its deadline: `baseMs` plus its declared length (or, chunked, the
 * largest body allowed) at 64 KB/s. One list of deadlines, one timer (`Deadlines`).
 */
export const makeBodyDeadline = (baseMs: number, maxBytes: number) => {
  const deadlines = new Deadlines(baseMs)
  return <A>(read: Promise<A>, length: string | null): Promise<A | typeof BODY_TIMED_OUT> =>
    new Promise((resolve, reject) => {
      const deadline = deadlines.add(() => resolve(BODY_TIMED_OUT), bodyAllowanceMs(length === null ? maxBytes : Number(length)))
      read.then(
        (value) => {
          deadlines.remove(deadline)
          resolve(value)
        },
        (e: unknown) => {
          deadlines.remove(deadline)
          reject(e)
        },
      )
    })
}

/**
 * Unfinished bodies' defaults: a key's, and a client address's (docs/reference.md, "Environment
 * variables and limits"). A key's is the smaller, so one key holder leaves room for the other keys
 * of its address.
 */
export const DEFAULT_MAX_UNFINISHED_BODIES = { perKey: 64, perAddress: 256 } as const

/** What a request holds while its body arrives. */
export interface BodySlot {
  readonly keyHash: string
  readonly req: Request
  attributed: boolean
  address: string
}

/**
 * Request bodies still arriving, after the key was accepted: at most `perKey` for one key and
 * `perAddress` for one client address, so a key holder's unfinished bodies (held until the body
 * deadline) cannot take every descriptor or the address's share of requests in flight. Plain
 * code on the request path: while fewer than the smaller cap are unfinished in all, none can be
 * at a cap and a body is counted without its key or address (a set add and delete); the first
 * body that finds that many unfinished attributes them all (`server.requestIP` costs a few µs),
 * so from then on every count is exact.
 */
export class UnfinishedBodies {
  count = 0
  private readonly byKey = new Map<string, number>()
  private readonly byAddress = new Map<string, number>()
  private readonly unattributed = new Set<BodySlot>()
  private readonly threshold: number

  constructor(
    readonly perKey: number,
    readonly perAddress: number,
    private readonly addressOf: (req: Request) => string,
  ) {
    this.threshold = Math.min(perKey, perAddress)
  }

  /** Counts the body of `req` (sent with the key `keyHash`), or says which cap it is over (nothing counted then). */
  enter(keyHash: string, req: Request): BodySlot | "per_key" | "per_address" {
    const slot: BodySlot = { keyHash, req, attributed: false, address: "" }
    if (this.count < this.threshold) this.unattributed.add(slot)
    else {
      if (this.unattributed.size > 0) this.attributeAll()
      if ((this.byKey.get(keyHash) ?? 0) >= this.perKey) return "per_key"
      const address = this.addressOf(req)
      if ((this.byAddress.get(address) ?? 0) >= this.perAddress) return "per_address"
      this.attribute(slot, address)
    }
    this.count++
    return slot
  }

  /** The body arrived, or its read ended otherwise. */
  leave(slot: BodySlot): void {
    this.count--
    if (!slot.attributed) {
      this.unattributed.delete(slot)
      return
    }
    slot.attributed = false
    const keyLeft = (this.byKey.get(slot.keyHash) ?? 1) - 1
    if (keyLeft === 0) this.byKey.delete(slot.keyHash)
    else this.byKey.set(slot.keyHash, keyLeft)
    const addressLeft = (this.byAddress.get(slot.address) ?? 1) - 1
    if (addressLeft === 0) this.byAddress.delete(slot.address)
    else this.byAddress.set(slot.address, addressLeft)
  }

  private attribute(slot: BodySlot, address: string): void {
    slot.attributed = true
    slot.address = address
    this.byKey.set(slot.keyHash, (this.byKey.get(slot.keyHash) ?? 0) + 1)
    this.byAddress.set(address, (this.byAddress.get(address) ?? 0) + 1)
  }

  private attributeAll(): void {
    for (const slot of this.unattributed) this.attribute(slot, this.addressOf(slot.req))
    this.unattributed.clear()
  }
}

/** The answer to a body over a cap: 429, retry in a second, and the connection closed (the body is not read). */
export const tooManyUnfinished = (over: "per_key" | "per_address", bodies: UnfinishedBodies) =>
  new RateLimited({
    message:
      over === "per_key"
        ? `This key has ${bodies.perKey} request bodies still arriving, its maximum (server.max_unfinished_bodies_per_key); retry when they have arrived`
        : `Your address has ${bodies.perAddress} request bodies still arriving, its maximum (server.max_unfinished_bodies_per_ip); retry when they have arrived`,
    retry_after: 1,
  })
