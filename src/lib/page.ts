/**
 * One page fetched for the model (the web_fetch tool and the `web-fetch` plugin), through the safe
 * outbound fetcher (src/outbound/fetch.ts: SSRF rules, redirects re-checked, size and time caps):
 * HTML becomes readable markdown (html.ts, in a worker off the event loop), a PDF its text
 * (pdf.ts, in its worker), plain text stays as it is. `maxContentTokens` cuts the content
 * (o200k tokens, gpt-tokenizer loaded on the first page that needs it); without it the content is cut
 * at DEFAULT_MAX_CONTENT_CHARACTERS. Never rejects: a failure is `{ok: false, error}` the model reads.
 */
import { STATUS_CODES } from "node:http"
import type { Settings } from "../config/Config.js"
import { OutboundError, safeFetch } from "../outbound/fetch.js"
import { DEFAULT_PARSE_BOUNDS, parseBoundsOf, parsePdfInWorker, watchGrowth } from "./pdf.js"
import { domainFilter } from "./domains.js"
import { cut, MAX_TITLE_CHARACTERS } from "./search/index.js"
import type { HtmlJob, HtmlResult } from "./html.js"

const DEFAULT_MAX_BYTES = 5 * 1024 * 1024
const DEFAULT_TIMEOUT_MS = 10_000
const PDF_MAX_PAGES = 200
const PDF_TIMEOUT_MS = 20_000
const HTML_TIMEOUT_MS = 20_000
/** A page's content at most when the caller set no token cap (~25k tokens): one page cannot fill a context. */
export const DEFAULT_MAX_CONTENT_CHARACTERS = 100_000

export interface PageOptions {
  readonly maxContentTokens: number | undefined
  readonly allowed: ReadonlyArray<string> | undefined
  readonly blocked: ReadonlyArray<string> | undefined
}

export type PageOutcome =
  | {
      readonly ok: true
      readonly url: string
      readonly title: string
      readonly content: string
      readonly httpStatus: number
      /** ISO 8601, when the answer came. */
      readonly retrievedAt: string
    }
  | { readonly ok: false; readonly url: string; readonly error: string; readonly httpStatus?: number }

/** The page worker (scripts/build adds it as an entry point; in the binary it is found by its path from the root `.`). */
const htmlWorkerUrl = import.meta.url.includes("/$bunfs/") ? "./src/lib/html-worker.ts" : new URL("./html-worker.ts", import.meta.url).href

/** Page workers at most (each holds a page's DOM while it reads it); the rest wait their turn within their time limit. */
const MAX_HTML_WORKERS = 2
/** Idle page workers, kept: loading linkedom, Readability and Turndown in a fresh one takes ~0.3 s. */
const idleHtmlWorkers: Array<Worker> = []
let htmlWorkers = 0
const htmlQueue: Array<() => void> = []

const takeHtmlWorker = async (): Promise<Worker> => {
  while (idleHtmlWorkers.length === 0 && htmlWorkers >= MAX_HTML_WORKERS) await new Promise<void>((resolve) => htmlQueue.push(resolve))
  const idle = idleHtmlWorkers.pop()
  if (idle !== undefined) return idle
  htmlWorkers++
  const worker = new Worker(htmlWorkerUrl)
  // An idle worker does not keep the process alive (Bun's Worker has `unref`, the DOM type does not).
  ;(worker as Worker & { unref(): void }).unref()
  return worker
}

/** `worker` back to the pool, or ended (it timed out, failed or the request left mid-page). */
const giveBackHtmlWorker = (worker: Worker, healthy: boolean) => {
  if (healthy) idleHtmlWorkers.push(worker)
  else {
    worker.terminate()
    htmlWorkers--
  }
  htmlQueue.shift()?.()
}

/** A worker whose read grew the process by more than this is ended, not kept idle with the heap it grew. */
const KEEP_WORKER_MAX_GROWTH = 64 * 1024 * 1024
/** Page reads running: the process's growth is theirs together, so each may grow it by the bound once per read. */
let readsRunning = 0

