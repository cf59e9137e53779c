/** The same request gets the same answer whether its reads were in memory (ready/refused) or loaded (pending). */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"

let gw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  gw = await startTestGateway({
    catalog: { ...demoCatalog, guardrails: [{ id: "gr", name: "No secrets", patterns: ["password\\s*[:=]"] }] },
  })
})
afterAll(async () => {
  await gw?.stop()
})

const newKey = async (json: Record<string, unknown> = {}) =>
  ((await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "p", ...json } })).json()) as { key: string }).key

const cases: Array<{ name: string; body: string; headers?: Record<string, string> }> = [
  { name: "guardrail+metadata", body: JSON.stringify({ model: "demo/echo", input: "password: x" }), headers: { "x-service-metadata": "enabled" } },
  { name: "missing preset", body: JSON.stringify({ model: "@preset/nope", input: "x" }) },
  { name: "preset contradiction", body: JSON.stringify({ model: "demo/echo@preset/a", preset: "b", input: "x" }) },
  { name: "long session header", body: JSON.stringify({ model: "demo/echo", input: "x" }), headers: { "x-session-id": "s".repeat(300) } },
  { name: "unknown model", body: JSON.stringify({ model: "no/such", input: "x" }) },
  { name: "bad json", body: "{" },
  { name: "bad field", body: JSON.stringify({ model: "demo/echo", input: 5 }) },
]

const ask = (key: string, c: (typeof cases)[number]) =>
  fetch(`${gw.url}/v1/responses`, {
    method: "POST",
    body: c.body,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...c.headers },
  }).then(async (r) => {
    const text = await r.text()
    let body: any = text
    try {
      body = JSON.parse(text)
      // Equal-price endpoints are listed in a rotating order (load spreading), not a path difference.
      body?.service_metadata?.endpoints?.available?.sort((a: any, b: any) => a.provider.localeCompare(b.provider))
    } catch {}
    return { status: r.status, body }
  })

describe("ready and pending answer alike", () => {
  for (const limit of [undefined, 1]) {
    for (const c of cases) {
      test(`${c.name} (limit ${limit})`, async () => {
        const key = await newKey(limit === undefined ? {} : { limit })
        const first = await ask(key, c) // key not in memory: loaded on the runtime
        const second = await ask(key, c) // key in memory
        expect(second).toEqual(first)
      })
    }
  }
})
