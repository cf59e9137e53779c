/**
 * Regression: token counts from upstream were trusted as given. A usage of
 * {prompt_tokens: 1e12, completion_tokens: 1e12} charged $3,000,000 to a $1-limit key (its
 * reservation ~$0.002), and negative counts lowered a key's spend. Now counts that are not counts
 * are missing (estimated, `usage_estimated: true`), and what is charged never passes the bounds the
 * request was reserved for: input at the prompt's bound, output at the bound sent upstream.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { ConfigFile } from "../../src/config/file.js"
import { PROMPT_FRAMING_TOKENS } from "../../src/pipeline/bounds.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

/**
 * A Chat Completions upstream that answers "ok" with the usage object given, as raw JSON text, in
 * the request's `x-usage` header (set per provider in the catalog): any JSON, valid or not as counts.
 */
const startUpstream = () =>
  Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const body = (await req.json()) as { stream?: boolean }
      const usage = req.headers.get("x-usage") ?? "null"
      const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
      if (body.stream !== true) {
        return new Response(
          `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":${usage}}`,
          { headers: { "content-type": "application/json" } },
        )
      }
      const sse =
        `data: ${head}{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n` +
        `data: ${head}{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n` +
        `data: ${head}],"usage":${usage}}\n\n` +
        "data: [DONE]\n\n"
      return new Response(sse, { headers: { "content-type": "text/event-stream" } })
    },
  })

const USAGES = {
  huge: `{"prompt_tokens":1e12,"completion_tokens":1e12,"total_tokens":2e12}`,
  negative: `{"prompt_tokens":-1000000,"completion_tokens":-1000000,"total_tokens":-2000000}`,
  fractional: `{"prompt_tokens":10.5,"completion_tokens":2,"total_tokens":12.5}`,
  // 1e400 parses to Infinity (NaN has no JSON).
  infinite: `{"prompt_tokens":1e400,"completion_tokens":2,"total_tokens":1e400}`,
  string: `{"prompt_tokens":"12","completion_tokens":"2","total_tokens":"14"}`,
  // Read as 0 these made the answer free.
  null: `{"prompt_tokens":null,"completion_tokens":null,"total_tokens":null}`,
  absent: `{"total_tokens":14}`,
  honest: `{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}`,
} as const
type Kind = keyof typeof USAGES

const PRICE = { prompt: 1, completion: 2 }
const MAX_OUTPUT = 16

let upstream: ReturnType<typeof Bun.serve>
let gw: InProcessGateway & { stop: () => Promise<void> }

beforeAll(async () => {
  upstream = startUpstream()
  const kinds = Object.keys(USAGES) as Array<Kind>
  gw = await startInProcessGateway({
    catalog: {
      providers: kinds.map((k) => ({
        id: k,
        kind: "openai-chat",
        base_url: `http://127.0.0.1:${upstream.port}/v1`,
        headers: { "x-usage": USAGES[k] },
      })),
      models: kinds.map((k) => ({
        id: `usage/${k}`,
        context_length: 100_000,
        endpoints: [{ provider: k, upstream_model: "m", pricing: PRICE }],
      })),
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const limitedKey = async (limit: number) =>
  (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: `k${Math.random()}`, limit } })).json()) as {
    key: string
    data: { hash: string }
  }

const spendOf = (hash: string) =>
  gw.server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${hash}`
      return Number(rows[0]?.total ?? 0) / 1e9
    }),
  )

interface Record {
  total_cost: number
  usage_estimated: boolean
  tokens_prompt: number
  tokens_completion: number
}

const ask = async (kind: Kind, key: string, stream: boolean) => {
  const json = { model: `usage/${kind}`, input: "hello there", max_output_tokens: MAX_OUTPUT, stream }
  const res = await gw.fetch("/v1/responses", { method: "POST", key, json })
  expect(res.status).toBe(200)
  const text = await res.text()
  await gw.server.drain()
  const id = res.headers.get("x-generation-id")!
  const record = ((await (await gw.fetch(`/v1/generation?id=${id}`)).json()) as { data: Record }).data
  return { body: JSON.stringify(json), text, record }
}

describe("usage from upstream is bounded by the reservation", () => {
  for (const stream of [false, true]) {
    test(`usage of 1e12 tokens on a $1-limit key charges at most the reservation (${stream ? "streamed" : "JSON"})`, async () => {
      const { key, data } = await limitedKey(1)
      const { body, record } = await ask("huge", key, stream)
      // The reservation's bounds: the prompt's UTF-8 bytes plus the framing allowance, the output sent upstream.
      const reservation = ((Buffer.byteLength(body) + PROMPT_FRAMING_TOKENS) * PRICE.prompt + MAX_OUTPUT * PRICE.completion) / 1e6
      const spent = await spendOf(data.hash)
      expect(spent).toBeGreaterThan(0)
      expect(spent).toBeLessThanOrEqual(reservation + 1e-12)
      expect(record.total_cost).toBeCloseTo(spent, 12)
      expect(record.tokens_completion).toBe(MAX_OUTPUT)
      expect(record.usage_estimated).toBe(false)
    })
  }

  test("an honest upstream is charged exactly what it reports", async () => {
    const { key, data } = await limitedKey(1)
    const { record } = await ask("honest", key, false)
    expect(record.tokens_prompt).toBe(20)
    expect(record.tokens_completion).toBe(2)
    expect(await spendOf(data.hash)).toBeCloseTo((20 * PRICE.prompt + 2 * PRICE.completion) / 1e6, 12)
    expect(record.usage_estimated).toBe(false)
  })
})

describe("counts that are not counts are treated as missing: estimated, and the record says so", () => {
  for (const kind of ["negative", "fractional", "infinite", "string", "null", "absent"] as const) {
    for (const stream of [false, true]) {
      test(`${kind} counts (${stream ? "streamed" : "JSON"}): usage_estimated, a positive cost, never a negative one`, async () => {
        const { key, data } = await limitedKey(1)
        const { record, text } = await ask(kind, key, stream)
        expect(record.usage_estimated).toBe(true)
        // The estimate: the body's characters ÷ 4, the answer's "ok" one token.
        expect(record.tokens_prompt).toBeGreaterThan(0)
        expect(record.tokens_completion).toBe(1)
        expect(record.total_cost).toBeGreaterThan(0)
        expect(await spendOf(data.hash)).toBeCloseTo(record.total_cost, 12)
        // The answer shows the same cost the key was charged.
        expect(text).toContain(`"cost":${record.total_cost}`)
      })
    }
  }
})
