/**
 * PDF text, parsed off the event loop: unpdf in a fresh Worker (pdf-worker.ts) per parse, ended at
 * its time limit, past its memory bound, or when the request is cancelled; the page count and the
 * compressed streams' inflated size are checked in the worker before any text is extracted. Used
 * by the file-parser plugin (src/pipeline/plugins/file-parser.ts) and by web_fetch for a PDF page
 * (page.ts), so it lives below both.
 */
import type { Settings } from "../config/Config.js"
import type { PdfJob, PdfResult } from "./pdf-worker.js"

/** In the compiled binary (scripts/build adds the worker as an entry point, root `.`) it is found by its path from the root. */
const workerUrl = import.meta.url.includes("/$bunfs/")
  ? "./src/lib/pdf-worker.ts"
  : new URL("./pdf-worker.ts", import.meta.url).href

/** PDF workers alive at once (each holds a parse's memory); the rest wait their turn within their time limit. */
const MAX_PARSE_WORKERS = 2
let parsing = 0
const parseQueue: Array<() => void> = []

/** What one parse may use: inflated stream bytes (checked in the worker first) and memory. */
export interface ParseBounds {
  /** Bytes the file's compressed streams may inflate to together. */
  readonly maxInflated: number
  /** Bytes one compressed stream may inflate to. */
  readonly maxStreamInflated: number
  /** Bytes the process's resident memory may grow by while the parse runs; past it the worker is ended. */
  readonly maxMemory: number
}

export const DEFAULT_PARSE_BOUNDS: ParseBounds = {
  maxInflated: 200 * 1024 * 1024,
  maxStreamInflated: 50 * 1024 * 1024,
  maxMemory: 512 * 1024 * 1024,
}

/** How often a parse's memory is read (a bomb that slips past the inflation check grows ~100 MB between reads at most). */
const MEMORY_CHECK_MS = 25

/**
 * Reads the process's resident memory from now on, every MEMORY_CHECK_MS; calls `over` when its
 * growth passes `bound()`. Bun's Worker takes no heap limit (`resourceLimits` is ignored, and
 * inflated bytes live outside the heap): a worker's parse or page read is held to this instead.
 */
export const watchGrowth = (bound: () => number, over: () => void) => {
  const baseline = process.memoryUsage.rss()
  const timer = setInterval(() => {
    if (process.memoryUsage.rss() - baseline > bound()) over()
  }, MEMORY_CHECK_MS)
  return { stop: () => clearInterval(timer), grown: () => process.memoryUsage.rss() - baseline }
}

/** Parses a PDF in a fresh Worker (off the event loop), terminated at `timeoutMs`, past its memory bound, or when the request is cancelled. */
export const parsePdfInWorker = async (
  bytes: Uint8Array,
  maxPages: number,
  timeoutMs: number,
  signal?: AbortSignal,
  bounds: ParseBounds = DEFAULT_PARSE_BOUNDS,
): Promise<PdfResult> => {
  if (parsing >= MAX_PARSE_WORKERS) await new Promise<void>((resolve) => parseQueue.push(resolve))
  parsing++
  try {
    if (signal?.aborted === true) return { ok: false, reason: "unreadable", detail: "the request ended" }
    return await parseOnce(bytes, maxPages, timeoutMs, bounds, signal)
  } finally {
    parsing--
    parseQueue.shift()?.()
  }
}

const parseOnce = (bytes: Uint8Array, maxPages: number, timeoutMs: number, bounds: ParseBounds, signal?: AbortSignal): Promise<PdfResult> =>
  new Promise((resolve) => {
    const worker = new Worker(workerUrl, { smol: true })
    let done = false
    const end = (result: PdfResult) => {
      if (done) return
      done = true
      clearTimeout(timer)
      watch.stop()
      signal?.removeEventListener("abort", onAbort)
      worker.terminate()
      resolve(result)
    }
    const timer = setTimeout(() => end({ ok: false, reason: "unreadable", detail: `not parsed within ${timeoutMs} ms` }), timeoutMs)
    const watch = watchGrowth(
      () => bounds.maxMemory,
      () => end({ ok: false, reason: "too_much_memory" }),
    )
    const onAbort = () => end({ ok: false, reason: "unreadable", detail: "the request ended" })
    signal?.addEventListener("abort", onAbort, { once: true })
    worker.onmessage = (event: MessageEvent<PdfResult>) => end(event.data)
    worker.onerror = () => end({ ok: false, reason: "unreadable", detail: "the parser failed" })
    worker.postMessage({
      bytes,
      maxPages,
      maxInflated: bounds.maxInflated,
      maxStreamInflated: bounds.maxStreamInflated,
    } satisfies PdfJob)
  })

/** The PDF parse bounds of `plugins.file_parser` (web_fetch's PDFs are held to them too). */
export const parseBoundsOf = (settings: Settings): ParseBounds => {
  const parser = settings.catalog.plugins?.file_parser
  return {
    maxInflated: parser?.max_inflated_bytes ?? DEFAULT_PARSE_BOUNDS.maxInflated,
    maxStreamInflated: parser?.max_stream_inflated_bytes ?? DEFAULT_PARSE_BOUNDS.maxStreamInflated,
    maxMemory: parser?.max_parse_memory_bytes ?? DEFAULT_PARSE_BOUNDS.maxMemory,
  }
}
