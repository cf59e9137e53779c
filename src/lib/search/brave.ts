/**
 * Brave Search: `GET {base_url}/res/v1/web/search?q=…&count=N` (N ≤ 20) with `X-Subscription-Token`
 * → `{web: {results: [{url, title, description, extra_snippets?}]}}`. No domain filter in its API:
 * the gateway filters.
 */
import { Either, Redacted, Schema } from "effect"
import type { SearchEngine } from "./engine.js"

const Answer = Schema.Struct({
  web: Schema.optional(
    Schema.Struct({
      results: Schema.Array(
        Schema.Struct({
          url: Schema.String,
          title: Schema.optional(Schema.String),
          description: Schema.optional(Schema.String),
          extra_snippets: Schema.optional(Schema.Array(Schema.String)),
        }),
      ),
    }),
  ),
})
const decode = Schema.decodeUnknownEither(Answer)

/** Brave marks the query's words in its snippets with <strong>: the model gets plain text. */
const plain = (html: string) => html.replace(/<\/?strong>/g, "")

export const brave: SearchEngine = {
  id: "brave",
  defaultBaseUrl: "https://api.search.brave.com",
  maxCount: 20,
  filtersDomains: false,
  request: (query, baseUrl, apiKey) => ({
    url: `${baseUrl}/res/v1/web/search?${new URLSearchParams({ q: query.query, count: String(query.count) })}`,
    method: "GET",
    headers: { accept: "application/json", ...(apiKey === undefined ? {} : { "x-subscription-token": Redacted.value(apiKey) }) },
  }),
  hits: (body) => {
    const answer = decode(body)
    if (Either.isLeft(answer)) return "the answer is not a web search result ({web: {results}})"
    return (answer.right.web?.results ?? []).map((r) => ({
      title: plain(r.title ?? r.url),
      url: r.url,
      excerpt: plain([r.description ?? "", ...(r.extra_snippets ?? [])].filter((s) => s !== "").join(" … ")),
    }))
  },
}
