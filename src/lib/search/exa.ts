/**
 * Exa: `POST {base_url}/search` with `x-api-key`, `{query, numResults, includeDomains?,
 * excludeDomains?, contents: {highlights: {maxCharacters}}}` → `{results: [{url, title, highlights?, text?}]}`.
 */
import { Either, Redacted, Schema } from "effect"
import type { SearchEngine } from "./engine.js"

const Answer = Schema.Struct({
  results: Schema.Array(
    Schema.Struct({
      url: Schema.String,
      title: Schema.optional(Schema.NullOr(Schema.String)),
      highlights: Schema.optional(Schema.Array(Schema.String)),
      text: Schema.optional(Schema.String),
      summary: Schema.optional(Schema.String),
    }),
  ),
})
const decode = Schema.decodeUnknownEither(Answer)

export const exa: SearchEngine = {
  id: "exa",
  defaultBaseUrl: "https://api.exa.ai",
  maxCount: 25,
  filtersDomains: true,
  request: (query, baseUrl, apiKey) => ({
    url: `${baseUrl}/search`,
    method: "POST",
    headers: { "content-type": "application/json", ...(apiKey === undefined ? {} : { "x-api-key": Redacted.value(apiKey) }) },
    body: JSON.stringify({
      query: query.query,
      numResults: query.count,
      ...(query.includeDomains === undefined ? {} : { includeDomains: query.includeDomains }),
      ...(query.excludeDomains === undefined ? {} : { excludeDomains: query.excludeDomains }),
      contents: { highlights: { maxCharacters: query.maxCharacters } },
    }),
  }),
  hits: (body) => {
    const answer = decode(body)
    if (Either.isLeft(answer)) return "the answer has no results array of {url, title, highlights}"
    return answer.right.results.map((r) => ({
      title: r.title ?? r.url,
      url: r.url,
      excerpt: r.highlights?.join(" … ") ?? r.text ?? r.summary ?? "",
    }))
  },
}
