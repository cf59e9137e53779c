/**
 * The `web` plugin (docs/plugins.md): one search before the model, for the last user message, on the
 * configured engine (`search` in config); the results go in a system message just above that
 * message, headed by `search_prompt` (default: the hosted service's wording, with today's date).
 * Fields: `max_results` (default 5, 1–25), `search_prompt`, the domain filters (`include_domains` /
 * `exclude_domains`, or the tool's names `allowed_domains` / `excluded_domains`), `search_context_size`
 * / `max_characters`, `engine` (`auto` or the configured one). The search costs
 * `search.pricing.request`, charged with the answer (and made only for a key with that much budget
 * left: 402 otherwise); its results are links the answer may cite
 * (`citable`: `url_citation` annotations). The search runs on the runtime as a read the stages miss
 * (`Missing`), kept in the plugin's slot of the request's `Loaded`, and the stage runs again.
 */
import { Effect, Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import { type ApiError, BadGateway, BadRequest } from "../../domain/errors.js"
import { hitsAsText, runSearch, SEARCH_NOT_CONFIGURED, type SearchOutcome } from "../../lib/search/index.js"
import { Missing } from "../stages.js"
import { AnyRecord } from "../../domain/schema-rules.js"
import { webPluginFields } from "../../domain/web.js"
import { pluginFields, type PreModelHalf, type RequestPlugin, requestSlot } from "./plugin.js"
import { lastUserMessage, today, withContextAbove } from "./web-context.js"

const DEFAULT_MAX_RESULTS = 5
/** Characters of the user's message sent as the query at most (engines cap queries). */
const MAX_QUERY_CHARACTERS = 1_000

/** The hosted service's default `search_prompt`, with the date of the search. */
export const defaultSearchPrompt = (date: string): string =>
  `A web search was conducted on ${date}. Incorporate the following web search results into your response.\n\nIMPORTANT: Cite them using markdown links named using the domain of the source.\nExample: [nytimes.com](https://nytimes.com/some-page).`

/** A request's searches, by the plugin's index in `plugins`. */
const searchesOf = requestSlot<Map<number, SearchOutcome | ApiError>>("web")

export const WebPlugin = Schema.Struct({ ...pluginFields("web"), ...webPluginFields }, AnyRecord)
type WebEntry = typeof WebPlugin.Type

export const webPlugin: RequestPlugin<"web", WebEntry> = {
  id: "web",
  schema: WebPlugin,
  pre: ({ settings }) => makeWebStage(settings),
}

const refuse = (message: string) => new BadRequest({ message: `Invalid request: ${message}` })

/** The stage over the gateway's `search` settings. */
export const makeWebStage = (settings: Settings): PreModelHalf<WebEntry> => ({
  needsPlan: false,
  run: (config, state, at) => {
    const search = settings.search
    if (search === undefined) return refuse(`plugins[${at}]: ${SEARCH_NOT_CONFIGURED}`)
    if (config.engine !== undefined && config.engine !== "auto" && config.engine !== search.engine) {
      return refuse(`plugins[${at}].engine: this gateway searches with ${search.engine}; use "auto" or "${search.engine}"`)
    }
    const message = lastUserMessage(state.request)
    if (message === undefined) return refuse(`plugins[${at}]: the web plugin searches for the last user message, and the request has none with text`)
    const query = message.text.trim().slice(0, MAX_QUERY_CHARACTERS)
    const maxResults = config.max_results ?? DEFAULT_MAX_RESULTS
    const searches = searchesOf.get(state.loaded)
    const outcome = searches?.get(at)
    if (outcome === undefined) {
      const remember = (value: SearchOutcome | ApiError) => {
        const map = searchesOf.get(state.loaded) ?? new Map<number, SearchOutcome | ApiError>()
        map.set(at, value)
        searchesOf.set(state.loaded, map)
      }
      return new Missing(
        Effect.gen(function* () {
          // A priced search only for a key with budget left for it (402 otherwise, no search made).
          if (search.pricePerRequest > 0 && state.holdBudget !== undefined) {
            const held = yield* Effect.either(state.holdBudget(state, search.pricePerRequest))
            if (held._tag === "Left") return remember(held.left)
          }
          const found = yield* Effect.promise((signal) =>
            runSearch(
              search,
              {
                query,
                maxResults,
                allowed: config.include_domains ?? config.allowed_domains,
                excluded: config.exclude_domains ?? config.excluded_domains,
                maxCharacters: config.max_characters,
                contextSize: config.search_context_size,
              },
              signal,
            ),
          )
          remember(found)
        }),
      )
    }
    if ("_tag" in outcome) return outcome
    // The client asked for an answer grounded in the web: without results it is not served silently.
    if (!outcome.ok) return new BadGateway({ message: `plugins[${at}]: web search failed: ${outcome.error}` })
    const prompt = config.search_prompt ?? defaultSearchPrompt(today())
    const request = withContextAbove(state.request, message.at, `${prompt}\n\n${hitsAsText(query, outcome.hits)}`)
    const cost = search.pricePerRequest
    return {
      request,
      entry: {
        type: "plugin",
        name: "web",
        summary: `${outcome.hits.length} web result${outcome.hits.length === 1 ? "" : "s"} from ${search.engine} added to the prompt`,
        data: { engine: search.engine, query, results: outcome.hits.map((h) => ({ title: h.title, url: h.url })), ...(cost > 0 ? { cost } : {}) },
      },
      citable: outcome.hits.map((h) => ({ url: h.url, title: h.title })),
      ...(cost > 0 ? { cost } : {}),
    }
  },
})
