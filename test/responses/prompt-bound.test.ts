/**
 * The reservation's input side (docs/operations.md): a true upper bound of the prompt's tokens, whatever
 * the tokenizer. Text counts its UTF-8 bytes (a BPE token is at least one byte); an image or file
 * part counts a fixed allowance (`money.max_tokens_per_image`, `money.max_tokens_per_file`) in
 * place of its bytes; the endpoint's context caps it all.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { DEFAULT_MAX_TOKENS_PER_FILE, DEFAULT_MAX_TOKENS_PER_IMAGE, parseConfigFile, testSettings } from "../../src/config/Config.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { capUsage, estimateTokens, isValidUsage } from "../../src/domain/pricing.js"
import { PROMPT_FRAMING_TOKENS, promptTokenBound, TOOLS_PROMPT_TOKENS } from "../../src/pipeline/bounds.js"

const PARTS = { maxTokensPerImage: 2000, maxTokensPerFile: 30_000 }

const boundOf = (json: Record<string, unknown>, extra = "") => {
  const text = JSON.stringify(json)
  return { text, bound: promptTokenBound(text, Either.getOrThrow(decodeResponsesRequest(json)), extra, PARTS) }
}

describe("promptTokenBound", () => {
  test("CJK text and emoji count their UTF-8 bytes, above characters ÷ 4", () => {
    const { text, bound } = boundOf({ model: "a/b", input: "漢字😀".repeat(100) })
    expect(bound).toBe(Buffer.byteLength(text) + PROMPT_FRAMING_TOKENS)
    expect(bound).toBeGreaterThan(estimateTokens(text.length) * 4)
  })

  test("an image part counts its allowance instead of its base64 bytes; a file part its own", () => {
    const image = `data:image/png;base64,${"A".repeat(200_000)}`
    const file = "B".repeat(100_000)
    const content = [
      { type: "input_text", text: "what is this?" },
      { type: "input_image", image_url: image },
      { type: "input_file", file_data: file, filename: "x.pdf" },
    ]
    const { text, bound } = boundOf({ model: "a/b", input: [{ role: "user", content }] })
    const textBytes = Buffer.byteLength(text) - image.length - file.length
    expect(bound).toBe(textBytes + PROMPT_FRAMING_TOKENS + PARTS.maxTokensPerImage + PARTS.maxTokensPerFile)
  })

  test("tools add the allowance for an upstream's tool prompt; a preset's instructions count their bytes", () => {
    const tools = [{ type: "function", name: "f", parameters: { type: "object" } }]
    const { text, bound } = boundOf({ model: "a/b", input: "hi", tools }, "système")
    expect(bound).toBe(Buffer.byteLength(text) + Buffer.byteLength("système") + PROMPT_FRAMING_TOKENS + TOOLS_PROMPT_TOKENS)
  })
})

describe("usage from upstream", () => {
  const usage = { inputTokens: 10, cachedTokens: 2, cacheWriteTokens: 0, outputTokens: 5, reasoningTokens: 1 }
  test("counts that are negative, fractional, non-finite or not numbers make the usage untrustworthy", () => {
    expect(isValidUsage(usage)).toBe(true)
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "3" as unknown as number, null as unknown as number]) {
      expect(isValidUsage({ ...usage, outputTokens: bad })).toBe(false)
      expect(isValidUsage({ ...usage, cachedTokens: bad })).toBe(false)
    }
  })

  test("capping keeps usage within the bounds, and the same object when it already is", () => {
    expect(capUsage(usage, 10, 5)).toBe(usage)
    expect(capUsage({ ...usage, inputTokens: 1e12, cachedTokens: 1e12, outputTokens: 1e12, reasoningTokens: 1e12 }, 100, 16)).toEqual({
      inputTokens: 100,
      cachedTokens: 100,
      cacheWriteTokens: 0,
      outputTokens: 16,
      reasoningTokens: 16,
    })
  })
})

describe("config: money", () => {
  test("the allowances default to 2,000 tokens an image and 32,000 a file", () => {
    expect(testSettings().maxTokensPerImage).toBe(DEFAULT_MAX_TOKENS_PER_IMAGE)
    expect(DEFAULT_MAX_TOKENS_PER_IMAGE).toBe(2000)
    expect(DEFAULT_MAX_TOKENS_PER_FILE).toBe(32_000)
  })

  test("an allowance that is not a positive integer is refused, naming the path", () => {
    const bad = parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], money: { max_tokens_per_image: 0 } }))
    expect(Either.isLeft(bad)).toBe(true)
    if (Either.isLeft(bad)) expect(bad.left.message).toContain("max_tokens_per_image")
    const good = parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], money: { max_tokens_per_file: 5000 } }))
    expect(Either.isRight(good) && good.right.money?.max_tokens_per_file).toBe(5000)
  })
})
