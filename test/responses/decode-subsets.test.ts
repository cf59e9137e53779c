/**
 * The request body is decoded by the Struct cut to the fields it has (a cache of cut decoders,
 * src/domain/responses.ts). It must give what the whole Struct gives, value or message, for any
 * body: checked here over the contract's fields with good and bad values, in many combinations.
 */
import { expect, test } from "bun:test"
import { Either } from "effect"
import { decodersForTest, decodeResponsesRequest, ResponsesRequest } from "../../src/domain/responses.js"

const { whole, cut, subsets, cuttable } = decodersForTest

/** The same result: equal values, or the same 400 message. */
const expectSame = (body: unknown) => {
  const a = whole(body)
  const b = cut(body)
  if (Either.isRight(a)) {
    expect(Either.isRight(b)).toBe(true)
    if (Either.isRight(b)) {
      expect(b.right).toEqual(a.right)
      // Same fields in the same order: JSON text made from the request (stored input, echoes) does not change.
      expect(JSON.stringify(b.right)).toBe(JSON.stringify(a.right))
    }
  } else {
    expect(Either.isLeft(b)).toBe(true)
    if (Either.isLeft(b)) expect(b.left.message).toBe(a.left.message)
  }
}

/** A good and a bad value for fields across the kinds the Struct has (optional, nullable, defaulted, nested). */
const samples: Record<string, readonly [unknown, unknown]> = {
  model: ["openai/gpt-x", 5],
  models: [["a/b", "c/d"], "a/b"],
  input: [[{ role: "user", content: [{ type: "input_text", text: "hi" }] }], [{ role: "user", content: 5 }]],
  instructions: [null, 7],
  stream: [true, "yes"],
  store: [false, "no"],
  temperature: [0.7, 3],
  top_p: [1, -1],
  top_k: [40, 1.5],
  top_logprobs: [null, 21],
  frequency_penalty: [0, -3],
  max_output_tokens: [100, 0],
  parallel_tool_calls: [false, 1],
  prompt_cache_key: ["pk", {}],
  service_tier: [null, "gold"],
  include: [["reasoning.encrypted_content"], ["everything"]],
  metadata: [{ a: "b" }, { a: 1 }],
  session_id: ["s-1", "x".repeat(257)],
  user: ["u", 3],
  tools: [[{ type: "function", name: "f", parameters: { type: "object" } }], [{ name: "f" }]],
  tool_choice: ["auto", "sometimes"],
  text: [{ format: { type: "json_object" } }, { format: { type: "xml" } }],
  reasoning: [{ effort: "high" }, { effort: "extreme" }],
  provider: [{ sort: "price", allow_fallbacks: false }, { sort: "cheapest" }],
  plugins: [[{ id: "moderation" }], [{ id: "nope" }]],
  preset: ["my-preset", ""],
  previous_response_id: [null, 9],
}
const names = Object.keys(samples)

/** A deterministic generator, so a failure can be reproduced. */
const rng = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}

test("the cut is in use: no field of the Struct is required (else every body is decoded whole)", () => {
  expect(cuttable).toBe(true)
})

test("every sampled field exists in the Struct (the samples cover real fields)", () => {
  for (const name of names) expect(Object.keys(ResponsesRequest.fields)).toContain(name)
})

test("bodies that are not objects, empty, with unknown keys, or __proto__ give the same result", () => {
  for (const body of [null, [], "text", 5, true, {}, { unknown: 1 }, { model: "m", extra: [1, 2] }, JSON.parse('{"__proto__": {"model": 1}, "model": "m"}')]) {
    expectSame(body)
  }
})

test("each field alone, good and bad, gives the same value or message", () => {
  for (const name of names) {
    const [good, bad] = samples[name] as readonly [unknown, unknown]
    expectSame({ [name]: good })
    expectSame({ [name]: bad })
    expectSame({ model: "m", input: "hi", [name]: bad })
  }
})

test("2,000 random combinations, with good and bad values in any key order, give the same results", () => {
  const random = rng(42)
  for (let n = 0; n < 2000; n++) {
    const body: Record<string, unknown> = {}
    const count = 1 + Math.floor(random() * 8)
    for (let i = 0; i < count; i++) {
      const name = names[Math.floor(random() * names.length)] as string
      const [good, bad] = samples[name] as readonly [unknown, unknown]
      body[name] = random() < 0.8 ? good : bad
    }
    if (random() < 0.1) body["not_a_field"] = random()
    expectSame(body)
  }
  // More distinct sets of fields than the cache keeps: it stops growing, and results stay the same.
  expect(subsets()).toBeLessThanOrEqual(256)
})

test("the stateless rules still apply after the cut decode", () => {
  expect(Either.isLeft(decodeResponsesRequest({ model: "m", store: true }))).toBe(true)
  expect(Either.isLeft(decodeResponsesRequest({ model: "m", previous_response_id: "resp_1" }))).toBe(true)
  expect(decodeResponsesRequest({ model: "m", input: "hi" })).toEqual(Either.right({ model: "m", input: "hi", stream: false, store: false }))
})

test("the plain-code path for model, a string input, stream and store: the Struct's value, in its key order", () => {
  const { simple } = decodersForTest
  const values = {
    model: [undefined, "openai/gpt-x", "", 5, null, ["a"]],
    input: [undefined, "hello", "", 7, null, [], [{ role: "user", content: "hi" }]],
    stream: [undefined, true, false, "yes", null, 0],
    store: [undefined, false, true, "no", null],
  } as const
  const keys = Object.keys(values) as Array<keyof typeof values>
  let taken = 0
  for (const model of values.model)
    for (const input of values.input)
      for (const stream of values.stream)
        for (const store of values.store) {
          const picked: Record<string, unknown> = { model, input, stream, store }
          // Every key order of the present fields: rotate them.
          const present = keys.filter((k) => picked[k] !== undefined)
          for (let r = 0; r < Math.max(1, present.length); r++) {
            const order = [...present.slice(r), ...present.slice(0, r)]
            const body = JSON.parse(JSON.stringify(Object.fromEntries(order.map((k) => [k, picked[k]]))))
            expectSame(body)
            const fast = simple(body)
            if (fast !== undefined) {
              taken++
              const whole = decodersForTest.whole(body)
              expect(Either.isRight(whole) && JSON.stringify(whole.right)).toBe(JSON.stringify(fast))
            }
          }
        }
  // The path is taken for the plain bodies (strings and booleans only), not for the others.
  expect(taken).toBeGreaterThan(100)
  expect(simple(JSON.parse('{"model":"m","input":"x","user":"u"}'))).toBeUndefined()
  expect(simple(JSON.parse('{"model":"m","input":[]}'))).toBeUndefined()
  expect(simple(JSON.parse('{"model":"m","__proto__":{"x":1}}'))).toBeUndefined()
  expect(simple(Object.create({ model: "inherited" }))).toBeUndefined()
  expect(simple({ model: undefined })).toBeUndefined()
  expect(simple(JSON.parse('{"input":"x","model":"m"}'))).toEqual({ model: "m", input: "x", stream: false, store: false })
  expect(JSON.stringify(simple(JSON.parse('{"stream":true,"input":"x","model":"m"}')))).toBe('{"model":"m","input":"x","stream":true,"store":false}')
})
