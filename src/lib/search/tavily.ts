/**
 * Tavily: `POST {base_url}/search` with `Authorization: Bearer <key>`, `{query, max_results (≤ 20),
 * search_depth, include_domains?, exclude_domains?}` → `{results: [{url, title, content}]}`.
 * `search_context_size: high` asks for the `advanced` depth.
 */
import { Either, Redacted, Schema } from "effect"
import type { SearchEngine } from "./engine.js"

const Answer = Schema.Struct({
  results: Schema.Array(Schema.Struct({ url: Schema.String, title: Schema.optional(Schema.NullOr(Schema.String)), content: Schema.optional(Schema.NullOr(Schema.String)) })),
})
const decode = Schema.decodeUnknownEither(Answer)

export const tavily: SearchEngine = {
  id: "tavily",
  defaultBaseUrl: "https://api.tavily.com",
  maxCount: 20,
  filtersDomains: true,
  request: (query, baseUrl, apiKey) => ({
    url: `${baseUrl}/search`,
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { authorization: `Bearer ${Redacted.value(apiKey)}` }) },
    body: JSON.stringify({
      query: query.query,
      max_results: query.count,
      search_depth: query.contextSize === "high" ? "advanced" : "basic",
      ...(query.includeDomains === undefined ? {} : { include_domains: query.includeDomains }),
      ...(query.excludeDomains === undefined ? {} : { exclude_domains: query.excludeDomains }),
    }),
  }),
  hits: (body) => {
    const answer = decode(body)
    if (Either.isLeft(answer)) return "the answer has no results array of {url, title, content}"
    return answer.right.results.map((r) => ({ title: r.title ?? r.url, url: r.url, excerpt: r.content ?? "" }))
  },
}
