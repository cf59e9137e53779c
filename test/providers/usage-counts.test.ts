/**
 * Every adapter's usage reader: an input or output count the upstream left out or sent as null is
 * no count, so the usage is refused (`isValidUsage`) and estimated, never read as 0 (a free
 * answer). Optional details (cache reads and writes, reasoning) left out are 0. Gemini's proto3
 * JSON leaves out zero counts: an answer of no tokens has no candidatesTokenCount.
 */
import { describe, expect, test } from "bun:test"
import { isValidUsage } from "../../src/domain/pricing.js"
import { anthropicUsage } from "../../src/providers/anthropic/wire.js"
import { ConverseStreamTranslator } from "../../src/providers/bedrock/stream.js"
import { bedrockUsage } from "../../src/providers/bedrock/wire.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import { geminiUsage } from "../../src/providers/gemini/wire.js"
import { chatUsage } from "../../src/providers/openai-chat/wire.js"
import { responsesUsage } from "../../src/providers/openai-responses/wire.js"

const nulls = <T>(value: unknown) => value as T

describe("usage counts left out or null are no counts", () => {
  test("Chat Completions", () => {
    expect(isValidUsage(chatUsage({ prompt_tokens: 5, completion_tokens: 2 }))).toBe(true)
    expect(isValidUsage(chatUsage({ completion_tokens: 2 }))).toBe(false)
    expect(isValidUsage(chatUsage(nulls({ prompt_tokens: 5, completion_tokens: null })))).toBe(false)
  })
  test("Responses", () => {
    expect(isValidUsage(responsesUsage({ input_tokens: 5, output_tokens: 2 }))).toBe(true)
    expect(isValidUsage(responsesUsage({ input_tokens: 5 }))).toBe(false)
    expect(isValidUsage(responsesUsage(nulls({ input_tokens: null, output_tokens: 2 })))).toBe(false)
  })
  test("Anthropic (a stream's merged message_start and message_delta usage, or a message's)", () => {
    expect(isValidUsage(anthropicUsage({ input_tokens: 5, output_tokens: 2 }))).toBe(true)
    expect(anthropicUsage({ input_tokens: 5, output_tokens: 2, cache_read_input_tokens: 3 }).inputTokens).toBe(8)
    expect(isValidUsage(anthropicUsage({}))).toBe(false)
    expect(isValidUsage(anthropicUsage({ output_tokens: 2 }))).toBe(false)
  })
  test("Bedrock", () => {
    expect(isValidUsage(bedrockUsage({ inputTokens: 5, outputTokens: 2 }))).toBe(true)
    expect(isValidUsage(bedrockUsage({ inputTokens: 5 }))).toBe(false)
  })
  test("Bedrock's stream: a metadata frame whose usage is null finishes the answer without usage (estimated), not a failure; null deltas are nothing", () => {
    const translator = new ConverseStreamTranslator(false)
    const out: Array<ProviderEvent> = []
    translator.push("contentBlockDelta", nulls({ delta: null }), out)
    translator.push("contentBlockDelta", nulls({ delta: { toolUse: null } }), out)
    translator.push("messageStop", { stopReason: "end_turn" }, out)
    translator.push("metadata", nulls({ usage: null }), out)
    expect(out).toEqual([{ type: "finish", reason: "stop", native: "end_turn" }])
    expect(translator.done).toBe(true)
  })
  test("Gemini: a prompt count is required; an output count left out is 0 (proto3 leaves out zeros)", () => {
    expect(geminiUsage({ promptTokenCount: 5 })).toMatchObject({ inputTokens: 5, outputTokens: 0 })
    expect(isValidUsage(geminiUsage({ promptTokenCount: 5 }))).toBe(true)
    expect(isValidUsage(geminiUsage({ candidatesTokenCount: 2 }))).toBe(false)
    expect(isValidUsage(geminiUsage(nulls({ promptTokenCount: null, candidatesTokenCount: 2 })))).toBe(false)
  })
})
