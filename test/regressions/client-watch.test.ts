/**
 * A request watches its client's abort signal once it has run CLIENT_WATCH_MS (src/pipeline/respond.ts):
 * a client that goes away before then, or after, stops a slow non-streamed upstream call all the
 * same, and the record says cancelled, never completed.
 */
import { describe, expect, test } from "bun:test"
import { CLIENT_WATCH_MS } from "../../src/pipeline/respond.js"
import { useGateway } from "../support/gateway.js"
import { ledgerRowsOf } from "../support/generations.js"

const gw = useGateway()

/** A non-streamed answer the fake takes ~1.2 s to give (24 words, 50 ms apart), left after `leaveMs`. */
const leftAfter = async (leaveMs: number) => {
  const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: `watch-${leaveMs}` } })).json()) as {
    key: string
    data: { hash: string }
  }
  const controller = new AbortController()
  const sent = gw()
    .fetch("/v1/responses", {
      method: "POST",
      key: made.key,
      json: { model: "demo/echo", input: `${"word ".repeat(24)}[slow:50]` },
      signal: controller.signal,
    })
    .catch((e: unknown) => e)
  await Bun.sleep(leaveMs)
  controller.abort()
  expect(await sent).toBeInstanceOf(Error)
  for (let i = 0; i < 100; i++) {
    await gw().server.drain()
    const rows = await ledgerRowsOf(gw().server, made.data.hash)
    if (rows.length > 0) return rows
    await Bun.sleep(20)
  }
  return []
}

describe("a client that goes away from a slow non-streamed request", () => {
  test(`before the watch starts (${CLIENT_WATCH_MS} ms): the upstream call stops when it does, recorded cancelled`, async () => {
    const rows = await leftAfter(20)
    expect(rows.map((r) => [r.status, r.cancelled])).toEqual([["cancelled", 1]])
    // Stopped at the watch, not after the fake's ~1.2 s.
    expect(rows[0]?.generation_time_ms).toBeLessThan(800)
  })

  test("after the watch started: the upstream call stops at once, recorded cancelled", async () => {
    const rows = await leftAfter(CLIENT_WATCH_MS + 200)
    expect(rows.map((r) => [r.status, r.cancelled])).toEqual([["cancelled", 1]])
    expect(rows[0]?.generation_time_ms).toBeLessThan(900)
  })
})
