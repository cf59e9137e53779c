/**
 * The Anthropic Messages client format (POST /v1/messages, docs/messages.md): its decoder into the
 * normalized request, its encoder of the normalized events, and Anthropic's error envelope.
 */
import type { ClientFormat } from "../format.js"
import { MessagesEncoder, type MessagesEncoderOptions } from "./encoder.js"
import { messagesErrorBody } from "./errors.js"
import { decodeMessagesRequest } from "./request.js"

export const messagesFormat: ClientFormat = {
  name: "messages",
  decode: decodeMessagesRequest,
  // The system prompt may become a system message ahead of the messages' items: the first slice's.
  slicedItems: { key: "messages", firstOnly: ["system"] },
  encoder: (request, options: MessagesEncoderOptions) => new MessagesEncoder(request, options),
  errorBody: messagesErrorBody,
}
