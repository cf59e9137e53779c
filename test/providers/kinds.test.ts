/** Provider kinds are listed once, and a provider's own rule lives in its wire format. */
import { describe, expect, test } from "bun:test"
import { Either, Schema } from "effect"
import { ProviderKind } from "../../src/config/file.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { outputBound } from "../../src/pipeline/bounds.js"
import { providerFor } from "../../src/providers/index.js"
import { providerKinds } from "../../src/providers/kinds.js"
import type { Endpoint } from "../../src/services/Catalog.js"

const endpointOf = (kind: (typeof providerKinds)[number]) =>
  ({ provider: { id: kind, kind }, maxOutputTokens: 1000 }) as unknown as Endpoint

describe("provider kinds", () => {
  test("the config accepts exactly the kinds that have a provider", () => {
    for (const kind of providerKinds) expect(Either.isRight(Schema.decodeUnknownEither(ProviderKind)(kind))).toBe(true)
    // Each kind is its own wire format: no two kinds are answered by the same provider.
    expect(new Set(providerKinds.map(providerFor)).size).toBe(providerKinds.length)
    for (const kind of ["gemini", "vertex", "azure-openai"]) expect(Either.isRight(Schema.decodeUnknownEither(ProviderKind)(kind))).toBe(true)
    expect(Either.isLeft(Schema.decodeUnknownEither(ProviderKind)("palm"))).toBe(true)
  })
})

describe("output bound: a wire format's thinking rule", () => {
  const thinking = Either.getOrThrow(decodeResponsesRequest({ input: "x", max_output_tokens: 16, reasoning: { max_tokens: 20_000 } }))
  const plain = Either.getOrThrow(decodeResponsesRequest({ input: "x", max_output_tokens: 16 }))

  const request = (reasoning: unknown) => Either.getOrThrow(decodeResponsesRequest({ input: "x", max_output_tokens: 16, reasoning }))

  test("anthropic and bedrock: the thinking budget is on top of the answer's maximum", () => {
    for (const kind of ["anthropic", "bedrock"] as const) {
      expect(outputBound(thinking, endpointOf(kind))).toEqual({ answer: 16, total: 16 + 20_000 })
      expect(outputBound(plain, endpointOf(kind))).toEqual({ answer: 16, total: 16 })
      // An effort asks for its budget; a budget under Anthropic's minimum is raised to it; "none" thinks not at all.
      expect(outputBound(request({ effort: "high" }), endpointOf(kind))).toEqual({ answer: 16, total: 16 + 16_384 })
      expect(outputBound(request({ max_tokens: 100 }), endpointOf(kind))).toEqual({ answer: 16, total: 16 + 1024 })
      expect(outputBound(request({ effort: "none" }), endpointOf(kind))).toEqual({ answer: 16, total: 16 })
    }
  })

  test("gemini and vertex: the thinking budget is on top of the answer's maximum (Gemini counts thoughts in maxOutputTokens)", () => {
    for (const kind of ["gemini", "vertex"] as const) {
      expect(outputBound(thinking, endpointOf(kind))).toEqual({ answer: 16, total: 16 + 20_000 })
      expect(outputBound(plain, endpointOf(kind))).toEqual({ answer: 16, total: 16 })
    }
  })

  test("the other formats count reasoning in the answer's maximum: nothing on top", () => {
    for (const kind of ["openai-chat", "openai-responses", "fake", "azure-openai"] as const) {
      expect(providerFor(kind).thinkingTokens).toBeUndefined()
      expect(outputBound(thinking, endpointOf(kind))).toEqual({ answer: 16, total: 16 })
    }
  })
})
