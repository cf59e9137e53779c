/**
 * The `file-parser` plugin (docs/plugins.md): PDF parts of the request (Responses `input_file`, Chat
 * `file`, Messages `document`, all `input_file` once decoded) become text before the model reads
 * them, or go to the upstream as files (`native`).
 *
 * Engines (`pdf.engine`): `pdf-text` (unpdf, locally, in a Worker with a time limit; the page
 * count is checked before any text is extracted), `cloudflare-ai` (served as `pdf-text`),
 * `mistral-ocr` (`plugins.file_parser.ocr`: a provider's Mistral-shaped `/ocr`, priced per page),
 * `native` (the part is left as a file; 400 when the first candidate cannot take it). No engine:
 * `native` when the first candidate declares `files`, else `pdf-text`.
 *
 * The stage is plain code: the bytes (a `file_url` through the safe outbound fetcher) and the
 * parse are loaded on the runtime as a `Missing` read, kept in the plugin's slot of the request's
 * `Loaded`, and the stage runs again. Parse results are cached in memory by workspace,
 * engine and sha256 (bounded); a `file` annotation a client sends back on an assistant turn
 * (`{type: "file", file: {hash, name, content: [{type: "text", text}]}}`) is used instead of a
 * parse only when its hash is the sha256 of the bytes sent.
 */
