/**
 * HTML → readable markdown for the model: @mozilla/readability over linkedom, then turndown. Runs
 * in the page worker (html-worker.ts), never on the event loop. A page Readability cannot extract
 * (a short page, a fragment without `<body>`, text without tags) falls back to the text of its
 * body, so a page with words is never read as empty.
 */
import { Readability } from "@mozilla/readability"
import { parseHTML } from "linkedom"
import TurndownService from "turndown"

export interface HtmlJob {
  readonly html: string
  readonly url: string
}

export type HtmlResult =
  | { readonly ok: true; readonly title: string; readonly content: string }
  | { readonly ok: false; readonly error: string }

const turndown = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" })

/** Elements whose text is not the page's words. */
const NOT_TEXT = "script, style, noscript, template, svg"

/** The words of `html`: its body's text (the document's when it has no body), whitespace collapsed. */
export const textOfHtml = (html: string): string => {
  const { document } = parseHTML(html)
  let text = ""
  // A document without a root element (text without tags): its own text, tags dropped.
  if (document.documentElement != null) {
    for (const element of document.querySelectorAll(NOT_TEXT)) element.remove()
    text = (document.body ?? document.documentElement).textContent ?? ""
  }
  const words = text.trim() === "" ? html.replace(/<(script|style|noscript|template|title)\b[\s\S]*?<\/\1>/gi, " ").replace(/<[^>]*>/g, " ") : text
  return words.replace(/[ \t\r\f\v]+/g, " ").replace(/\s*\n\s*/g, "\n").trim()
}

/** HTML → its readable part as markdown, and its title; the body's text when Readability finds nothing. */
export const htmlToMarkdown = (html: string, url: string): { readonly title: string; readonly content: string } => {
  const { document } = parseHTML(html)
  const fallbackTitle = document.querySelector("title")?.textContent?.trim() ?? ""
  let title = ""
  let content = ""
  try {
    // Readability needs a document element; a fragment or bare text has none.
    if (document.documentElement != null) {
      const article = new Readability(document as unknown as Document).parse()
      title = article?.title?.trim() ?? ""
      content = turndown.turndown(article?.content ?? document.querySelector("body")?.innerHTML ?? html).trim()
    }
  } catch {
    content = ""
  }
  if (content === "") content = textOfHtml(html)
  return { title: title || fallbackTitle || url, content }
}
