/**
 * The OTLP/HTTP JSON body broadcast writes itself (payload.ts `otlpOf`) against the one
 * @opentelemetry/otlp-transformer's JsonTraceSerializer writes from the SDK spans of the same
 * generations: varied generations (content or none, attempts, switches, privacy mode, errors,
 * given and hashed trace ids, metadata, unicode, characters JSON must escape), compared decoded,
 * span by span and attribute by attribute, and as bytes.
 */
import { describe, expect, test } from "bun:test"
import { type DeliveryContent, type DeliveryPayload, officialOtlpOf, otlpOf, type TraceItem, traceItemOf, type ViewOptions } from "../../src/broadcast/payload.js"
import { deliveryPayload } from "../support/generations.js"

const base = deliveryPayload()

const ALL: ViewOptions = { privacyMode: false, cost: true, identity: true, requestContext: true }

interface Case {
  readonly name: string
  readonly payload: Partial<DeliveryPayload>
  readonly content?: DeliveryContent
  readonly options?: Partial<ViewOptions>
  readonly keyName?: string | null
}

const cases: ReadonlyArray<Case> = [
  { name: "the least: no content, no attempts, no session", payload: {} },
  {
    name: "content, session, user, a streamed answer with reasoning",
    payload: { sessionId: "s-1", user: "end-user-7", streamed: true, reasoningTokens: 8 },
    content: { input: [{ role: "system", content: "Be brief." }, { role: "user", content: "hello" }], output: "hi", reasoning: "thinking" },
  },
  {
    name: "failover: a failed attempt, then the answer; parameters, strategy, plugins, prices",
    payload: {
      attempts: [
        { model: "a/one", provider: "p1", status: 503 },
        { model: "demo/free", provider: "demo", status: 200 },
      ],
      params: { temperature: 0.7, max_output_tokens: 256, stream: false, tool_choice: "auto" },
      strategy: "fallback",
      plugins: ["web", "file-parser"],
      pricing: { prompt: 1.25, completion: 10, cached_prompt: 0.125, cache_write: 1.5, request: 0.01 },
      cachedTokens: 4,
      cacheWriteTokens: 2,
    },
    content: { input: [{ role: "user", content: "q" }], output: "a", reasoning: null },
  },
  {
    name: "an error, its text kept outside privacy mode",
    payload: { status: "failed", finishReason: null, error: { status: 502, message: 'upstream said "no"\n' }, outputTokens: 0 },
    content: { input: [{ role: "user", content: "x" }], output: null, reasoning: null },
  },
  {
    name: "privacy mode: no content, the error as its status",
    payload: { error: { status: 429, message: "the prompt was: secret" }, sessionId: "s-2" },
    content: { input: [{ role: "user", content: "secret" }], output: "secret", reasoning: null },
    options: { privacyMode: true },
  },
  {
    name: "switches off: no cost, identity or request context",
    payload: { params: { temperature: 1 }, pricing: { prompt: 2, completion: 3 } },
    options: { cost: false, identity: false, requestContext: false },
    keyName: null,
  },
  {
    name: "the request's trace: valid ids as given, names, metadata of several types",
    payload: {
      trace: {
        trace_id: "0af7651916cd43dd8448eb211c80319c",
        parent_span_id: "b7ad6b7169203331",
        trace_name: "checkout",
        span_name: "answer",
        generation_name: "draft",
        customer: "acme",
        tier: 3,
        flags: { beta: true },
      },
    },
  },
  {
    name: "ids that are not hex are hashed and kept as originals",
    payload: { trace: { trace_id: "my-trace", parent_span_id: "my-span" } },
  },
  {
    name: "unicode and characters JSON escapes: quotes, backslashes, controls, a lone surrogate, U+2028",
    payload: { user: 'ü "quoted" \\ back', sessionId: "セッション", trace: { trace_name: "名前 ☃", note: "tab\there\u0001" } },
    content: {
      input: [{ role: "user", content: "héllo ☃ 🎉 \ud800 line\u2028sep \"q\" \\ \n" }],
      output: "réponse 🎉 </script>",
      reasoning: null,
    },
    keyName: 'key "name" ✓',
  },
  {
    name: "doubles that print with exponents and integers that are not small",
    payload: { totalCost: 1.5e-9, inputTokens: 2 ** 40, outputTokens: 123456789, pricing: { prompt: 0.0000001, completion: 1e21 } },
  },
]

const itemOf = (c: Case, i: number): TraceItem =>
  traceItemOf({ ...base, id: `gen-1700000000-case${i}`, ...c.payload }, c.content, { ...ALL, ...c.options }, c.keyName === undefined ? "my key" : c.keyName)

const decode = (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes)) as {
  resourceSpans: Array<{ resource: unknown; scopeSpans: Array<{ scope: unknown; schemaUrl?: string; spans: Array<Record<string, unknown>> }> }>
}

describe("the OTLP JSON encoder", () => {
  for (const [i, c] of cases.entries()) {
    test(c.name, () => {
      const item = itemOf(c, i)
      const mine = decode(otlpOf([item]))
      const theirs = decode(officialOtlpOf([item]))
      expect(mine.resourceSpans.length).toBe(theirs.resourceSpans.length)
      expect(mine.resourceSpans[0]?.resource).toEqual(theirs.resourceSpans[0]?.resource)
      const [ms, ts] = [mine.resourceSpans[0]?.scopeSpans[0], theirs.resourceSpans[0]?.scopeSpans[0]]
      expect(ms?.scope).toEqual(ts?.scope)
      expect(ms?.schemaUrl).toBe(ts?.schemaUrl as string)
      expect(ms?.spans.length).toBe(ts?.spans.length as number)
      for (const [s, theirSpan] of (ts?.spans ?? []).entries()) {
        const mySpan = ms?.spans[s] as Record<string, unknown>
        expect(Object.keys(mySpan)).toEqual(Object.keys(theirSpan))
        for (const field of Object.keys(theirSpan)) expect([field, mySpan[field]]).toEqual([field, theirSpan[field]])
      }
      expect(new TextDecoder().decode(otlpOf([item]))).toBe(new TextDecoder().decode(officialOtlpOf([item])))
    })
  }

  test("a batch of every case, and an empty one, byte for byte", () => {
    const items = cases.map(itemOf)
    expect(new TextDecoder().decode(otlpOf(items))).toBe(new TextDecoder().decode(officialOtlpOf(items)))
    expect(new TextDecoder().decode(otlpOf([]))).toBe(new TextDecoder().decode(officialOtlpOf([])))
  })
})
