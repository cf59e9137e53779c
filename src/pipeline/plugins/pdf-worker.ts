/**
 * The file-parser's PDF worker: one parse per worker, off the event loop. The page count is read
 * first and checked against `maxPages` before any text is extracted; the parent terminates the
 * worker at its time limit. Messages: in `PdfJob`, out `PdfResult`.
 */
import { extractText, getDocumentProxy } from "unpdf"

export interface PdfJob {
  readonly bytes: Uint8Array
  readonly maxPages: number
}

export type PdfResult =
  | { readonly ok: true; readonly pages: number; readonly text: ReadonlyArray<string> }
  | { readonly ok: false; readonly reason: "unreadable" | "too_many_pages"; readonly pages?: number; readonly detail?: string }

declare const self: Worker

self.onmessage = async (event: MessageEvent<PdfJob>) => {
  const { bytes, maxPages } = event.data
  let result: PdfResult
  try {
    const pdf = await getDocumentProxy(bytes, { stopAtErrors: true })
    if (pdf.numPages > maxPages) result = { ok: false, reason: "too_many_pages", pages: pdf.numPages }
    else {
      const { text } = await extractText(pdf, { mergePages: false })
      result = { ok: true, pages: pdf.numPages, text }
    }
  } catch (e) {
    result = { ok: false, reason: "unreadable", detail: e instanceof Error ? e.message.slice(0, 200) : "not a PDF" }
  }
  self.postMessage(result)
}
