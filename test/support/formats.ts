/** The same request in each client format the gateway serves, for the tests that run a rule through all three. */

export type Format = "responses" | "chat" | "messages"
export const FORMATS: ReadonlyArray<Format> = ["responses", "chat", "messages"]
export const PATHS: Record<Format, string> = { responses: "/v1/responses", chat: "/v1/chat/completions", messages: "/v1/messages" }

export interface Message {
  readonly role: string
  readonly content: string
}

/**
 * A body in `format` for `model`: `conversation` as the Responses `input` or as the Chat and
 * Messages `messages` (a string is one user message), Messages with the `max_tokens` it requires
 * (64); `extra` (plugins, tools, …) goes on as it is.
 */
export const bodyIn = (format: Format, model: string, conversation: string | ReadonlyArray<Message>, extra: Record<string, unknown> = {}) => {
  const messages = typeof conversation === "string" ? [{ role: "user", content: conversation }] : conversation
  if (format === "responses") return { model, input: conversation, ...extra }
  if (format === "chat") return { model, messages, ...extra }
  return { model, max_tokens: 64, messages, ...extra }
}
