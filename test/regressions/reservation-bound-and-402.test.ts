/**
 * Regression: the reservation's input side was characters ÷ 4, which CJK text,
 * emoji and files exceed, so the operator paid what the key was never charged; and a 402 said only
 * "used up", not what did not fit. Now the input side is the prompt's UTF-8 bytes (a BPE token is at
 * least one byte), and the 402 gives the request's worst case, what is left, what is held, and how
 * to fix it.
 */
import { describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import { PROMPT_FRAMING_TOKENS } from "../../src/pipeline/bounds.js"
import { expectError, startInProcessGateway, type InProcessGateway, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const makeKey = async (g: InProcessGateway, json: Record<string, unknown>) =>
  (await (await g.fetch("/v1/keys", { method: "POST", json })).json()) as { key: string; data: { hash: string } }

// 200 × (2 CJK characters of 3 bytes, an emoji of 4 bytes): 800 UTF-16 units, 2,000 UTF-8 bytes.
const CJK = "漢字😀".repeat(200)
// demo/echo on the fake: $1/M prompt, $2/M completion.
const body = (input: string, stream: boolean) => ({ model: "demo/echo", input, max_output_tokens: 3, stream, provider: { only: ["fake"] } })
/** The reservation of a body: its UTF-8 bytes plus the framing allowance, and its 3 output tokens. */
const reservationOf = (json: object) => ((Buffer.byteLength(JSON.stringify(json)) + PROMPT_FRAMING_TOKENS) * 1 + 3 * 2) / 1e6

/** Opens a stream that holds its reservation until `close` (the fake waits 2 s between words). */
const holdOpen = async (g: InProcessGateway, key: string, json: object) => {
  const controller = new AbortController()
  const res = await g.fetch("/v1/responses", { method: "POST", key, json, signal: controller.signal })
  expect(res.status).toBe(200)
  const reader = res.body!.getReader()
  await reader.read()
  return async () => {
    controller.abort()
    await reader.cancel().catch(() => {})
  }
}

const figure = (message: string, pattern: RegExp) => Number(pattern.exec(message)?.[1] ?? Number.NaN)

describe("the reservation's input side is a true upper bound", () => {
  test("a CJK and emoji prompt reserves at least its UTF-8 bytes; the 402 gives the figures", async () => {
    const held = body(`${CJK} [slow:2000]`, true)
    const next = body(CJK, false)
    expect(Buffer.byteLength(CJK)).toBe(2000)
    // Room for a reservation of the characters ÷ 4 (~$0.0003), not for one of the bytes (~$0.0023).
    const limit = 0.001
    const { key } = await makeKey(gw(), { name: "cjk", limit })
    const close = await holdOpen(gw(), key, held)
    try {
      const message = await expectError(await gw().fetch("/v1/responses", { method: "POST", key, json: next }), 402)
      expect(figure(message, /may cost up to \$([\d.]+)/)).toBeCloseTo(reservationOf(next), 6)
      expect(figure(message, /\$([\d.]+) of this key's \$[\d.]+ total limit is left/)).toBe(0)
      expect(figure(message, /of this key's \$([\d.]+) total limit/)).toBe(limit)
      expect(figure(message, /\(\$([\d.]+) held by requests in flight\)/)).toBeCloseTo(reservationOf(held), 6)
      expect(message).toContain("max_output_tokens at the dearest candidate's price")
      expect(message).toContain("Lower max_output_tokens, or raise the key's limit")
      expect(message).toContain("it does not reset")
    } finally {
      await close()
    }
  })
})

describe("the 402 names what did not fit", () => {
  test("a daily key's 402 says daily, what is left and when it resets", async () => {
    const { key } = await makeKey(gw(), { name: "daily", limit: 0, limit_reset: "daily" })
    const message = await expectError(await gw().fetch("/v1/responses", { method: "POST", key, json: body("hi", false) }), 402)
    expect(message).toContain("$0.00 of this key's $0.00 daily limit is left ($0.00 held by requests in flight)")
    expect(message).toMatch(/may cost up to \$0\.000\d+/)
    expect(message).toMatch(/resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z/)
    expect(message).toContain("not your account's credits")
  })

  test("credits that cannot hold the request: the credits wording, with the figures", async () => {
    const g = await startInProcessGateway({ catalog: { ...demoCatalog, credits: { enforce: true } }, creditsEnforced: true })
    try {
      const json = body("hi", false)
      const message = await expectError(await g.fetch("/v1/responses", { method: "POST", json }), 402)
      expect(message).toContain("Insufficient credits")
      expect(figure(message, /may cost up to \$([\d.]+)/)).toBeCloseTo(reservationOf(json), 6)
      expect(message).toContain("$0.00 of your credits is left ($0.00 held by requests in flight)")
      expect(message).toContain("Lower max_output_tokens, or add credits")
    } finally {
      await g.stop()
    }
  })
})
