/**
 * REVIEW (Postgres, READ COMMITTED): Spend.reserve decides `rolled` with a SELECT, then runs the
 * conditional UPDATE with `carried = 0` when the window had not rolled. A PATCH of the key's
 * limit in between sets `window_start = NULL`; the UPDATE then takes the ELSE branch and writes
 * `window_spend_nano = 0` (the "carried" 0) with `window_start = <current window>`: the spend of
 * the window is forgotten and the used-up key is admitted again for its whole limit.
 * (On SQLite the transaction holds the only connection, so the PATCH cannot interleave.)
 * Run with GATEWAY_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/postgres.
 */
import { expect, test } from "bun:test"
import { engine } from "../support/db.js"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const BODY = { model: "demo/echo", input: "hi there", max_output_tokens: 3, provider: { order: ["fake"] } }
const ACTUAL = (2 * 1 + 3 * 2) / 1e6

test.skipIf(engine !== "postgres")("a PATCH of the limit during traffic never re-admits a used-up key", async () => {
  const limit = ACTUAL * 4.5 // clear of floating-point noise: 5 answers overshoot it by half an answer
  const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "race", limit } })).json()) as {
    key: string
    data: { hash: string }
  }
  // Use the key up.
  // (Each request settles once its ledger row is durable: drain so the next one sees it.)
  for (let i = 0; i < 20; i++) {
    await (await gw().fetch("/v1/responses", { method: "POST", key: made.key, json: BODY })).text()
    await gw().server.drain()
  }
  await gw().server.drain()
  expect((await gw().fetch("/v1/responses", { method: "POST", key: made.key, json: BODY })).status).toBe(402)

  // Traffic on the used-up key while its (unchanged) limit is PATCHed again and again.
  let admitted = 0
  const until = Date.now() + 5000
  const traffic = async () => {
    while (Date.now() < until) {
      const r = await gw().fetch("/v1/responses", { method: "POST", key: made.key, json: BODY })
      await r.text()
      if (r.status === 200) admitted++
    }
  }
  const patches = async () => {
    while (Date.now() < until) {
      await (await gw().fetch(`/v1/keys/${made.data.hash}`, { method: "PATCH", json: { limit } })).text()
    }
  }
  await Promise.all([...Array.from({ length: 16 }, traffic), patches()])
  await gw().server.drain()
  expect(admitted).toBe(0)
}, 20_000)
