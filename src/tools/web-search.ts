/**
 * The `openrouter:web_search` server tool (docs/web-tools.md): the model calls `web_search({query})`, the
 * gateway searches the configured engine (`search` in config: searxng, exa, tavily, brave) and gives
 * the model the results as text (title, URL, excerpt); the client gets the SDK's
 * `openrouter:web_search` item (`action: {type: "search", query, sources}`). The request's tool
 * `parameters` set the count, the domain filters and the excerpt size; `max_total_results` and
 * `max_uses` bound the searches of one request (earlier calls count `max_results` each, the most they
 * could have returned). Each search that answers costs `search.pricing.request`.
 */
import { Either, Schema } from "effect"
import type { Settings } from "../config/Config.js"
import { describeParseError } from "../domain/validation.js"
import { WebSearchParameters } from "../domain/web.js"
import { hitsAsText, runSearch, SEARCH_NOT_CONFIGURED } from "../lib/search/index.js"
import type { ServerTool, ServerToolResult } from "./types.js"

const DEFAULT_MAX_RESULTS = 5
const DEFAULT_MAX_TOTAL_RESULTS = 50

const decodeParameters = Schema.decodeUnknownEither(WebSearchParameters, { errors: "first" })

/**
 * Why the request's `parameters` of the tool cannot be used on this gateway (for a 400 when the
 * request is decoded), or undefined. `engine` may be `auto` or the configured engine.
 */
export const webSearchParametersProblem = (parameters: unknown, settings: Settings): string | undefined => {
  const decoded = decodeParameters(parameters ?? {})
  if (Either.isLeft(decoded)) return describeParseError(decoded.left)
  const engine = decoded.right.engine
  const configured = settings.search?.engine
  if (engine !== undefined && engine !== "auto" && engine !== configured) {
    return `engine: this gateway searches with ${configured ?? "no engine"}; use "auto"${configured === undefined ? "" : ` or "${configured}"`}`
  }
  return undefined
}

const failed = (query: string, error: string): ServerToolResult => ({
  modelOutput: `Web search failed: ${error}`,
  item: { type: "openrouter:web_search", status: "incomplete", action: { type: "search", query, sources: [] } },
  cost: 0,
})

/** The model's query (trimmed), or "" when it gave none. */
const queryOf = (args: unknown): string =>
  typeof (args as { query?: unknown } | null)?.query === "string" ? (args as { query: string }).query.trim() : ""

/** The SDK's `response.web_search_call.searching`: the engine is asked. */
export type WebSearchProgress = { readonly event: "searching" }

export const webSearchTool: ServerTool<"openrouter:web_search", WebSearchProgress> = {
  type: "openrouter:web_search",
  name: "web_search",
  // OpenAI's own types for its web search tool: their other fields are the tool's parameters.
  aliases: ["web_search", "web_search_preview"],
  eventPrefix: "web_search_call",
  openaiProgress: true,
  // The query as the model asked it, for the in-progress item (`action` is optional in the SDK's item).
  opening: (args) => ({ action: { type: "search", query: queryOf(args) } }),
  parametersProblem: webSearchParametersProblem,
  description:
    "Search the web for current information. Returns the most relevant pages (title, URL and an excerpt). Cite the pages you use with markdown links to their URLs.",
  parameters: {
    type: "object",
    properties: { query: { type: "string", description: "What to search the web for." } },
    required: ["query"],
    additionalProperties: false,
  },
  unavailable: (settings) => (settings.search === undefined ? SEARCH_NOT_CONFIGURED : undefined),
  run: async (args, toolParameters, ctx) => {
    const search = ctx.settings.search
    const query = queryOf(args)
    if (search === undefined) return failed(query, SEARCH_NOT_CONFIGURED)
    if (query === "") return failed(query, "query: a non-empty search query is required")
    const problem = webSearchParametersProblem(toolParameters, ctx.settings)
    const decoded = decodeParameters(toolParameters)
    if (problem !== undefined || Either.isLeft(decoded)) return failed(query, `the tool's parameters: ${problem ?? "invalid"}`)
    const parameters = decoded.right
    const perCall = parameters.max_results ?? DEFAULT_MAX_RESULTS
    if (parameters.max_uses !== undefined && ctx.callsSoFar >= parameters.max_uses) {
      return failed(query, `this request's searches are used up (max_uses ${parameters.max_uses})`)
    }
    const left = (parameters.max_total_results ?? DEFAULT_MAX_TOTAL_RESULTS) - ctx.callsSoFar * perCall
    // No search made: an incomplete item, as past max_uses (a completed one with no sources read as a search that found nothing).
    if (left <= 0) {
      const limit = parameters.max_total_results ?? DEFAULT_MAX_TOTAL_RESULTS
      return failed(query, `this request reached its limit of ${limit} results (max_total_results); answer from the results you have`)
    }
    ctx.progress?.({ event: "searching" })
    const outcome = await runSearch(
      search,
      {
        query,
        maxResults: Math.min(perCall, left),
        allowed: parameters.allowed_domains ?? parameters.filters?.allowed_domains,
        excluded: parameters.excluded_domains,
        maxCharacters: parameters.max_characters,
        contextSize: parameters.search_context_size,
      },
      ctx.signal,
    )
    // Only a search that gave results is charged (an engine that failed gave the model nothing).
    if (!outcome.ok) return { ...failed(query, outcome.error), searchEngine: search.engine }
    return {
      modelOutput: hitsAsText(query, outcome.hits),
      item: {
        type: "openrouter:web_search",
        status: "completed",
        action: { type: "search", query, sources: outcome.hits.map((h) => ({ type: "url", url: h.url })) },
      },
      cost: search.pricePerRequest,
      searchRequests: 1,
      searchResults: outcome.hits.length,
      searchEngine: search.engine,
      citable: outcome.hits.map((h) => ({ url: h.url, title: h.title })),
    }
  },
}
