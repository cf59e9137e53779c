/**
 * Regression: a 402 said "$0.115 held by requests in flight" when nothing was in flight: the money
 * was another process's budget slice (src/services/Spend.ts, "Budget leases"), which it keeps to
 * admit requests without a write. The 402 now names requests' own holds and slices apart. Two
 * processes on one database, on SQLite and, with GATEWAY_TEST_PG_URL, Postgres.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Layer, Option } from "effect"
import { GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { pennyCatalog } from "../support/catalog.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"

const start = (url: string, overrides: Partial<Settings> = {}) =>
  startServer(GatewayConfig.layer(testSettings({ databaseUrl: url, catalog: pennyCatalog, budgetSliceIdleMs: 600_000, ...overrides })) as Layer.Layer<GatewayConfig>)

/** test/penny: every request holds and costs exactly $0.01. */
const ask = async (server: RunningServer, key: string) => {
  const res = await fetch(`${server.url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "test/penny", input: "hi", max_output_tokens: 3 }),
  })
  const body = (await res.json()) as { error?: { message: string } }
  return { status: res.status, message: body.error?.message ?? "" }
}

describe(`a 402 names what holds the key's money (${engine})`, () => {
  let db: TestDatabase
  let a: RunningServer
  let b: RunningServer
  beforeAll(async () => {
    db = await freshDatabase()
    a = await start(db.url)
    b = await start(db.url)
  }, 30_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await db?.drop()
  })

  test("another process's idle budget slice is named as a slice, not as requests in flight", async () => {
    const admin = Option.getOrThrow(a.createdSecret)
    const created = await fetch(`${a.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "sliced", limit: 1 }),
    })
    const key = ((await created.json()) as { key: string }).key
    // A admits one request against a slice of an eighth of the $1 limit: $0.125, $0.115 of it unused afterwards.
    expect((await ask(a, key)).status).toBe(200)
    await a.drain()
    // B spends the rest until it is refused; then nothing is in flight anywhere.
    let spent = 0
    while ((await ask(b, key)).status === 200) spent++
    expect(spent).toBeGreaterThan(50)
    await b.drain()
    const { status, message } = await ask(b, key)
    expect(status).toBe(402)
    expect(message).toContain("($0.00 held by requests in flight; $0.115 reserved in the budget slices of 1 gateway process")
    expect(message).toContain("given back after 600 s without a request on this key, or at once when the key is changed")
    expect(message).not.toContain("$0.115 held by requests in flight")
  }, 60_000)
})
