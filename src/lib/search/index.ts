/**
 * The search engines (one file each) and one search as the web_search tool and the `web` plugin
 * run it: the engine's request with a deadline, its answer decoded, then the gateway's own domain
 * filter, excerpt cap and count.
 */
import type { SearchSettings } from "../../config/Config.js"
import type { SearchEngineId } from "../../domain/web.js"
import { domainFilter, isPlainDomain } from "../domains.js"
import { brave } from "./brave.js"
import type { SearchEngine, SearchHit } from "./engine.js"
import { exa } from "./exa.js"
import { searxng } from "./searxng.js"
import { tavily } from "./tavily.js"

/** Why a search cannot run (the web_search tool's `unavailable`, the web plugin's 400): no `search` in the config. */
export const SEARCH_NOT_CONFIGURED = "web search is not configured on this gateway"

export const searchEngines: { readonly [Id in SearchEngineId]: SearchEngine } = { searxng, exa, tavily, brave }

/** Characters of one result's excerpt by `search_context_size` (as the hosted service sizes Exa's), and without one. */
const CONTEXT_CHARACTERS = { low: 5_000, medium: 15_000, high: 30_000 } as const
export const DEFAULT_EXCERPT_CHARACTERS = 3_000

export interface SearchRequest {
  readonly query: string
  readonly maxResults: number
  readonly allowed: ReadonlyArray<string> | undefined
  readonly excluded: ReadonlyArray<string> | undefined
  readonly maxCharacters: number | undefined
  readonly contextSize: "low" | "medium" | "high" | undefined
}

export type SearchOutcome =
  | { readonly ok: true; readonly hits: ReadonlyArray<SearchHit> }
  | { readonly ok: false; readonly error: string }

/** `text` cut at `max` characters, an ellipsis marking the cut. */
export const cut = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max)}…`)

/** A hit's title at most (an engine's title of 100,000 characters filled the model's context past its limit). */
export const MAX_TITLE_CHARACTERS = 300
/** A hit whose URL is longer than this is left out: no page has one, and it would be read whole. */
const MAX_URL_CHARACTERS = 2_048

/** One search on the configured engine. Never rejects: a failure is `{ok: false, error}` (no engine body quoted). */
export const runSearch = async (settings: SearchSettings, request: SearchRequest, signal: AbortSignal): Promise<SearchOutcome> => {
  const engine = searchEngines[settings.engine]
  const baseUrl = settings.baseUrl ?? engine.defaultBaseUrl ?? ""
  const filtered = (request.allowed?.length ?? 0) + (request.excluded?.length ?? 0) > 0
  const native = engine.filtersDomains && [...(request.allowed ?? []), ...(request.excluded ?? [])].every(isPlainDomain)
  // The gateway filters what the engine could not: it asks for as many as it may, then keeps the first matches.
  const count = filtered && !native ? engine.maxCount : Math.min(request.maxResults, engine.maxCount)
  const maxCharacters = request.maxCharacters ?? (request.contextSize === undefined ? DEFAULT_EXCERPT_CHARACTERS : CONTEXT_CHARACTERS[request.contextSize])
  const call = engine.request(
    {
      query: request.query,
      count,
      includeDomains: native && request.allowed !== undefined && request.allowed.length > 0 ? request.allowed : undefined,
      excludeDomains: native && request.excluded !== undefined && request.excluded.length > 0 ? request.excluded : undefined,
      maxCharacters,
      contextSize: request.contextSize,
    },
    baseUrl,
    settings.apiKey,
  )
  let body: unknown
  try {
    const res = await fetch(call.url, {
      method: call.method,
      headers: call.headers,
      ...(call.body === undefined ? {} : { body: call.body }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(settings.timeoutMs)]),
    })
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined)
      return { ok: false, error: `the search engine (${engine.id}) answered HTTP ${res.status}` }
    }
    const text = await res.text()
    try {
      body = JSON.parse(text)
    } catch {
      return { ok: false, error: `the search engine (${engine.id}) answered a body that is not JSON` }
    }
  } catch (e) {
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
    return { ok: false, error: timedOut ? `the search engine (${engine.id}) did not answer in time` : `the search engine (${engine.id}) could not be reached` }
  }
  const hits = engine.hits(body)
  if (typeof hits === "string") return { ok: false, error: `the search engine (${engine.id}) gave an unexpected answer: ${hits}` }
  const allows = domainFilter(request.allowed, request.excluded)
  const seen = new Set<string>()
  const kept: Array<SearchHit> = []
  for (const hit of hits) {
    if (kept.length >= request.maxResults) break
    if (hit.url.length > MAX_URL_CHARACTERS || seen.has(hit.url) || !allows(hit.url)) continue
    seen.add(hit.url)
    kept.push({ title: cut(hit.title.trim() || hit.url, MAX_TITLE_CHARACTERS), url: hit.url, excerpt: cut(hit.excerpt.trim(), maxCharacters) })
  }
  return { ok: true, hits: kept }
}

/** The hits as the model reads them: numbered, title, URL and excerpt. */
export const hitsAsText = (query: string, hits: ReadonlyArray<SearchHit>): string =>
  hits.length === 0
    ? `No web results for "${query}".`
    : hits.map((h, i) => `[${i + 1}] ${h.title}\nURL: ${h.url}${h.excerpt === "" ? "" : `\n${h.excerpt}`}`).join("\n\n")
