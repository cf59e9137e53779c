/**
 * One send and its retry policy (src/broadcast/send.ts, docs/broadcast.md): the requests go in
 * order and the first failure ends the send, with the status class and the receiver's
 * Retry-After, never its body; a failed send is retried after `retry_base_ms`, doubling, at least
 * what the receiver asked, at most 30 minutes.
 */
import { afterEach, describe, expect, test } from "bun:test"
import type { OutboundRequest } from "../../src/broadcast/exporter.js"
import { backoffMs, retryAfterMs, sendAll } from "../../src/broadcast/send.js"
import { type Receiver, startReceiver } from "./support.js"

const receivers: Array<Receiver> = []
afterEach(() => {
  for (const r of receivers.splice(0)) r.stop()
})

const receiver = () => {
  const r = startReceiver()
  receivers.push(r)
  return r
}

const post = (url: string, body: string): OutboundRequest => ({ url, method: "POST", headers: { "content-type": "application/json" }, body })

describe("Retry-After", () => {
  test("seconds are read as seconds, an HTTP date as the time left until it (none when it has passed)", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(retryAfterMs("120", now)).toBe(120_000)
    expect(retryAfterMs(" 3 ", now)).toBe(3_000)
    expect(retryAfterMs("Thu, 01 Jan 2026 00:00:30 GMT", now)).toBe(30_000)
    expect(retryAfterMs("Wed, 31 Dec 2025 23:59:00 GMT", now)).toBe(0)
  })

  test("no header, or one that is neither seconds nor a date, asks nothing", () => {
    expect(retryAfterMs(null)).toBeUndefined()
    expect(retryAfterMs("soon")).toBeUndefined()
  })
})

describe("the delay before the next attempt", () => {
  test("the first retry waits the base, each next one twice the last", () => {
    expect([1, 2, 3, 4].map((attempts) => backoffMs(1_000, attempts, undefined))).toEqual([1_000, 2_000, 4_000, 8_000])
  })

  test("at least what the receiver asked, at most 30 minutes", () => {
    expect(backoffMs(1_000, 1, 60_000)).toBe(60_000)
    expect(backoffMs(1_000, 3, 10)).toBe(4_000)
    expect(backoffMs(1_000, 40, undefined)).toBe(30 * 60_000)
    expect(backoffMs(1_000, 1, 3 * 60 * 60_000)).toBe(30 * 60_000)
  })
})

describe("a send", () => {
  test("every request delivered: ok, with the last status", async () => {
    const r = receiver()
    const sent = await sendAll([post(`${r.url}/a`, "1"), post(`${r.url}/b`, "2")], 2_000, true)
    expect(sent).toEqual({ ok: true, status: 200 })
    expect(r.received.map((x) => x.path)).toEqual(["/a", "/b"])
  })

  test("the first refused request ends it: its status class and Retry-After, not the receiver's body; the next is not sent", async () => {
    const r = receiver()
    r.respond(503, "7")
    const sent = await sendAll([post(`${r.url}/a`, "1"), post(`${r.url}/b`, "2")], 2_000, true)
    expect(sent).toEqual({ ok: false, status: 503, error: "the receiver answered HTTP 503 (server error)", retryAfterMs: 7_000 })
    expect(r.received.map((x) => x.path)).toEqual(["/a"])
  })

  test("a receiver that cannot be reached fails with status 0 and the reason", async () => {
    const r = startReceiver()
    r.stop()
    const sent = await sendAll([post(`${r.url}/a`, "1")], 2_000, true)
    expect(sent).toMatchObject({ ok: false, status: 0 })
    expect("error" in sent ? sent.error : "").toMatch(/\S/)
  })
})
