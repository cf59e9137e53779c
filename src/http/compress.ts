/**
 * Compressed answers (docs/operations.md#compression): a JSON answer over ~1 KB goes out in the
 * client's best `Accept-Encoding` of zstd, br and gzip. Never a stream (an SSE event must reach the
 * client when it is written). Only requests that carry `Accept-Encoding` come here.
 */
import { promisify } from "node:util"
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from "node:zlib"

/** Below this, compressing saves less than a packet. */
export const MIN_COMPRESSED_BYTES = 1024
/** Above this, the work goes to the thread pool (gzip of 256 KB is ~3 ms of CPU), not the event loop. */
const ASYNC_FROM_BYTES = 256 * 1024

type Coding = "zstd" | "br" | "gzip"
/** Ours, in order of preference at equal quality values: zstd is the cheapest per byte, gzip the most widely read. */
const CODINGS: ReadonlyArray<Coding> = ["zstd", "br", "gzip"]

/** The coding to answer in, from an `Accept-Encoding` value (quality values honoured; `q=0` refuses one; `*` reads as gzip). */
export const chooseCoding = (accept: string): Coding | undefined => {
  let best: Coding | undefined
  let bestQ = 0
  const refused = new Set<string>()
  for (const part of accept.split(",")) {
    const [token = "", ...params] = part.trim().toLowerCase().split(";")
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith("q="))
    const q = qParam === undefined ? 1 : Number(qParam.slice(2))
    const name = token === "x-gzip" ? "gzip" : token === "*" && !refused.has("gzip") ? "gzip" : token
    if (!(q > 0)) {
      refused.add(name)
      continue
    }
    const coding = CODINGS.find((c) => c === name)
    if (coding === undefined || refused.has(coding)) continue
    if (q > bestQ || (q === bestQ && best !== undefined && CODINGS.indexOf(coding) < CODINGS.indexOf(best))) {
      best = coding
      bestQ = q
    }
  }
  return best !== undefined && refused.has(best) ? undefined : best
}

const gzipAsync = promisify(gzip)
const brotliAsync = promisify(brotliCompress)
// Quality 5: most of brotli's gain for a small part of its top quality's CPU.
const BROTLI = { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } }

const compress = (coding: Coding, bytes: Uint8Array<ArrayBuffer>): Uint8Array | Promise<Uint8Array> => {
  const large = bytes.byteLength >= ASYNC_FROM_BYTES
  switch (coding) {
    case "zstd":
      return large ? Bun.zstdCompress(bytes, { level: 3 }) : Bun.zstdCompressSync(bytes, { level: 3 })
    case "br":
      return large ? brotliAsync(bytes, BROTLI) : brotliCompressSync(bytes, BROTLI)
    case "gzip":
      return large ? gzipAsync(bytes) : gzipSync(bytes)
  }
}

/** Answers without a body: nothing to compress. */
const NO_BODY = new Set([101, 204, 205, 304])

/**
 * `res` compressed for a client that sent `accept`, when it is a JSON answer worth compressing; else
 * `res` as it was, synchronously (no promise for an answer that is not JSON or a coding not accepted).
 * `res.body` is not touched before the decision: reading it makes a stream (~3 µs).
 */
export const compressedJson = (res: Response, accept: string): Response | Promise<Response> => {
  const type = res.headers.get("content-type")
  if (type === null || !type.startsWith("application/json") || NO_BODY.has(res.status) || res.headers.has("content-encoding")) return res
  const coding = chooseCoding(accept)
  return coding === undefined ? res : compressedAs(res, coding)
}

const compressedAs = async (res: Response, coding: Coding): Promise<Response> => {
  const bytes = new Uint8Array(await res.arrayBuffer())
  const headers = res.headers
  headers.append("vary", "Accept-Encoding")
  if (bytes.byteLength < MIN_COMPRESSED_BYTES) return new Response(bytes, { status: res.status, statusText: res.statusText, headers })
  const packed = await compress(coding, bytes)
  headers.set("content-encoding", coding)
  headers.delete("content-length")
  return new Response(packed as Uint8Array<ArrayBuffer>, { status: res.status, statusText: res.statusText, headers })
}
