/**
 * Long inputs: at most MAX_INPUT_ITEMS items a request (a 400 naming the limit, before any
 * decoding); a long Responses input is decoded slice by slice with the event loop served between
 * slices (an event-loop lag probe runs while the gateway, in this process, takes the request);
 * context-compression's middle-out drop and message cap grow as n log n, not n².
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { InputItem, ResponsesRequest } from "../../src/domain/responses.js"
import { DECODE_SLICE_ITEMS, MAX_INPUT_ITEMS } from "../../src/pipeline/ingress.js"
import { compress } from "../../src/pipeline/plugins/context-compression.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway } from "../routing/helpers.js"
import { loopLag } from "../support/loop-lag.js"

let mock: MockUpstream
let gw: Gateway

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 2, maxLoggedRequests: 5 })
  gw = await startGateway(
    catalogOf(
      [mockProvider(mock, "up")],
      [
        { ...model("t/small", endpoint("up", 1, 1, { max_output_tokens: 200 })), context_length: 8_000 },
        { ...model("t/wide", endpoint("up", 1, 1, { max_output_tokens: 200 })), context_length: 10_000_000 },
      ],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const tiny = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "message", role: i % 2 === 0 ? "user" : "assistant", content: `m${i}` }))

const post = (json: Record<string, unknown>) => gw.fetch("/v1/responses", { method: "POST", json })

describe("at most MAX_INPUT_ITEMS input items a request", () => {
  test("100,000 tiny messages are a 400 naming the limit, on every format, and nothing reaches the upstream", async () => {
    const from = mock.requests.length
    const items = tiny(100_000)
    const responses = await post({ model: "t/wide", input: items })
    expect(responses.status).toBe(400)
    const body = (await responses.json()) as { error: { message: string } }
    expect(body.error.message).toBe(`Invalid request: input: at most ${MAX_INPUT_ITEMS} items in one request, got 100000`)
    const messages = items.map(({ role, content }) => ({ role, content }))
    const chat = await gw.fetch("/v1/chat/completions", { method: "POST", json: { model: "t/wide", messages } })
    expect(chat.status).toBe(400)
    expect(((await chat.json()) as { error: { message: string } }).error.message).toContain(`messages: at most ${MAX_INPUT_ITEMS} items`)
    const anthropic = await gw.fetch("/v1/messages", { method: "POST", json: { model: "t/wide", max_tokens: 10, messages } })
    expect(anthropic.status).toBe(400)
    expect(JSON.stringify(await anthropic.json())).toContain(`messages: at most ${MAX_INPUT_ITEMS} items`)
    expect(mock.requests.length).toBe(from)
  }, 60_000)

  test("one item over the limit is refused", async () => {
    const res = await post({ model: "t/wide", input: tiny(MAX_INPUT_ITEMS + 1) })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(`at most ${MAX_INPUT_ITEMS} items`)
  }, 60_000)
})

describe("a long input does not hold the event loop", () => {
  test("the most items a request may carry are decoded in slices: answered, sent upstream whole and in order, the loop never held long", async () => {
    const from = mock.requests.length
    const { result, maxLagMs } = await loopLag(async () => {
      const res = await post({ model: "t/wide", input: tiny(MAX_INPUT_ITEMS) })
      return { status: res.status, body: await res.text() }
    })
    expect(result.status).toBe(200)
    const sent = mock.requests.slice(from)
    expect(sent).toHaveLength(1)
    const upstream = (sent[0]!.body as { messages: ReadonlyArray<{ content: unknown }> }).messages
    expect(upstream).toHaveLength(MAX_INPUT_ITEMS)
    expect(upstream[0]!.content).toBe("m0")
    expect(upstream[DECODE_SLICE_ITEMS]!.content).toBe(`m${DECODE_SLICE_ITEMS}`)
    expect(upstream[MAX_INPUT_ITEMS - 1]!.content).toBe(`m${MAX_INPUT_ITEMS - 1}`)
    // Decoded whole, 50,000 items held the loop 0.7-1.3 s on this machine; sliced, ~150 ms; the cap
    // (10,000) keeps it to tens of ms. The bound here is generous (a loaded CI machine): no timing test.
    // remain (the body's JSON.parse and the upstream body's encoding).
    expect(maxLagMs).toBeLessThan(500)
  }, 60_000)

  test("a bad item in a later slice is refused with its index in the whole input", async () => {
    const items: Array<Record<string, unknown>> = tiny(3 * DECODE_SLICE_ITEMS)
    const at = 2 * DECODE_SLICE_ITEMS + 17
    items[at] = { type: "message", role: "user", content: 42 }
    const res = await post({ model: "t/wide", input: items })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toStartWith(`Invalid request: input[${at}]`)
  }, 60_000)

  test("Messages: the most messages a request may carry are decoded in slices too, the system prompt once and first", async () => {
    const from = mock.requests.length
    const messages = tiny(MAX_INPUT_ITEMS).map(({ role, content }) => ({ role, content }))
    const { result, maxLagMs } = await loopLag(async () => {
      const res = await gw.fetch("/v1/messages", { method: "POST", json: { model: "t/wide", max_tokens: 10, system: "SYSTEM PROMPT", messages } })
      return { status: res.status, body: await res.text() }
    })
    expect(result.status).toBe(200)
    const upstream = (mock.requests.slice(from)[0]!.body as { messages: ReadonlyArray<{ role: string; content: unknown }> }).messages
    expect(upstream).toHaveLength(MAX_INPUT_ITEMS + 1)
    expect(upstream[0]).toMatchObject({ role: "system", content: "SYSTEM PROMPT" })
    expect(upstream.filter((m) => m.role === "system")).toHaveLength(1)
    expect(upstream[1]!.content).toBe("m0")
    expect(upstream[MAX_INPUT_ITEMS]!.content).toBe(`m${MAX_INPUT_ITEMS - 1}`)
    expect(maxLagMs).toBeLessThan(500)
  }, 60_000)

  test("Messages: a bad message in a later slice is refused with its index in the whole list", async () => {
    const messages: Array<Record<string, unknown>> = tiny(3 * DECODE_SLICE_ITEMS).map(({ role, content }) => ({ role, content }))
    const at = 2 * DECODE_SLICE_ITEMS + 5
    messages[at] = { role: "robot", content: "x" }
    const res = await gw.fetch("/v1/messages", { method: "POST", json: { model: "t/wide", max_tokens: 10, messages } })
    expect(res.status).toBe(400)
    expect(JSON.stringify(await res.json())).toContain(`Invalid request: messages[${at}]`)
  }, 60_000)

  test("the most items a request may carry, compressed to fit an 8,000-token context: answered, the middle dropped", async () => {
    // The tokenizer loads with the first request that needs it (seconds, once a process): not measured.
    expect((await post({ model: "t/small", input: `warm ${"word ".repeat(9_000)}` })).status).toBe(200)
    const from = mock.requests.length
    const { result, maxLagMs } = await loopLag(async () => {
      const res = await post({ model: "t/small", input: tiny(MAX_INPUT_ITEMS) })
      return { status: res.status, body: await res.text() }
    })
    expect(result.status).toBe(200)
    const upstream = (mock.requests.slice(from)[0]!.body as { messages: ReadonlyArray<{ content: unknown }> }).messages
    expect(upstream.length).toBeLessThan(MAX_INPUT_ITEMS)
    expect(upstream[0]!.content).toBe("m0")
    expect(upstream.at(-1)!.content).toBe(`m${MAX_INPUT_ITEMS - 1}`)
    // Quadratic, the drop alone held the loop for seconds (21 s at 100,000 items).
    expect(maxLagMs).toBeLessThan(1_000)
  }, 60_000)
})

describe("middle-out grows as n log n", () => {
  /** `n` droppable items (tool calls with their outputs among them) and a budget that keeps few. */
  const measured = (n: number) => {
    const items: Array<InputItem> = []
    for (let i = 0; i < n; i++) {
      items.push(
        (i % 10 === 3
          ? { type: "function_call", call_id: `c${i}`, name: "f", arguments: "{}" }
          : i % 10 === 4
            ? { type: "function_call_output", call_id: `c${i - 1}`, output: "ok" }
            : { type: "message", role: i % 2 === 0 ? "user" : "assistant", content: `m${i}` }) as unknown as InputItem,
      )
    }
    const costs = items.map(() => 5)
    return { items, costs, fixed: 10, total: 10 + 5 * n, raw: 10 + 5 * n }
  }
  const request = (items: ReadonlyArray<InputItem>) => ({ input: items }) as unknown as ResponsesRequest
  const count = (text: string) => text.length

  /** The fastest of five runs of `work` (ms): the least disturbed by the compiler tiers, the collector and the machine's other work. */
  const fastest = (work: () => void) => {
    let best = Number.POSITIVE_INFINITY
    for (let run = 0; run < 5; run++) {
      const start = performance.now()
      work()
      best = Math.min(best, performance.now() - start)
    }
    return best
  }

  test("40,000 items compress in the time of a few linear passes over them, not 40,000 (the drop and the message cap)", () => {
    const m = measured(40_000)
    // The yardstick: one linear pass that copies every item, on the same items in the same process.
    const pass = fastest(() => {
      m.items.map((item) => ({ ...item }))
    })
    for (const cap of [undefined, 30]) {
      let kept = 0
      const took = fastest(() => {
        kept = compress(request(m.items), m, 100, cap, count).compressedCount
      })
      expect(kept).toBeLessThan(100)
      // Quadratic, one run took ~20 s here (some 10,000 passes); n log n, a few passes.
      expect([cap, took / pass < 200]).toEqual([cap, true])
    }
  }, 120_000)

  test("what is kept does not change: the first user message, the newest items, a call with its output", () => {
    const m = measured(1_000)
    const done = compress(request(m.items), m, 200, undefined, count)
    const kept = done.request.input as ReadonlyArray<{ type: string; content?: string; call_id?: string }>
    expect(kept[0]!.content).toBe("m0")
    expect(kept.at(-1)!.content).toBe("m999")
    const calls = kept.filter((k) => k.type === "function_call").map((k) => k.call_id)
    const outputs = kept.filter((k) => k.type === "function_call_output").map((k) => k.call_id)
    expect(calls).toEqual(outputs)
    expect(done.fits).toBe(true)
  })
})
