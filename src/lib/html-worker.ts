/**
 * The page worker: HTML pages read one at a time, off the event loop (page.ts keeps up to
 * two, and ends one at a page's time limit). Messages: in `HtmlJob`, out `HtmlResult`.
 */
import { type HtmlJob, type HtmlResult, htmlToMarkdown } from "./html.js"

declare const self: Worker

self.onmessage = (event: MessageEvent<HtmlJob>) => {
  let result: HtmlResult
  try {
    result = { ok: true, ...htmlToMarkdown(event.data.html, event.data.url) }
  } catch (e) {
    result = { ok: false, error: `the page could not be read${e instanceof Error ? ` (${e.message.slice(0, 200)})` : ""}` }
  }
  self.postMessage(result)
}
