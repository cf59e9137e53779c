/**
 * The Chat Completions client format (POST /v1/chat/completions): its decoder into the Responses
 * request, its encoder, and the contract's error envelope (the same as /v1/responses').
 */
import { Either } from "effect"
import { envelopeOf } from "../../domain/errors.js"
import type { ClientFormat } from "../format.js"
import { ChatEncoder, newChatId } from "./encoder.js"
import { type ChatOptions, decodeChatBody, includesUsage } from "./request.js"

/**
 * The chat-only options of a request (`stateOf`), read from the body `decode` accepted: undefined
 * when they are the default (the usage chunk is sent), the common case.
 */
const chatOptionsOf = (body: unknown): ChatOptions | undefined =>
  includesUsage((body as { readonly stream_options?: { readonly include_usage?: unknown } | null }).stream_options) ? undefined : { includeUsage: false }

export const chatFormat: ClientFormat = {
  name: "chat",
  decode: (body) => Either.map(decodeChatBody(body), ({ request }) => request),
  stateOf: chatOptionsOf,
  encoder: (_request, options) =>
    new ChatEncoder(
      {
        id: newChatId(),
        created: Math.floor(Date.now() / 1000),
        model: options.model,
        ...(options.provider === undefined ? {} : { provider: options.provider }),
      },
      { stream: options.stream, includeUsage: (options.formatState as ChatOptions | undefined)?.includeUsage !== false, annotations: options.annotations },
    ),
  errorBody: (e) => JSON.stringify(envelopeOf(e)),
}
