/**
 * A preset version from a Chat Completions body (POST /v1/presets/{slug}/chat/completions): the
 * body is decoded by the same rules as POST /v1/chat/completions, its system and developer
 * messages become `system_prompt`, the rest of it the version's config in the Responses form, as
 * POST /v1/presets/{slug}/responses stores it (the conversation itself is validated, not stored).
 */
import { Either } from "effect"
import type { BadRequest } from "../../domain/errors.js"
import { type VersionBody, versionBodyFromRequest } from "../../domain/presets.js"
import type { InputItem } from "../../domain/responses.js"
import { decodeChatPresetBody } from "./request.js"

/** The text of a system or developer message (a chat system message carries text parts only). */
const systemText = (item: InputItem): string | undefined => {
  if (item.type !== "message" || !("role" in item) || (item.role !== "system" && item.role !== "developer")) return undefined
  const content = item.content as string | ReadonlyArray<{ readonly text?: string }> | null
  if (typeof content === "string") return content
  return (content ?? []).map((part) => part.text ?? "").join("")
}

export const versionBodyFromChat = (body: unknown): Either.Either<VersionBody, BadRequest> =>
  Either.flatMap(decodeChatPresetBody(body), ({ input, ...request }) => {
    const system: Array<string> = []
    for (const item of Array.isArray(input) ? input : []) {
      const text = systemText(item)
      if (text !== undefined) system.push(text)
    }
    return versionBodyFromRequest(system.length === 0 ? request : { ...request, instructions: system.join("\n\n") })
  })
