/**
 * The client formats the data plane serves, each at its path: one line per format. The server
 * mounts every entry with the same handler (src/http/route-table.ts); the request path is the same
 * for all of them (src/pipeline/), only ingress, egress and the error envelope differ.
 */
import type { ClientFormat } from "./format.js"
import { chatFormat } from "./chat/index.js"
import { messagesFormat } from "./messages/index.js"
import { responsesFormat } from "./responses/index.js"

export interface MountedFormat {
  /** The POST path it answers, e.g. `/v1/responses`. */
  readonly path: string
  readonly format: ClientFormat
}

export const formats: ReadonlyArray<MountedFormat> = [
  { path: "/v1/responses", format: responsesFormat },
  { path: "/v1/chat/completions", format: chatFormat },
  { path: "/v1/messages", format: messagesFormat },
]
