/**
 * The `web-fetch` plugin (docs/plugins.md): the pages the last user message links to (its http(s)
 * URLs, at most 5, fewer with `max_uses`) are fetched before the model, through the safe outbound
 * fetcher (src/lib/page.ts: HTML as markdown, PDF text, plain text), and their content goes in a
 * system message just above that message. Fields as the tool's: `max_content_tokens`,
 * `allowed_domains` / `blocked_domains`, `max_uses`. A page that cannot be fetched is named there
 * with the reason (the model is told, the request goes on). Fetches are loaded on the runtime as a
 * read the stages miss (`Missing`) and kept in the plugin's slot of the request's `Loaded`.
 */
import { Effect, Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import type { ApiError } from "../../domain/errors.js"
import { NANO_PER_USD } from "../../domain/pricing.js"
import { AnyRecord } from "../../domain/schema-rules.js"
import { webFetchPluginFields } from "../../domain/web.js"
import { fetchPage, type PageOutcome } from "../../lib/page.js"
import { Missing } from "../stages.js"
import { pluginFields, type PreModelHalf, type RequestPlugin, requestSlot } from "./plugin.js"
import { lastUserMessage, today, withContextAbove } from "./web-context.js"

/** URLs of one message fetched at most. */
export const MAX_URLS_PER_MESSAGE = 5

/** What may close a URL written in prose rather than belong to it. */
const URL_IN_TEXT = /https?:\/\/[^\s<>"'`]+/gi
const TRAILING = /[.,;:!?)\]}>*_]+$/

/** The http(s) URLs of `text`, in order, each once, at most `max`. */
export const urlsIn = (text: string, max: number): ReadonlyArray<string> => {
  const found: Array<string> = []
  for (const match of text.matchAll(URL_IN_TEXT)) {
    const url = match[0].replace(TRAILING, "")
    if (!found.includes(url)) found.push(url)
    if (found.length >= max) break
  }
  return found
}

/** A request's fetched pages (or its key's refusal), by the plugin's index in `plugins`. */
const pagesOf = requestSlot<Map<number, ReadonlyArray<PageOutcome> | ApiError>>("web-fetch")

/** The least a key must have left for pages to be fetched on its behalf: one nano-dollar. */
const LEAST_USD = 1 / NANO_PER_USD

export const WebFetchPlugin = Schema.Struct({ ...pluginFields("web-fetch"), ...webFetchPluginFields }, AnyRecord)
type WebFetchEntry = typeof WebFetchPlugin.Type

export const webFetchPlugin: RequestPlugin<"web-fetch", WebFetchEntry> = {
  id: "web-fetch",
  schema: WebFetchPlugin,
  pre: ({ settings }) => makeWebFetchStage(settings),
}

const contextOf = (pages: ReadonlyArray<PageOutcome>): string =>
  [
    `The user's message links to these pages; their content was fetched on ${today()}.`,
    ...pages.map((p, i) =>
      p.ok ? `[${i + 1}] ${p.title}\nURL: ${p.url}\n\n${p.content}` : `[${i + 1}] URL: ${p.url}\nThe page could not be fetched: ${p.error}`,
    ),
  ].join("\n\n")

/** The stage over the gateway's outbound policy. */
const makeWebFetchStage = (settings: Settings): PreModelHalf<WebFetchEntry> => ({
  needsPlan: false,
  run: (config, state, at) => {
    const message = lastUserMessage(state.request)
    const urls = message === undefined ? [] : urlsIn(message.text, Math.min(MAX_URLS_PER_MESSAGE, config.max_uses ?? MAX_URLS_PER_MESSAGE))
    if (message === undefined || urls.length === 0) {
      return { entry: { type: "plugin", name: "web-fetch", summary: "no URL in the last user message: nothing fetched", data: { pages: [] } } }
    }
    const pages = pagesOf.get(state.loaded)?.get(at)
    if (pages === undefined) {
      const remember = (value: ReadonlyArray<PageOutcome> | ApiError) => {
        const map = pagesOf.get(state.loaded) ?? new Map<number, ReadonlyArray<PageOutcome> | ApiError>()
        map.set(at, value)
        pagesOf.set(state.loaded, map)
      }
      return new Missing(
        Effect.gen(function* () {
          // The fetches are free but not without cost to others (the pages' servers, this
          // process's sockets): a key with nothing left gets its 402 before any is made.
          if (state.holdBudget !== undefined) {
            const held = yield* Effect.either(state.holdBudget(state, LEAST_USD))
            if (held._tag === "Left") return remember(held.left)
          }
          const options = { maxContentTokens: config.max_content_tokens, allowed: config.allowed_domains, blocked: config.blocked_domains }
          remember(yield* Effect.promise((signal) => Promise.all(urls.map((url) => fetchPage(url, options, settings, signal)))))
        }),
      )
    }
    if ("_tag" in pages) return pages
    const read = pages.filter((p) => p.ok).length
    return {
      request: withContextAbove(state.request, message.at, contextOf(pages)),
      entry: {
        type: "plugin",
        name: "web-fetch",
        summary: `${read} of ${pages.length} linked page${pages.length === 1 ? "" : "s"} fetched and added to the prompt`,
        data: {
          pages: pages.map((p) =>
            p.ok
              ? { url: p.url, status: "completed", title: p.title, http_status: p.httpStatus, characters: p.content.length }
              : { url: p.url, status: "failed", error: p.error, ...(p.httpStatus === undefined ? {} : { http_status: p.httpStatus }) },
          ),
        },
      },
      citable: pages.flatMap((p) => (p.ok ? [{ url: p.url, title: p.title }] : [])),
    }
  },
})
