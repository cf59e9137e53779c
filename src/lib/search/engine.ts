/**
 * A search engine the gateway speaks (config `search.engine`): how one query becomes the engine's
 * HTTP request, and how its answer (decoded by the engine's Schema) becomes hits. One file per
 * engine, one line in index.ts. The engine is the operator's (a URL from the config file), so it is
 * called with a plain fetch and a deadline, not through the tenant-URL fetcher.
 */
import type { Redacted } from "effect"
import type { SearchEngineId } from "../../domain/web.js"

/** One search as the gateway asks it. */
export interface SearchQuery {
  readonly query: string
  /** Results wanted from the engine (before the gateway's own filtering). */
  readonly count: number
  /** Plain domains (no wildcard, no path) for an engine that filters by itself; undefined when none or not expressible. */
  readonly includeDomains: ReadonlyArray<string> | undefined
  readonly excludeDomains: ReadonlyArray<string> | undefined
  /** Characters of one result's excerpt at most. */
  readonly maxCharacters: number
  readonly contextSize: "low" | "medium" | "high" | undefined
}

/** One result. */
export interface SearchHit {
  readonly title: string
  readonly url: string
  readonly excerpt: string
}

export interface EngineRequest {
  readonly url: string
  readonly method: "GET" | "POST"
  readonly headers: Readonly<Record<string, string>>
  readonly body?: string
}

export interface SearchEngine {
  readonly id: SearchEngineId
  /** The vendor's public API root, used when `search.base_url` is absent (searxng has none: it is self-hosted). */
  readonly defaultBaseUrl: string | undefined
  /** Results one request can ask for at most. */
  readonly maxCount: number
  /** It filters by plain domains itself (the gateway still checks every hit, and applies wildcards and paths). */
  readonly filtersDomains: boolean
  readonly request: (query: SearchQuery, baseUrl: string, apiKey: Redacted.Redacted<string> | undefined) => EngineRequest
  /** The engine's answer → hits, or why it is not an answer of this engine. */
  readonly hits: (body: unknown) => ReadonlyArray<SearchHit> | string
}
