/**
 * Events pushed to a consumer (`consumeEvents`): from the upstream's read callback for the HTTP
 * adapters (`UpstreamCall.subscribe`), by iteration for a call without it (the fake provider).
 * The same order, one terminal callback, failures after the first byte, and stopping early.
 */
import { describe, expect, test } from "bun:test"
import { fakeProvider } from "../../src/providers/fake"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { ProviderError, type ProviderEvent } from "../../src/providers/types"
import { configFor, consumed, eventsOf, eventually, literalTexts, textRequest, useMockUpstream } from "./helpers"

const mocked = useMockUpstream()

const open = (headers: Record<string, string>, signal = new AbortController().signal) =>
  openAiChatProvider.open(textRequest("hello"), configFor("openai-chat", mocked.current.url, headers), { stream: true, signal, apiKey: "sk-test" })

describe("an HTTP adapter's stream, pushed", () => {
  test("the call offers subscribe, and pushes the same events iteration yields, then one end", async () => {
    // Compared as they come, the upstream's literals of text deltas included.
    const iterated: Array<ProviderEvent> = []
    for await (const batch of (await open({ "x-mock-tokens": "40" })).events) iterated.push(...batch.flatMap(literalTexts))
    const call = await open({ "x-mock-tokens": "40" })
    expect(call.subscribe).toBeDefined()
    const seen = consumed(call)
    await seen.settled
    expect(seen.events).toEqual(iterated)
    expect(seen.events.filter((e) => e.type === "text")).toHaveLength(40)
    expect(seen.ends).toBe(1)
    expect(seen.errors).toEqual([])
  })

  test("batches that arrived before subscribing come first, in order", async () => {
    const call = await open({ "x-mock-tokens": "5" })
    // The whole answer is read and translated before anyone subscribes.
    await Bun.sleep(30)
    const seen = consumed(call)
    await seen.settled
    expect(seen.events.filter((e) => e.type === "text").map((e) => (e.type === "text" ? e.delta : ""))).toEqual(Array(5).fill("tok "))
    expect(seen.events.at(-1)).toEqual({ type: "finish", reason: "stop" })
    expect(seen.ends).toBe(1)
  })

  test("a reset after the first deltas reaches error, not end", async () => {
    const seen = consumed(await open({ "x-mock-error": "reset-mid-stream" }))
    await seen.settled
    expect(seen.events.filter((e) => e.type === "text")).toHaveLength(2)
    expect(seen.ends).toBe(0)
    expect(seen.errors).toHaveLength(1)
    expect(seen.errors[0]).toBeInstanceOf(ProviderError)
    expect((seen.errors[0] as ProviderError).kind).toBe("connection")
  })

  test("a consumer that throws on a batch gets the error once and the upstream is dropped", async () => {
    const call = await open({ "x-mock-tokens": "1000", "x-mock-interval-ms": "10" })
    const seen = consumed(call, () => {
      throw new Error("assembler broke")
    })
    await seen.settled
    expect(seen.errors.map((e) => (e instanceof Error ? e.message : String(e)))).toEqual(["assembler broke"])
    expect(seen.ends).toBe(0)
    expect(await eventually(() => mocked.current.stats.aborted === 1 && mocked.current.stats.open === 0, 1000)).toBe(true)
  })

  test("stop drops the upstream at once and nothing more is pushed", async () => {
    const call = await open({ "x-mock-tokens": "1000", "x-mock-interval-ms": "10" })
    const seen = consumed(call)
    expect(await eventually(() => seen.events.length > 0, 1000)).toBe(true)
    seen.stop()
    const count = seen.events.length
    expect(await eventually(() => mocked.current.stats.aborted === 1 && mocked.current.stats.open === 0, 1000)).toBe(true)
    await Bun.sleep(50)
    expect(seen.events.length).toBe(count)
    expect(seen.ends).toBe(0)
    expect(seen.errors).toEqual([])
  })
})

describe("a call without subscribe, iterated", () => {
  const fake = (text: string) => fakeProvider.open(textRequest(text), { id: "fake", kind: "fake" }, { stream: true, signal: new AbortController().signal })

  test("pushes every batch, then one end", async () => {
    const call = await fake("one two three")
    expect(call.subscribe).toBeUndefined()
    const iterated = await eventsOf(await fake("one two three"))
    const seen = consumed(call)
    await seen.settled
    expect(seen.events).toEqual(iterated)
    expect(seen.ends).toBe(1)
  })

  test("a failure mid-way reaches error", async () => {
    const seen = consumed(await fake("[fail-mid] one two three"))
    await seen.settled
    expect(seen.ends).toBe(0)
    expect((seen.errors[0] as ProviderError).kind).toBe("server")
  })

  test("stop ends the iteration without a terminal callback", async () => {
    const seen = consumed(await fake("[slow:20] a b c d e f g h"))
    expect(await eventually(() => seen.events.length > 0, 1000)).toBe(true)
    seen.stop()
    await Bun.sleep(80)
    expect(seen.ends).toBe(0)
    expect(seen.errors).toEqual([])
    expect(seen.events.filter((e) => e.type === "text").length).toBeLessThan(8)
  })
})
