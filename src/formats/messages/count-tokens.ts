/**
 * POST /v1/messages/count_tokens: the gateway's own count of a Messages prompt, the estimate it
 * charges a call that ended without the upstream's usage (`estimateTokens`, characters ÷ 4,
 * src/domain/pricing.ts), with images and files counted at their fixed allowance instead of
 * their base64 (as `promptTokenBound` does, src/pipeline/bounds.ts). No tokenizer: coding
 * agents call it before each turn to decide when to compact, and an estimate in the same units
 * as the gateway's charges is what the gateway can answer for every model.
 */
import { estimateTokens, type PartAllowance } from "../../domain/pricing.js"
import type { ResponsesRequest } from "../../domain/responses.js"

/**
 * `bodyText`: the count_tokens body as sent; `request`: its translation (a preset applied);
 * `extraText`: prompt text the body did not carry (a preset's system prompt).
 */
export const countInputTokens = (bodyText: string, request: ResponsesRequest, extraText: string, parts: PartAllowance): number => {
  let chars = bodyText.length + extraText.length
  let allowance = 0
  const input = request.input
  if (typeof input !== "string" && input !== undefined) {
    for (const item of input) {
      if (item.type !== "message" || !Array.isArray(item.content)) continue
      for (const part of item.content as ReadonlyArray<{ readonly type: string; readonly image_url?: unknown; readonly file_data?: unknown }>) {
        if (part.type === "input_image") {
          allowance += parts.maxTokensPerImage
          if (typeof part.image_url === "string") chars -= part.image_url.length
        } else if (part.type === "input_file") {
          allowance += parts.maxTokensPerFile
          if (typeof part.file_data === "string") chars -= part.file_data.length
        }
      }
    }
  }
  return estimateTokens(Math.max(0, chars)) + allowance
}
