/**
 * The ledger's rows as stored, on either engine: on Postgres they go as one JSON parameter
 * (`json_populate_recordset`) rather than one bound value each, so every field must come back as
 * it was sent, and a string Postgres's json cannot hold (a lone surrogate) must not lose the batch.
 */
import { afterAll, expect, test } from "bun:test"
import { startInProcessGateway } from "../support/gateway.js"

const gw = await startInProcessGateway({})
afterAll(() => gw.stop())

const generation = async (id: string) => {
  await gw.server.drain()
  const res = await gw.fetch(`/v1/generation?id=${id}`)
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Record<string, unknown> }).data
}

const ask = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", max_output_tokens: 5, ...body }, headers })
  expect(res.status).toBe(200)
  await res.text()
  return res.headers.get("x-generation-id") as string
}

test("a batch of records comes back field for field: text with quotes, backslashes and non-ASCII, counts, nulls", async () => {
  const headers = { "user-agent": 'agent "quoted" \\ back', "x-title": "Cafe \"title\"", "http-referer": "https://example.com/a?b=1" }
  const ids = await Promise.all([0, 1, 2].map((i) => ask({ input: `hello ${i}`, session_id: `séssion "${i}"` }, headers)))
  for (const [i, id] of ids.entries()) {
    const g = await generation(id)
    expect(g["id"]).toBe(id)
    expect(g["session_id"]).toBe(`séssion "${i}"`)
    expect(g["app_name"]).toBe('Cafe "title"')
    expect(g["http_referer"]).toBe("https://example.com/a?b=1")
    expect(g["user_agent"]).toBe('agent "quoted" \\ back')
    expect(g["streamed"]).toBe(false)
    // The fake counts a token per 4 characters in ("hello i") and a word out ("Echo: hello i"); demo/echo's two endpoints are priced 1/2 and 1.5/3 per million.
    expect(g["native_tokens_prompt"]).toBe(2)
    expect(g["native_tokens_completion"]).toBe(3)
    expect(g["total_cost"]).toBeCloseTo(g["provider_name"] === "fake" ? (2 * 1 + 3 * 2) / 1e6 : (2 * 1.5 + 3 * 3) / 1e6, 12)
    expect(g["upstream_id"]).toBeNull()
    expect(Number.isInteger(g["latency"]) && (g["latency"] as number) >= 0).toBe(true)
  }
})

test("a lone surrogate in a stored string: the record is still written", async () => {
  const id = await ask({ input: "hi", session_id: "broken \ud800 pair" })
  const g = await generation(id)
  expect(String(g["session_id"]).startsWith("broken ")).toBe(true)
})
