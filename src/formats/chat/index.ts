/**
 * The Chat Completions client format (POST /v1/chat/completions): its decoder into the Responses
 * request, its encoder, and the contract's error envelope (the same as /v1/responses').
 */
import { Either } from "effect"
import { envelopeOf } from "../../domain/errors.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import type { ClientFormat } from "../format.js"
import { ChatEncoder, newChatId } from "./encoder.js"
import { type ChatOptions, decodeChatBody } from "./request.js"

/**
 * The chat-only options of each decoded request that sets one, by the request object: ingress
 * makes it, a stage that replaces it passes them on (`replaced`), the encoder reads them.
 */
const optionsOf = new WeakMap<ResponsesRequest, ChatOptions>()

const DEFAULT_OPTIONS: ChatOptions = { includeUsage: true }

export const chatFormat: ClientFormat = {
  name: "chat",
  decode: (body) =>
    Either.map(decodeChatBody(body), ({ request, options }) => {
      if (!options.includeUsage) optionsOf.set(request, options)
      return request
    }),
  encoder: (request, options) =>
    new ChatEncoder(
      {
        id: newChatId(),
        created: Math.floor(Date.now() / 1000),
        model: options.model,
        ...(options.provider === undefined ? {} : { provider: options.provider }),
      },
      { stream: options.stream, includeUsage: (optionsOf.get(request) ?? DEFAULT_OPTIONS).includeUsage, annotations: options.annotations },
    ),
  replaced: (from, to) => {
    const options = optionsOf.get(from)
    if (options !== undefined) optionsOf.set(to, options)
  },
  errorBody: (e) => JSON.stringify(envelopeOf(e)),
}