import { Effect, Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import type { FileParserConfig } from "../../config/file.js"
import { type ApiError, BadGateway, BadRequest } from "../../domain/errors.js"
import { type ContentPartInput, type FileAnnotation, fileAnnotationsIn, type InputItem, type ResponsesRequest } from "../../domain/responses.js"
import { OutboundError, safeFetch } from "../../outbound/fetch.js"
import { Missing, type PipelineEntry, type StageState } from "../stages.js"
import { pluginFields, type PreModelHalf, type RequestPlugin, requestSlot } from "./plugin.js"
import { type ParseBounds, parseBoundsOf, parsePdfInWorker } from "../../lib/pdf.js"

export const ENGINES = ["pdf-text", "mistral-ocr", "native", "cloudflare-ai"] as const
export type Engine = (typeof ENGINES)[number]

const DEFAULT_MAX_BYTES = 5 * 1024 * 1024
const DEFAULT_OUTBOUND_TIMEOUT_MS = 10_000
const DEFAULT_MAX_PAGES = 200
const DEFAULT_PARSE_TIMEOUT_MS = 20_000
const DEFAULT_CACHE_ENTRIES = 256

type FilePart = Extract<ContentPartInput, { type: "input_file" }>

/** One file part of the request: where it is and what it holds. */
interface Located {
  readonly item: number
  readonly part: number
  readonly file: FilePart
}

/** What a parse gave for one part. */
interface Parsed {
  readonly name: string
  readonly hash: string
  readonly pages: number
  readonly text: string
  readonly source: "parsed" | "cache" | "annotation"
  /** USD charged for this parse (OCR), 0 otherwise. */
  readonly cost: number
}

/** A request's loaded parses: one per part (by `item.part`), or the refusal. */
type Loads = Map<string, Parsed | ApiError>

/** The request's loads, in its own `Loaded` (kept while the stages run again after the load). */
const loadsOf = requestSlot<Loads>("file-parser")

/**
 * The parse cache: workspace, engine and sha256 → the text (bounded, oldest dropped first). Process-wide
 * on purpose: the same file sent again in the next turn of a conversation is not parsed again.
 */
const cache = new Map<string, { readonly pages: number; readonly text: string }>()

export const clearFileParserCache = (): void => cache.clear()

const remember = (key: string, value: { readonly pages: number; readonly text: string }, max: number) => {
  cache.delete(key)
  cache.set(key, value)
  while (cache.size > max) {
    const oldest = cache.keys().next().value
    if (oldest === undefined) break
    cache.delete(oldest)
  }
}

const refuse = (message: string) => new BadRequest({ message: `Invalid request: ${message}` })

const filePartsOf = (request: ResponsesRequest): ReadonlyArray<Located> => {
  const input = request.input
  if (input === undefined || typeof input === "string") return []
  const out: Array<Located> = []
  input.forEach((item, i) => {
    if (item.type !== "message") return
    const content = (item as { readonly content?: unknown }).content
    if (!Array.isArray(content)) return
    content.forEach((part: ContentPartInput, j) => {
      if (part.type === "input_file") out.push({ item: i, part: j, file: part })
    })
  })
  return out
}

/** `file` annotations on assistant turns: hash → text (used only when the bytes hash the same). */
const annotationsOf = (request: ResponsesRequest): ReadonlyMap<string, string> => {
  const found = new Map<string, string>()
  const input = request.input
  if (input === undefined || typeof input === "string") return found
  for (const item of input) {
    const content = (item as { readonly content?: unknown }).content
    if (item.type !== "message" || !Array.isArray(content)) continue
    for (const part of content as ReadonlyArray<ContentPartInput>) {
      if (part.type !== "output_text") continue
      for (const { file } of fileAnnotationsIn(part.annotations)) {
        found.set(file.hash.toLowerCase(), file.content.map((p) => p.text).join("\n"))
      }
    }
  }
  return found
}

const DATA_URL = /^data:([^;,]*)(;[^,]*)?,/

const nameOf = (located: Located): string => located.file.filename ?? `input[${located.item}].content[${located.part}]`

const sha256 = (bytes: Uint8Array): string => new Bun.CryptoHasher("sha256").update(bytes).digest("hex")

interface Limits {
  readonly bounds: ParseBounds
  readonly maxBytes: number
  readonly maxPages: number
  readonly parseTimeoutMs: number
  readonly outboundTimeoutMs: number
  readonly allowPrivate: boolean
  readonly cacheEntries: number
}

const limitsOf = (settings: Settings): Limits => {
  const outbound = settings.catalog.outbound
  const parser: FileParserConfig | undefined = settings.catalog.plugins?.file_parser
  return {
    bounds: parseBoundsOf(settings),
    maxBytes: parser?.max_file_bytes ?? outbound?.max_bytes ?? DEFAULT_MAX_BYTES,
    maxPages: parser?.max_pages ?? DEFAULT_MAX_PAGES,
    parseTimeoutMs: parser?.parse_timeout_ms ?? DEFAULT_PARSE_TIMEOUT_MS,
    outboundTimeoutMs: outbound?.timeout_ms ?? DEFAULT_OUTBOUND_TIMEOUT_MS,
    allowPrivate: outbound?.allow_private_addresses ?? false,
    cacheEntries: parser?.cache_entries ?? DEFAULT_CACHE_ENTRIES,
  }
}

/** The bytes of a part: its data URL decoded, or its URL fetched through the safe outbound fetcher. */
const bytesOf = async (located: Located, limits: Limits, signal: AbortSignal): Promise<Uint8Array | ApiError> => {
  const at = `input[${located.item}].content[${located.part}]`
  const { file } = located
  if (file.file_data != null) {
    const match = DATA_URL.exec(file.file_data)
    const payload = match === null ? file.file_data : file.file_data.slice(match[0].length)
    if (match !== null && match[2]?.includes(";base64") !== true) return refuse(`${at}.file_data: a data URL must be base64-encoded`)
    // Base64 is 4/3 of the bytes: refuse before decoding what is over the cap.
    if (Math.floor((payload.length * 3) / 4) > limits.maxBytes + 3) {
      return refuse(`${at}.file_data: the file is larger than ${limits.maxBytes} bytes (plugins.file_parser.max_file_bytes)`)
    }
    try {
      return Uint8Array.from(Buffer.from(payload, "base64"))
    } catch {
      return refuse(`${at}.file_data: not valid base64`)
    }
  }
  if (file.file_url != null) {
    try {
      const res = await safeFetch(
        file.file_url,
        { method: "GET" },
        {
          allowPrivateAddresses: limits.allowPrivate,
          timeoutMs: limits.outboundTimeoutMs,
          maxResponseBytes: limits.maxBytes,
          failOverCap: true,
          signal,
        },
      )
      if (res.status < 200 || res.status > 299) return refuse(`${at}.file_url: the file could not be fetched (HTTP ${res.status})`)
      return res.body
    } catch (e) {
      const why = e instanceof OutboundError ? e.message : "the fetch failed"
      return refuse(`${at}.file_url: the file could not be fetched: ${why}`)
    }
  }
  return refuse(`${at}: a file_id cannot be parsed by the gateway; send file_data or file_url, or use pdf.engine "native"`)
}

const isPdf = (bytes: Uint8Array): boolean => bytes.length >= 5 && Buffer.from(bytes.subarray(0, 1024)).includes("%PDF-")

/** Mistral's OCR API (`POST {base_url}/ocr`): the text of each page as markdown. */
const ocr = async (
  bytes: Uint8Array,
  settings: Settings,
  at: string,
  limits: Limits,
  signal: AbortSignal,
): Promise<{ readonly pages: number; readonly text: string; readonly cost: number } | ApiError> => {
  const config = settings.catalog.plugins?.file_parser?.ocr
  if (config === undefined) return refuse(`${at}: pdf.engine mistral-ocr is not configured on this gateway (plugins.file_parser.ocr)`)
  const provider = settings.catalog.providers.find((p) => p.id === config.provider)
  if (provider?.base_url === undefined) return refuse(`${at}: the OCR provider ${config.provider} has no base_url on this gateway`)
  const key = provider.api_key_env === undefined ? undefined : process.env[provider.api_key_env]
  try {
    // The operator's provider (a trusted URL from the config file), not a tenant's: a plain fetch with a deadline.
    const res = await fetch(`${provider.base_url.replace(/\/$/, "")}/ocr`, {
      method: "POST",
      headers: { ...provider.headers, "content-type": "application/json", ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
      body: JSON.stringify({
        model: config.model,
        document: { type: "document_url", document_url: `data:application/pdf;base64,${Buffer.from(bytes).toString("base64")}` },
        include_image_base64: false,
      }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(limits.outboundTimeoutMs * 3)]),
    })
    // The file was sent as the API wants it: a refusal is the OCR service's, not the client's.
    if (!res.ok) return new BadGateway({ message: `${at}: the OCR provider ${config.provider} failed (HTTP ${res.status})` })
    const body = (await res.json()) as { pages?: Array<{ markdown?: unknown }>; usage_info?: { pages_processed?: unknown } }
    const pages = Array.isArray(body.pages) ? body.pages : []
    const processed = typeof body.usage_info?.pages_processed === "number" ? body.usage_info.pages_processed : pages.length
    if (processed > limits.maxPages) return refuse(`${at}: the PDF has ${processed} pages, more than ${limits.maxPages} (plugins.file_parser.max_pages)`)
    const text = pages.map((p) => (typeof p.markdown === "string" ? p.markdown : "")).join("\n\n")
    return { pages: processed, text, cost: processed * (config.price_per_page ?? 0) }
  } catch {
    return new BadGateway({ message: `${at}: the OCR provider ${config.provider} did not answer` })
  }
}

/** Loads one part: bytes, hash, then the annotation, the cache or a parse. */
const loadPart = async (
  located: Located,
  engine: Exclude<Engine, "native">,
  workspaceId: string,
  annotations: ReadonlyMap<string, string>,
  settings: Settings,
  limits: Limits,
  signal: AbortSignal,
): Promise<Parsed | ApiError> => {
  const at = `input[${located.item}].content[${located.part}]`
  const bytes = await bytesOf(located, limits, signal)
  if (!(bytes instanceof Uint8Array)) return bytes
  const name = nameOf(located)
  const hash = sha256(bytes)
  const sent = annotations.get(hash)
  if (sent !== undefined) return { name, hash, pages: 0, text: sent, source: "annotation", cost: 0 }
  // cloudflare-ai is served by pdf-text here: one cache entry for both.
  const parser = engine === "mistral-ocr" ? "mistral-ocr" : "pdf-text"
  const key = `${workspaceId}\u0000${parser}\u0000${hash}`
  const hit = cache.get(key)
  if (hit !== undefined) {
    remember(key, hit, limits.cacheEntries)
    return { name, hash, pages: hit.pages, text: hit.text, source: "cache", cost: 0 }
  }
  if (!isPdf(bytes)) return refuse(`${at}: the file ${name} is not a PDF (file-parser reads PDF files)`)
  if (parser === "mistral-ocr") {
    const read = await ocr(bytes, settings, at, limits, signal)
    if ("_tag" in read) return read
    remember(key, { pages: read.pages, text: read.text }, limits.cacheEntries)
    return { name, hash, pages: read.pages, text: read.text, source: "parsed", cost: read.cost }
  }
  const result = await parsePdfInWorker(bytes, limits.maxPages, limits.parseTimeoutMs, signal, limits.bounds)
  if (!result.ok) {
    if (result.reason === "too_many_pages") {
      return refuse(`${at}: the PDF ${name} has ${result.pages} pages, more than ${limits.maxPages} (plugins.file_parser.max_pages)`)
    }
    if (result.reason === "inflates_too_much") {
      return refuse(
        result.bound === "stream"
          ? `${at}: a compressed stream of the PDF ${name} inflates to more than ${limits.bounds.maxStreamInflated} bytes (plugins.file_parser.max_stream_inflated_bytes)`
          : `${at}: the compressed streams of the PDF ${name} inflate to more than ${limits.bounds.maxInflated} bytes in all (plugins.file_parser.max_inflated_bytes)`,
      )
    }
    if (result.reason === "too_much_memory") {
      return refuse(
        `${at}: parsing the PDF ${name} took more than ${limits.bounds.maxMemory} bytes of memory (plugins.file_parser.max_parse_memory_bytes); the parse was stopped`,
      )
    }
    return refuse(`${at}: the PDF ${name} could not be read${result.detail === undefined ? "" : ` (${result.detail})`}`)
  }
  const text = result.text.join("\n\n").trim()
  remember(key, { pages: result.pages, text }, limits.cacheEntries)
  return { name, hash, pages: result.pages, text, source: "parsed", cost: 0 }
}

/** The request with each parsed part replaced by a text part headed by the file's name. */
const replaced = (request: ResponsesRequest, parts: ReadonlyArray<Located>, loads: Loads): ResponsesRequest => {
  const input = [...(request.input as ReadonlyArray<InputItem>)]
  for (const located of parts) {
    const parsed = loads.get(`${located.item}.${located.part}`) as Parsed
    const item = input[located.item] as Extract<InputItem, { type: "message" }>
    const content = [...(item.content as ReadonlyArray<ContentPartInput>)]
    content[located.part] = { type: "input_text", text: `[File: ${parsed.name}]\n\n${parsed.text}` }
    input[located.item] = { ...item, content }
  }
  return { ...request, input }
}

/** Why `native` cannot send this part to the first candidate, if it cannot. */
const nativeRefusal = (state: StageState, located: Located): ApiError | undefined => {
  const endpoint = state.plan?.candidates[0]
  if (endpoint === undefined) return undefined
  const at = `input[${located.item}].content[${located.part}]`
  if (!endpoint.supports.has("files")) {
    return refuse(`${at}: pdf.engine native needs an endpoint that takes files, and ${endpoint.id} does not; use pdf.engine pdf-text`)
  }
  // The Chat Completions wire carries file_data and file_id, not a URL.
  if (endpoint.provider.kind === "openai-chat" && located.file.file_url != null) {
    return refuse(`${at}.file_url: pdf.engine native cannot send a file URL to ${endpoint.id} (its wire carries file_data only); use pdf.engine pdf-text`)
  }
  return undefined
}

export const FileParserPlugin = Schema.Struct({
  ...pluginFields("file-parser"),
  pdf: Schema.optional(Schema.Struct({ engine: Schema.optional(Schema.String) })),
})
type FileParserEntry = typeof FileParserPlugin.Type

export const fileParserPlugin: RequestPlugin<"file-parser", FileParserEntry> = {
  id: "file-parser",
  schema: FileParserPlugin,
  pre: ({ settings }) => makeFileParserStage(settings),
}

/** The stage over the gateway's settings (the outbound policy, `plugins.file_parser`). */
const makeFileParserStage = (settings: Settings): PreModelHalf<FileParserEntry> => {
  const limits = limitsOf(settings)
  return {
    needsPlan: true,
    run: (config, state, at) => {
      const parts = filePartsOf(state.request)
      if (parts.length === 0) return undefined
      const asked = config.pdf?.engine
      if (asked !== undefined && !(ENGINES as ReadonlyArray<string>).includes(asked)) {
        return refuse(`plugins[${at}].pdf.engine: must be one of ${ENGINES.join(", ")}`)
      }
      const engine: Engine =
        (asked as Engine | undefined) ?? (state.plan?.candidates[0]?.supports.has("files") === true ? "native" : "pdf-text")
      if (engine === "native") {
        for (const located of parts) {
          const refused = nativeRefusal(state, located)
          if (refused !== undefined) return refused
        }
        return undefined
      }
      const loads = loadsOf.get(state.loaded)
      if (loads === undefined) {
        const annotations = annotationsOf(state.request)
        const workspaceId = state.principal.workspaceId
        return new Missing(
          // Interrupted when the request's deadline passes or its client leaves: the fetches, OCR calls and parses are aborted.
          Effect.promise(async (signal) => {
            const results = await Promise.all(parts.map((p) => loadPart(p, engine, workspaceId, annotations, settings, limits, signal)))
            const map: Loads = new Map()
            parts.forEach((p, i) => {
              map.set(`${p.item}.${p.part}`, results[i] as Parsed | ApiError)
            })
            loadsOf.set(state.loaded, map)
          }),
        )
      }
      const files: Array<Parsed> = []
      for (const located of parts) {
        const loaded = loads.get(`${located.item}.${located.part}`)
        if (loaded === undefined) return refuse(`input[${located.item}].content[${located.part}]: the file changed while it was parsed`)
        if ("_tag" in loaded) return loaded
        files.push(loaded)
      }
      const pages = files.reduce((n, f) => n + f.pages, 0)
      const cost = files.reduce((n, f) => n + f.cost, 0)
      // What a client sends back on the assistant turn to skip the parse next time (the hash is checked).
      const annotations = files.map((f): FileAnnotation => ({ type: "file", file: { hash: f.hash, name: f.name, content: [{ type: "text", text: f.text }] } }))
      const entry: PipelineEntry = {
        type: "plugin",
        name: "file-parser",
        summary: `${files.length} file${files.length === 1 ? "" : "s"} (${pages} page${pages === 1 ? "" : "s"}) turned into text with ${engine}${engine === "cloudflare-ai" ? " (served as pdf-text)" : ""}`,
        data: {
          engine,
          files: files.map((f) => ({ name: f.name, hash: f.hash, pages: f.pages, source: f.source, characters: f.text.length })),
          annotations,
          ...(cost > 0 ? { cost } : {}),
        },
      }
      return { request: replaced(state.request, parts, loads), plan: state.plan, entry, annotations, ...(cost > 0 ? { cost } : {}) }
    },
  }
}
