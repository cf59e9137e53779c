/**
 * How many output tokens an endpoint may produce for a request. One function decides both what
 * is sent upstream and what is reserved, so a request can never spend past its reservation.
 */
import type { ResponsesRequest } from "../domain/responses.js"
import { providerFor } from "../providers/index.js"
import type { PartAllowance } from "../domain/pricing.js"
import type { Endpoint } from "../services/Catalog.js"
import { reasoningConfig } from "./normalize.js"

/** Output tokens asked for when neither the request nor the endpoint bounds them. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096

export interface OutputBound {
  /** The answer's limit, sent upstream as the request's max output tokens. */
  readonly answer: number
  /** The answer plus what the upstream may spend thinking on top of it (Anthropic's budget). */
  readonly total: number
}

export const outputBound = (request: ResponsesRequest, endpoint: Endpoint): OutputBound => {
  const answer = request.max_output_tokens ?? endpoint.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS
  // A wire format's own rule (Anthropic's thinking budget counts in max_tokens): none for most.
  const thinkingTokens = providerFor(endpoint.provider.kind).thinkingTokens
  if (thinkingTokens === undefined) return { answer, total: answer }
  const thinking = thinkingTokens(request.reasoning == null ? undefined : reasoningConfig(request.reasoning))
  return { answer, total: answer + thinking }
}

/**
 * The most input tokens an endpoint can count for a request: its prompt bound (`promptTokenBound`),
 * never more than the endpoint's context (a longer prompt is refused upstream).
 */
export const inputBound = (promptBound: number, endpoint: Endpoint): number => Math.min(promptBound, endpoint.contextLength)

/** The upstream's own framing of a prompt (chat template, a short system prompt of its own): input the body does not carry. */
export const PROMPT_FRAMING_TOKENS = 256
/** An upstream's tool-use system prompt (Anthropic's is ~350 tokens) is input the body does not carry either. */
export const TOOLS_PROMPT_TOKENS = 1024

/**
 * A true upper bound of a request's input tokens, whatever the tokenizer: the UTF-8 bytes of what
 * is sent as text (a BPE token is at least one byte), with each image or file part counted at its
 * fixed allowance instead of its (base64) bytes. `extraText` is input the body did not carry (a
 * preset's instructions).
 */
export const promptTokenBound = (bodyText: string, request: ResponsesRequest, extraText: string, parts: PartAllowance): number => {
  let bytes = Buffer.byteLength(bodyText, "utf8") + (extraText === "" ? 0 : Buffer.byteLength(extraText, "utf8"))
  let allowance = PROMPT_FRAMING_TOKENS + (request.tools !== undefined && request.tools.length > 0 ? TOOLS_PROMPT_TOKENS : 0)
  const input = request.input
  if (typeof input !== "string" && input !== undefined) {
    for (const item of input) {
      const content = item.type === "message" ? item.content : item.type === "function_call_output" ? item.output : undefined
      if (!Array.isArray(content)) continue
      for (const part of content as ReadonlyArray<{ readonly type: string; readonly image_url?: unknown; readonly file_data?: unknown }>) {
        if (part.type === "input_image") {
          allowance += parts.maxTokensPerImage
          // The image's URL or data is not text the model reads: its allowance stands for it.
          if (typeof part.image_url === "string") bytes -= part.image_url.length
        } else if (part.type === "input_file") {
          allowance += parts.maxTokensPerFile
          if (typeof part.file_data === "string") bytes -= part.file_data.length
        }
      }
    }
  }
  return Math.max(1, bytes) + allowance
}
