/**
 * The settings a client gives the web tools (docs/web-tools.md): the `parameters` of an
 * `openrouter:web_search` / `openrouter:web_fetch` entry of `tools`, and the fields of the `web` and
 * `web-fetch` plugins. One Schema each: the validator, the type and the rules a 400 quotes.
 * Fields the hosted service has and this gateway does not use (`mode`, `user_location`, …) pass.
 */
import { Schema } from "effect"
import { AnyRecord, intBetween, maxChars, oneOf } from "./schema-rules.js"

/** The search engines the gateway speaks (config `search.engine`). */
export const searchEngineIds = ["searxng", "exa", "tavily", "brave"] as const
export type SearchEngineId = (typeof searchEngineIds)[number]

/** A domain filter: `example.com` (and its subdomains), `*.example.com`, or `example.com/blog`. */
const DomainPattern = maxChars(253).pipe(
  Schema.pattern(/^[^\s/]+(\/\S*)?$/, { message: () => "a domain such as example.com, *.example.com or example.com/blog" }),
)
const Domains = Schema.Array(DomainPattern).pipe(Schema.maxItems(100, { message: () => "at most 100 domains" }))

const searchFields = {
  /** Results per search (default 5). */
  max_results: Schema.optional(intBetween(1, 25)),
  search_context_size: Schema.optional(oneOf("low", "medium", "high")),
  max_characters: Schema.optional(intBetween(1, 100_000)),
  /** `auto`, or the gateway's own engine: a request cannot pick another engine than the one configured. */
  engine: Schema.optional(Schema.String),
}

/** `parameters` of an `openrouter:web_search` tool. */
export const WebSearchParameters = Schema.Struct(
  {
    ...searchFields,
    allowed_domains: Schema.optional(Domains),
    excluded_domains: Schema.optional(Domains),
    /** Results across every search of the request (default 50); the searches stop returning results once reached. */
    max_total_results: Schema.optional(intBetween(1, 1000)),
    /** Searches of the request at most; the next ones are failed tool results. */
    max_uses: Schema.optional(intBetween(1, 100)),
    /** OpenAI's web_search tool names its allow list here. */
    filters: Schema.optional(Schema.Struct({ allowed_domains: Schema.optional(Domains) }, AnyRecord)),
  },
  AnyRecord,
)
export type WebSearchParameters = typeof WebSearchParameters.Type

/** The `web` plugin's own fields (the hosted service names the filters include/exclude; the tool's names are taken too). */
export const webPluginFields = {
  ...searchFields,
  search_prompt: Schema.optional(maxChars(10_000)),
  include_domains: Schema.optional(Domains),
  exclude_domains: Schema.optional(Domains),
  allowed_domains: Schema.optional(Domains),
  excluded_domains: Schema.optional(Domains),
}

const fetchFields = {
  allowed_domains: Schema.optional(Domains),
  blocked_domains: Schema.optional(Domains),
  /** Tokens of a page's content at most (o200k); the rest is cut. */
  max_content_tokens: Schema.optional(intBetween(1, 1_000_000)),
  max_uses: Schema.optional(intBetween(1, 100)),
  /** The gateway fetches pages itself (the hosted service's `openrouter` engine). */
  engine: Schema.optional(oneOf("auto", "openrouter")),
}

/** `parameters` of an `openrouter:web_fetch` tool. */
export const WebFetchParameters = Schema.Struct(fetchFields, AnyRecord)
export type WebFetchParameters = typeof WebFetchParameters.Type

/** The `web-fetch` plugin's own fields. */
export const webFetchPluginFields = fetchFields
