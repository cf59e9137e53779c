/**
 * Every relayed stream is counted open once and closed once, however it ends (completed, failed
 * mid-stream, the client gone), so the memory pacer (gc-pacer.ts) never drifts on.
 */
import { expect, test } from "bun:test"
import { streamGcPacer } from "../../src/pipeline/gc-pacer.js"
import { eventually } from "../providers/helpers.js"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const openStream = (input: string, signal?: AbortSignal) =>
  gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input, stream: true }, ...(signal ? { signal } : {}) })

test("a completed stream, a failed one and an abandoned one each leave the count where it was", async () => {
  const before = streamGcPacer.open
  // Completed.
  await (await openStream("one two three")).text()
  expect(await eventually(() => streamGcPacer.open === before, 1000)).toBe(true)
  // Failed after the first byte.
  const failed = await (await openStream("[fail-mid] one two three four")).text()
  expect(failed).toContain("response.failed")
  expect(await eventually(() => streamGcPacer.open === before, 1000)).toBe(true)
  // The client leaves mid-stream.
  const controller = new AbortController()
  const res = await openStream(`${"word ".repeat(40)}[slow:30]`, controller.signal)
  const reader = res.body!.getReader()
  await reader.read()
  expect(streamGcPacer.open).toBe(before + 1)
  controller.abort()
  await reader.cancel().catch(() => {})
  expect(await eventually(() => streamGcPacer.open === before, 1000)).toBe(true)
})
