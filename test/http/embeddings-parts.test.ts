/**
 * A batch split at the upstream's per-call limit: parts joined in order, and a part that fails
 * stops the rest, the parts that answered coming with the failure (the upstream billed them).
 * Also the config's rule that an embedding or rerank model sits on a kind that serves it.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parseConfigFile } from "../../src/config/Config.js"
import { embedInParts } from "../../src/http/embeddings/routes.js"
import { PartlyAnswered } from "../../src/http/embeddings/calls.js"
import { PlainAbort } from "../../src/providers/abort.js"
import type { Embedder } from "../../src/providers/embeddings/types.js"
import { ProviderError } from "../../src/providers/types.js"
import type { Endpoint } from "../../src/services/Catalog.js"

const endpoint = { upstreamModel: "m", provider: { id: "p", kind: "fake" }, apiKey: undefined } as unknown as Endpoint

/**
 * Two inputs a call; each part answers with one token per input, or fails, after `delayOf(part's
 * first input)`: that many ms, or when that promise settles. `answered` hears each part that answered.
 */
const embedderOf = (
  failing: string | undefined,
  delayOf: (first: string) => number | Promise<unknown> = () => 0,
  seen: Array<string> = [],
  answered: (first: string) => void = () => {},
): Embedder => ({
  maxInputs: () => 2,
  embed: (call, _config, options) =>
    new Promise((resolve, reject) => {
      const first = call.inputs[0] as string
      seen.push(first)
      const settle = () => {
        if (call.inputs.includes(failing as string)) return reject(new ProviderError("server", `failed on ${failing}`, 500))
        resolve({ vectors: call.inputs.map((input) => [Number(String(input).slice(1))]), inputTokens: call.inputs.length })
        answered(first)
      }
      const delay = delayOf(first)
      const timer = typeof delay === "number" ? setTimeout(settle, delay) : void delay.then(settle)
      options.signal.addEventListener("abort", () => {
        clearTimeout(timer)
        reject(new ProviderError("connection", "aborted"))
      })
    }),
})

const inputs = ["i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8", "i9"]

describe("a batch over the per-call limit", () => {
  test("parts answering out of order are joined in the input's order, tokens summed", async () => {
    const answered = await embedInParts(embedderOf(undefined, (first) => (first === "i0" ? 20 : 0)), endpoint, inputs, {}, new PlainAbort(), undefined)
    expect(answered.value).toEqual(inputs.map((_, i) => [i]))
    expect(answered.inputTokens).toBe(10)
  })

  test("at most four parts are in flight at once", async () => {
    const seen: Array<string> = []
    // Parts of 300 ms, looked at after 1 ms: a loaded machine's pause cannot let the first end first (10 ms parts did).
    const promise = embedInParts(embedderOf(undefined, () => 300, seen), endpoint, inputs, {}, new PlainAbort(), undefined)
    await Bun.sleep(1)
    expect(seen).toEqual(["i0", "i2", "i4", "i6"])
    await promise
    expect(seen).toHaveLength(5)
  })

  test("a failing part stops the others; the parts that answered come with the failure", async () => {
    // i0-i1 and i2-i3 answer at once; i8-i9 starts when they free their workers and answers; only
    // then does i4-i5 fail (ordered by promises, not timers: a loaded machine's pause cannot reorder
    // them); i6-i7 would answer only later and is aborted.
    let eightAnswered = () => {}
    const eight = new Promise<void>((resolve) => {
      eightAnswered = resolve
    })
    const never = new Promise<void>(() => {})
    const embedder = embedderOf(
      "i4",
      (first) => (first === "i4" ? eight : first === "i6" ? never : 0),
      [],
      (first) => first === "i8" && eightAnswered(),
    )
    let caught: unknown
    try {
      await embedInParts(embedder, endpoint, inputs, {}, new PlainAbort(), undefined)
    } catch (e) {
      caught = e
    }
    expect(caught).toBeInstanceOf(PartlyAnswered)
    // i0-i1, i2-i3 and i8-i9 answered: 6 tokens.
    expect((caught as PartlyAnswered).inputTokens).toBe(6)
    expect((caught as PartlyAnswered).failure.kind).toBe("server")
  })

  test("a single part that fails is the upstream's error as it is", async () => {
    let caught: unknown
    try {
      await embedInParts(embedderOf("i0"), endpoint, ["i0"], {}, new PlainAbort(), undefined)
    } catch (e) {
      caught = e
    }
    expect(caught).toBeInstanceOf(ProviderError)
  })
})

describe("config: an embedding or rerank model sits on a kind that serves it", () => {
  const parse = (kind: string, modelKind: string) =>
    parseConfigFile(
      "t.json",
      JSON.stringify({
        providers: [{ id: "p", kind, base_url: "http://x" }],
        models: [{ id: "a/b", kind: modelKind, context_length: 10, endpoints: [{ provider: "p", upstream_model: "m", pricing: { prompt: 1, completion: 0 } }] }],
      }),
    )
  test("an embedding model on an anthropic provider is refused, naming the endpoint", () => {
    const parsed = parse("anthropic", "embedding")
    expect(Either.isLeft(parsed) && parsed.left.message).toContain('models[0].endpoints[0].provider: provider "p" is of kind "anthropic", which does not serve embedding models')
  })
  test("a rerank model on an openai-chat provider is accepted", () => {
    expect(Either.isRight(parse("openai-chat", "rerank"))).toBe(true)
  })
  test("an unknown model kind is refused", () => {
    const parsed = parse("openai-chat", "vision")
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("models[0].kind")
  })
})
