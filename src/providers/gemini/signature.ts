/**
 * Gemini's `thoughtSignature` rides in the tool call's id: a function call Gemini answered with a
 * signature must be sent back with it (Gemini 3 refuses the next turn otherwise), and the id is
 * the one field of a call that every client format returns unchanged. The signature (base64) is
 * written base64url, so the id keeps to `[A-Za-z0-9_-]` (Anthropic's rule for tool ids).
 */
import { toolCallIdOr } from "../../domain/random"

const SEPARATOR = "__thought__"

/** A new call id for a function call: Gemini's own id when it gave one. */
export const callIdOf = (upstreamId: string | undefined, signature: string | undefined): string => {
  const id = toolCallIdOr(upstreamId)
  if (signature === undefined || signature.length === 0) return id
  return `${id}${SEPARATOR}${signature.replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "")}`
}

/** The signature a call id carries (as Gemini wrote it, base64), if any. */
export const signatureOf = (callId: string): string | undefined => {
  const at = callId.indexOf(SEPARATOR)
  if (at === -1) return undefined
  const url = callId.slice(at + SEPARATOR.length)
  if (url.length === 0) return undefined
  const base64 = url.replaceAll("-", "+").replaceAll("_", "/")
  return base64 + "=".repeat((4 - (base64.length % 4)) % 4)
}
