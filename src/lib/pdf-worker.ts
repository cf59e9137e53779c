/**
 * The PDF worker (pdf.ts, for the file-parser plugin and web_fetch): one parse per worker, off the event loop. The page count is read
 * first and checked against `maxPages` before any text is extracted; the parent terminates the
 * worker at its time limit and when the process's memory grows past its bound while it parses.
 * Before the parser sees the file, every zlib stream in it (what FlateDecode reads) is inflated
 * once, at most to the bound, its output counted and dropped: a file whose streams inflate past `maxStreamInflated`
 * (one stream) or `maxInflated` (all of them) is refused (a 1 MB file can inflate to 1 GB, and
 * the parser keeps what it inflates). Messages: in `PdfJob`, out `PdfResult`.
 */
import { inflateSync, constants as zlibConstants } from "node:zlib"
import { extractText, getDocumentProxy } from "unpdf"

export interface PdfJob {
  readonly bytes: Uint8Array
  readonly maxPages: number
  /** Bytes all the file's compressed streams may inflate to together. */
  readonly maxInflated: number
  /** Bytes one compressed stream may inflate to. */
  readonly maxStreamInflated: number
}

export type PdfResult =
  | { readonly ok: true; readonly pages: number; readonly text: ReadonlyArray<string> }
  | {
      readonly ok: false
      readonly reason: "unreadable" | "too_many_pages" | "inflates_too_much" | "too_much_memory"
      readonly pages?: number
      readonly detail?: string
      /** `inflates_too_much`: which bound (`stream` or `total`). */
      readonly bound?: "stream" | "total"
    }

declare const self: Worker

/** Whether the two bytes at `at` are a zlib header (deflate, window ≤ 32 KB, check bits right), as FlateDecode requires. */
const zlibHeaderAt = (bytes: Uint8Array, at: number): boolean => {
  const cmf = bytes[at]
  const flg = bytes[at + 1]
  if (cmf === undefined || flg === undefined) return false
  return (cmf & 0x0f) === 8 && cmf >> 4 <= 7 && ((cmf << 8) | flg) % 31 === 0
}

/** Fed to the last inflater this much at a time: it stops reading at the end of the zlib stream. */
const FEED_BYTES = 64 * 1024

/**
 * The bytes the zlib stream at the start of `data` inflates to, counted and dropped as they come
 * (memory stays a chunk), or more than `limit` once past it. A truncated stream, or bytes after
 * its end, stop the count there.
 */
const countInflated = async (data: Uint8Array, limit: number): Promise<number> => {
  let at = 0
  const input = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= data.length) return controller.close()
      controller.enqueue(data.subarray(at, at + FEED_BYTES))
      at += FEED_BYTES
    },
  })
  const reader = input.pipeThrough(new DecompressionStream("deflate") as unknown as ReadableWritablePair<Uint8Array, Uint8Array>).getReader()
  let total = 0
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      total += value.byteLength
      if (total > limit) {
        await reader.cancel().catch(() => undefined)
        break
      }
    }
  } catch {
    // The end of the stream's data (bytes after it, or the file ends): counted up to here.
  }
  return total
}

/**
 * The bytes the zlib stream at `start` inflates to through `layers` inflaters (a filter chain of
 * FlateDecode twice inflates twice; every layer's output counts, the parser keeps each), or more
 * than `limit` once past it. The inner layers are inflated whole (each at most `limit`), the
 * last one counted as it comes.
 */
const inflatedSize = async (bytes: Uint8Array, start: number, layers: number, limit: number): Promise<number> => {
  let data: Uint8Array = bytes.subarray(start)
  let total = 0
  for (let layer = 0; layer < layers - 1; layer++) {
    try {
      // Z_SYNC_FLUSH: a truncated stream gives what it has; bytes after the stream's end are left.
      data = inflateSync(data, { finishFlush: zlibConstants.Z_SYNC_FLUSH, maxOutputLength: Math.max(1, limit - total + 1) })
    } catch (e) {
      // Past the bound (the output would not fit), or data that does not inflate (the parser fails on it too).
      return e instanceof RangeError || (e as { code?: unknown }).code === "ERR_BUFFER_TOO_LARGE" ? limit + 1 : total
    }
    total += data.byteLength
    if (total > limit || !zlibHeaderAt(data, 0)) return total
  }
  return total + (await countInflated(data, limit - total))
}

const STREAM_KEYWORD = /(?<!end)stream\r?\n/g

/** How many FlateDecode filters the dictionary before `streamAt` names (at least 1: the data has a zlib header). */
const flateLayers = (latin1: string, streamAt: number): number => {
  const from = Math.max(0, streamAt - 2048)
  const head = latin1.slice(from, streamAt)
  const dict = head.slice(Math.max(0, head.lastIndexOf(" obj")))
  const named = dict.split("FlateDecode").length - 1
  return Math.min(4, Math.max(1, named))
}

/** The first bound the file's compressed streams pass, or undefined. */
export const inflationOver = async (bytes: Uint8Array, maxInflated: number, maxStreamInflated: number): Promise<"stream" | "total" | undefined> => {
  const latin1 = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1")
  let total = 0
  for (const match of latin1.matchAll(STREAM_KEYWORD)) {
    const start = match.index + match[0].length
    if (!zlibHeaderAt(bytes, start)) continue
    const limit = Math.min(maxStreamInflated, maxInflated - total)
    const size = await inflatedSize(bytes, start, flateLayers(latin1, match.index), limit)
    if (size > maxStreamInflated) return "stream"
    total += size
    if (total > maxInflated) return "total"
  }
  return undefined
}

self.onmessage = async (event: MessageEvent<PdfJob>) => {
  const { bytes, maxPages, maxInflated, maxStreamInflated } = event.data
  let result: PdfResult
  try {
    const over = await inflationOver(bytes, maxInflated, maxStreamInflated)
    if (over !== undefined) result = { ok: false, reason: "inflates_too_much", bound: over }
    else {
      const pdf = await getDocumentProxy(bytes, { stopAtErrors: true })
      if (pdf.numPages > maxPages) result = { ok: false, reason: "too_many_pages", pages: pdf.numPages }
      else {
        const { text } = await extractText(pdf, { mergePages: false })
        result = { ok: true, pages: pdf.numPages, text }
      }
    }
  } catch (e) {
    result = { ok: false, reason: "unreadable", detail: e instanceof Error ? e.message.slice(0, 200) : "not a PDF" }
  }
  self.postMessage(result)
}
