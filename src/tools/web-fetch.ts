/**
 * The `openrouter:web_fetch` server tool (docs/web-tools.md): the model calls `web_fetch({url})`, the
 * gateway fetches the page through the safe outbound fetcher (page.ts) and gives the model
 * `{url, title, content, status: "completed", retrieved_at}` or `{url, status: "failed", error}`;
 * the client gets the SDK's `openrouter:web_fetch` item (with `httpStatus`). The request's tool
 * `parameters`: `max_content_tokens`, `allowed_domains` / `blocked_domains`, `max_uses` (calls of
 * this request at most). Fetches are not priced.
 */
import { Either, Schema } from "effect"
import { describeParseError } from "../domain/validation.js"
import { WebFetchParameters } from "../domain/web.js"
import { fetchPage, type PageOutcome } from "../lib/page.js"
import type { ServerTool, ServerToolResult } from "./types.js"

const decodeParameters = Schema.decodeUnknownEither(WebFetchParameters, { errors: "first" })

/** Why the request's `parameters` of the tool are invalid (for a 400 when the request is decoded), or undefined. */
export const webFetchParametersProblem = (parameters: unknown): string | undefined => {
  const decoded = decodeParameters(parameters ?? {})
  return Either.isLeft(decoded) ? describeParseError(decoded.left) : undefined
}

/** What the model is given for one page (JSON text). */
export const pageForModel = (page: PageOutcome): string =>
  JSON.stringify(
    page.ok
      ? { url: page.url, title: page.title, content: page.content, status: "completed", retrieved_at: page.retrievedAt }
      : { url: page.url, status: "failed", error: page.error },
  )

const failure = (url: string, error: string): ServerToolResult => ({
  modelOutput: pageForModel({ ok: false, url, error }),
  item: { type: "openrouter:web_fetch", status: "incomplete", url, error },
  cost: 0,
})

export const webFetchTool: ServerTool<"openrouter:web_fetch"> = {
  type: "openrouter:web_fetch",
  name: "web_fetch",
  parametersProblem: (parameters) => webFetchParametersProblem(parameters),
  description: "Fetch a web page or PDF by its URL and read its content as text (markdown for HTML pages).",
  parameters: {
    type: "object",
    properties: { url: { type: "string", description: "The http(s) URL of the page to read." } },
    required: ["url"],
    additionalProperties: false,
  },
  unavailable: () => undefined,
  run: async (args, toolParameters, ctx) => {
    const url = typeof (args as { url?: unknown } | null)?.url === "string" ? (args as { url: string }).url.trim() : ""
    if (url === "") return failure(url, "url: an http(s) URL is required")
    const decoded = decodeParameters(toolParameters)
    if (Either.isLeft(decoded)) return failure(url, `the tool's parameters: ${describeParseError(decoded.left)}`)
    const parameters = decoded.right
    if (parameters.max_uses !== undefined && ctx.callsSoFar >= parameters.max_uses) {
      return failure(url, `this request's fetches are used up (max_uses ${parameters.max_uses})`)
    }
    const page = await fetchPage(
      url,
      { maxContentTokens: parameters.max_content_tokens, allowed: parameters.allowed_domains, blocked: parameters.blocked_domains },
      ctx.settings,
      ctx.signal,
    )
    const item = page.ok
      ? { type: "openrouter:web_fetch", status: "completed", url: page.url, title: page.title, content: page.content, httpStatus: page.httpStatus }
      : { type: "openrouter:web_fetch", status: "incomplete", url: page.url, error: page.error, ...(page.httpStatus === undefined ? {} : { httpStatus: page.httpStatus }) }
    return {
      modelOutput: pageForModel(page),
      item,
      cost: 0,
      fetches: 1,
      ...(page.ok ? { citable: [{ url: page.url, title: page.title }] } : {}),
    }
  },
}
