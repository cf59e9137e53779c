/**
 * SearXNG (self-hosted): `GET {base_url}/search?q=…&format=json` → `{results: [{url, title, content}]}`.
 * It has no result count nor domain filter in its API: the gateway cuts and filters. A key, when
 * configured, goes as a bearer token (for an instance behind an authenticating proxy).
 */
import { Either, Redacted, Schema } from "effect"
import type { SearchEngine } from "./engine.js"

const Answer = Schema.Struct({
  results: Schema.Array(Schema.Struct({ url: Schema.String, title: Schema.optional(Schema.String), content: Schema.optional(Schema.NullOr(Schema.String)) })),
})
const decode = Schema.decodeUnknownEither(Answer)

export const searxng: SearchEngine = {
  id: "searxng",
  defaultBaseUrl: undefined,
  maxCount: 25,
  filtersDomains: false,
  request: (query, baseUrl, apiKey) => ({
    url: `${baseUrl}/search?${new URLSearchParams({ q: query.query, format: "json" })}`,
    method: "GET",
    headers: { accept: "application/json", ...(apiKey === undefined ? {} : { authorization: `Bearer ${Redacted.value(apiKey)}` }) },
  }),
  hits: (body) => {
    const answer = decode(body)
    if (Either.isLeft(answer)) return "the answer has no results array of {url, title, content}"
    return answer.right.results.map((r) => ({ title: r.title ?? r.url, url: r.url, excerpt: r.content ?? "" }))
  },
}
