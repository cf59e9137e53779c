/** Changes to a cached key take effect at once on the in-memory (ready) path. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let gw: InProcessGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  gw = await startInProcessGateway()
})
afterAll(async () => {
  await gw?.stop()
})

const BODY = { model: "demo/echo", input: "hi there", max_output_tokens: 3, provider: { order: ["fake"] } }
const newKey = async () =>
  (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "c" } })).json()) as { key: string; data: { hash: string } }
const ask = (key: string) => gw.fetch("/v1/responses", { method: "POST", json: BODY, key }).then(async (r) => ({ status: r.status, text: await r.text() }))

describe("cached key changes", () => {
  test("a limit set on a cached unlimited key is enforced on the next request", async () => {
    const { key, data } = await newKey()
    expect((await ask(key)).status).toBe(200)
    expect((await ask(key)).status).toBe(200)
    await gw.server.drain() // the two rows are in the ledger
    const patch = await gw.fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { limit: 0.000001 } })
    expect(patch.status).toBe(200)
    expect((await ask(key)).status).toBe(402)
  })

  test("a disabled / deleted cached key is refused on the next request", async () => {
    const a = await newKey()
    expect((await ask(a.key)).status).toBe(200)
    await gw.fetch(`/v1/keys/${a.data.hash}`, { method: "PATCH", json: { disabled: true } })
    expect((await ask(a.key)).status).toBe(401)
    const b = await newKey()
    expect((await ask(b.key)).status).toBe(200)
    await gw.fetch(`/v1/keys/${b.data.hash}`, { method: "DELETE" })
    expect((await ask(b.key)).status).toBe(401)
  })
})
