/**
 * Regression (found in review): stream terminal paths: deadline while waiting for the first token (with keep-alives),
 * deadline mid-stream, failure mid-stream, abort before the first token; every one ends with a
 * terminal event then [DONE] (nothing after it) or, for an abort, releases the reservation.
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Spend } from "../../src/services/Spend.js"
import { useInProcessGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse } from "../support/sse.js"

const gw = useInProcessGateway({ requestTimeoutMs: 400, streamKeepAliveMs: 40 })
const open = () => gw().server.runtime.runPromise(Effect.flatMap(Spend, (s) => s.openReservations))
const key = async () =>
  ((await (await gw().fetch("/v1/keys", { method: "POST", json: { name: `s${Math.random()}`, limit: 5 } })).json()) as { key: string }).key

const stream = async (input: string) => {
  const res = await gw().fetch("/v1/responses", {
    method: "POST",
    key: await key(),
    json: { model: "demo/echo", provider: { order: ["fake"] }, input, stream: true },
  })
  const text = await res.text()
  return { status: res.status, text, ...parseSse(text) }
}

const terminal = (events: ReturnType<typeof parseSse>["events"]) =>
  events.filter((e) => e.json?.type === "response.completed" || e.json?.type === "response.failed")

describe("stream terminal paths", () => {
  test("deadline before the first token: keep-alives, then response.failed (timeout), [DONE] last", async () => {
    const s = await stream("hi [ttft:2000]")
    expect(s.comments.length).toBeGreaterThan(0)
    expect(terminal(s.events).map((e) => e.json?.type)).toEqual(["response.failed"])
    checkStreamRules(s.events)
    expect(s.text.endsWith("data: [DONE]\n\n")).toBe(true)
  })

  test("deadline mid-stream: the open message is closed, response.failed, [DONE] last", async () => {
    const s = await stream("a b c d e f g h i j k l m n o p [slow:60]")
    expect(terminal(s.events).map((e) => (e.json?.response as { error?: { code?: string } } | undefined)?.error?.code)).toEqual(["timeout"])
    checkStreamRules(s.events)
    expect(s.text.endsWith("data: [DONE]\n\n")).toBe(true)
  })

  test("failure mid-stream and reasoning + tool call: item ids consistent, [DONE] last", async () => {
    for (const input of ["x y z [fail-mid]", "[reasoning] [tool:lookup] q", "[reasoning] [fail-mid] r s t"]) {
      const s = await stream(input)
      checkStreamRules(s.events)
      expect(terminal(s.events).length).toBe(1)
    }
  })

  test("client abort before the first token: the reservation is released", async () => {
    await gw().server.drain()
    const before = await open()
    const controller = new AbortController()
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      key: await key(),
      json: { model: "demo/echo", provider: { order: ["fake"] }, input: "hi [ttft:300]", stream: true },
      signal: controller.signal,
    })
    const reader = res.body!.getReader()
    await reader.read()
    controller.abort()
    await reader.cancel().catch(() => {})
    for (let i = 0; i < 50 && (await open()) > before; i++) await Bun.sleep(20)
    expect(await open()).toBe(before)
  })
})