/**
 * HTML → its readable part as markdown and its title, in a page worker: Readability and Turndown
 * over a 5 MB page held the event loop 2.1-2.7 s. A worker past `timeoutMs`, past `maxMemory`
 * bytes of growth of the process for each read running (a DOM of a million tiny elements, 4.5 MB
 * on the wire, grew it by 2 GB; a 5 MB article grows it by ~340 MB), or whose request ends
 * (`signal`), is ended and replaced. Bun's Worker takes no heap limit, so the process's resident
 * memory is read, as for a PDF.
 */
export const htmlToMarkdownInWorker = async (
  html: string,
  url: string,
  timeoutMs: number,
  signal?: AbortSignal,
  maxMemory: number = DEFAULT_PARSE_BOUNDS.maxMemory,
): Promise<HtmlResult> => {
  if (signal?.aborted === true) return { ok: false, error: "the request ended" }
  const worker = await takeHtmlWorker()
  return new Promise<HtmlResult>((resolve) => {
    let done = false
    readsRunning++
    const end = (result: HtmlResult, healthy: boolean) => {
      if (done) return
      done = true
      readsRunning--
      clearTimeout(timer)
      watch.stop()
      signal?.removeEventListener("abort", onAbort)
      worker.onmessage = null
      worker.onerror = null
      giveBackHtmlWorker(worker, healthy && watch.grown() <= KEEP_WORKER_MAX_GROWTH)
      resolve(result)
    }
    const timer = setTimeout(() => end({ ok: false, error: `the page was not read within ${timeoutMs} ms` }, false), timeoutMs)
    const watch = watchGrowth(
      () => maxMemory * readsRunning,
      () => end({ ok: false, error: `reading the page took more than ${maxMemory} bytes of memory` }, false),
    )
    const onAbort = () => end({ ok: false, error: "the request ended" }, false)
    signal?.addEventListener("abort", onAbort, { once: true })
    worker.onmessage = (event: MessageEvent<HtmlResult>) => end(event.data, true)
    worker.onerror = () => end({ ok: false, error: "the page could not be read" }, false)
    worker.postMessage({ html, url } satisfies HtmlJob)
  })
}

let tokenizer: { readonly encode: (text: string) => Array<number>; readonly decode: (tokens: Array<number>) => string } | undefined

/** `text` cut to `maxTokens` o200k tokens. A text whose UTF-8 bytes fit needs no count (a token is at least a byte). */
export const truncateToTokens = async (text: string, maxTokens: number): Promise<{ readonly text: string; readonly truncated: boolean }> => {
  if (Buffer.byteLength(text, "utf8") <= maxTokens) return { text, truncated: false }
  tokenizer ??= await import("gpt-tokenizer/encoding/o200k_base")
  // A token is rarely over 32 characters: what lies past that many cannot be kept anyway.
  const head = text.length > maxTokens * 32 ? text.slice(0, maxTokens * 32) : text
  const tokens = tokenizer.encode(head)
  if (tokens.length <= maxTokens && head.length === text.length) return { text, truncated: false }
  return { text: tokenizer.decode(tokens.slice(0, maxTokens)), truncated: true }
}

