/**
 * Regression (found in review): KeyStore.cachedByHash loads a row on a miss and then `cache.set`s it. A load that read
 * the row BEFORE a PATCH {disabled:true} committed but finishes AFTER the PATCH's `cache.delete`
 * puts the stale (enabled) row back, stamped with the load's start time: the disabled key keeps
 * authenticating in this process for up to the 2 s TTL after the PATCH answered. (Same for DELETE.)
 * Most visible on Postgres (async queries): GATEWAY_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/postgres
 */
import { expect, test } from "bun:test"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

test("after PATCH {disabled:true} has answered, the key is refused at once", async () => {
  const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "flip" } })).json()) as {
    key: string
    data: { hash: string }
  }
  let staleAccepted = 0
  const until = Date.now() + 6000
  while (Date.now() < until) {
    await (await gw().fetch(`/v1/keys/${made.data.hash}`, { method: "PATCH", json: { disabled: false } })).text()
    // Misses in flight (the PATCH just dropped the cache entry) while the key is disabled.
    const burst = Array.from({ length: 8 }, () => gw().fetch("/v1/key", { key: made.key }).then((r) => r.text()))
    const disabled = await gw().fetch(`/v1/keys/${made.data.hash}`, { method: "PATCH", json: { disabled: true } })
    await disabled.text()
    await Promise.all(burst)
    const after = await gw().fetch("/v1/key", { key: made.key })
    await after.text()
    if (after.status === 200) staleAccepted++
  }
  expect(staleAccepted).toBe(0)
}, 20_000)