const charsetOf = (contentType: string): string => /charset=["']?([\w-]+)/i.exec(contentType)?.[1]?.toLowerCase() ?? "utf-8"

const decodeText = (bytes: Uint8Array, contentType: string): string => {
  try {
    return new TextDecoder(charsetOf(contentType)).decode(bytes)
  } catch {
    return new TextDecoder().decode(bytes)
  }
}

const isPdf = (bytes: Uint8Array) => bytes.length >= 5 && Buffer.from(bytes.subarray(0, 1024)).includes("%PDF-")

const TEXTUAL = /^(text\/|application\/(json|xml|xhtml\+xml|javascript|x-ndjson|ld\+json|rss\+xml|atom\+xml|markdown)|[^;]*\+(json|xml))/i

const nameOf = (url: string) => {
  try {
    const u = new URL(url)
    return decodeURIComponent(u.pathname.split("/").filter((s) => s !== "").pop() ?? u.hostname)
  } catch {
    return url
  }
}

/** Fetches `url` for the model under the gateway's outbound policy and the caller's filters. */
export const fetchPage = async (url: string, options: PageOptions, settings: Settings, signal: AbortSignal): Promise<PageOutcome> => {
  if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) return { ok: false, url, error: "not a valid http(s) URL" }
  if (!domainFilter(options.allowed, options.blocked)(url)) {
    return { ok: false, url, error: "the URL's domain is not allowed (allowed_domains / blocked_domains)" }
  }
  const outbound = settings.catalog.outbound
  let res: Awaited<ReturnType<typeof safeFetch>>
  try {
    res = await safeFetch(
      url,
      { method: "GET", headers: { accept: "text/html,application/xhtml+xml,application/pdf,text/plain;q=0.9,*/*;q=0.5" } },
      {
        allowPrivateAddresses: outbound?.allow_private_addresses ?? false,
        timeoutMs: Math.min(outbound?.timeout_ms ?? DEFAULT_TIMEOUT_MS, settings.requestTimeoutMs),
        maxResponseBytes: outbound?.max_bytes ?? DEFAULT_MAX_BYTES,
        signal,
      },
    )
  } catch (e) {
    return { ok: false, url, error: e instanceof OutboundError ? e.message : "the fetch failed" }
  }
  const retrievedAt = new Date().toISOString()
  if (res.status < 200 || res.status > 299) {
    return { ok: false, url, httpStatus: res.status, error: `HTTP ${res.status}: ${STATUS_CODES[res.status] ?? "error"}` }
  }
  const contentType = res.headers.get("content-type") ?? ""
  let title: string
  let content: string
  if (/pdf/i.test(contentType) || isPdf(res.body)) {
    const bounds = parseBoundsOf(settings)
    const parsed = await parsePdfInWorker(res.body, PDF_MAX_PAGES, Math.min(PDF_TIMEOUT_MS, settings.requestTimeoutMs), signal, bounds)
    if (!parsed.ok) {
      const why =
        parsed.reason === "too_many_pages"
          ? `the PDF has more than ${PDF_MAX_PAGES} pages`
          : parsed.reason === "inflates_too_much"
            ? `the PDF's compressed streams inflate to more than ${parsed.bound === "stream" ? `${bounds.maxStreamInflated} bytes in one stream` : `${bounds.maxInflated} bytes in all`}`
            : parsed.reason === "too_much_memory"
              ? `parsing the PDF took more than ${bounds.maxMemory} bytes of memory`
              : `the PDF could not be read${parsed.detail === undefined ? "" : ` (${parsed.detail})`}`
      return { ok: false, url, httpStatus: res.status, error: why }
    }
    title = nameOf(url)
    content = parsed.text.join("\n\n").trim()
  } else if (/html/i.test(contentType) || (contentType === "" && /^\s*</.test(decodeText(res.body.subarray(0, 512), "")))) {
    const maxMemory = parseBoundsOf(settings).maxMemory
    const page = await htmlToMarkdownInWorker(decodeText(res.body, contentType), url, Math.min(HTML_TIMEOUT_MS, settings.requestTimeoutMs), signal, maxMemory)
    if (!page.ok) return { ok: false, url, httpStatus: res.status, error: page.error }
    title = cut(page.title, MAX_TITLE_CHARACTERS)
    content = page.content
  } else if (TEXTUAL.test(contentType) || contentType === "") {
    title = nameOf(url)
    content = decodeText(res.body, contentType)
  } else {
    return { ok: false, url, httpStatus: res.status, error: `unsupported content type ${contentType.split(";")[0]}` }
  }
  if (options.maxContentTokens !== undefined) {
    const cut = await truncateToTokens(content, options.maxContentTokens)
    content = cut.truncated ? `${cut.text}\n\n[… truncated at ${options.maxContentTokens} tokens]` : cut.text
  } else if (content.length > DEFAULT_MAX_CONTENT_CHARACTERS) {
    content = `${content.slice(0, DEFAULT_MAX_CONTENT_CHARACTERS)}\n\n[… truncated at ${DEFAULT_MAX_CONTENT_CHARACTERS} characters]`
  }
  return { ok: true, url, title, content, httpStatus: res.status, retrievedAt }
}
