/**
 * The upstream client caps its connections per origin (a provider's `max_connections`): a call
 * beyond the cap waits, first come first served, until a connection frees (ended and reused, or
 * closed and replaced); a waiting call that is aborted leaves the line and is never sent.
 */
import { describe, expect, test } from "bun:test"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { ProviderError, type UpstreamCall } from "../../src/providers/types"
import { configFor, eventsOf, textRequest, useMockUpstream } from "./helpers"

const mocked = useMockUpstream()

const open = (tag: string, headers: Record<string, string>, signal: AbortSignal): Promise<UpstreamCall> =>
  openAiChatProvider.open(
    textRequest("hello"),
    { ...configFor("openai-chat", mocked.current.url, { "x-call": tag, ...headers }), max_connections: 2 },
    { stream: true, signal },
  )

const tags = () => mocked.current.requests.map((r) => r.headers["x-call"])

describe("upstream connections per origin", () => {
  test("with max_connections 2 a third call waits for a connection, in order; an aborted waiting call leaves the line", async () => {
    const held = { a: new AbortController(), b: new AbortController() }
    // Two calls whose first token never comes: both connections are busy.
    const hang = { "x-mock-ttft-ms": "600000" }
    await open("A", hang, held.a.signal)
    await open("B", hang, held.b.signal)
    const c = open("C", {}, new AbortController().signal)
    const gone = new AbortController()
    const e = open("E", {}, gone.signal)
    const d = open("D", {}, new AbortController().signal)
    await Bun.sleep(300)
    expect(tags()).toEqual(["A", "B"])

    gone.abort()
    expect(await e.then(() => "opened", (error: unknown) => error instanceof ProviderError)).toBe(true)

    // A's connection is closed: C gets a new one; when C's answer ends, its connection goes to D.
    held.a.abort()
    const third = await c
    expect((await eventsOf(third)).some((event) => event.type === "finish")).toBe(true)
    const fourth = await d
    expect((await eventsOf(fourth)).some((event) => event.type === "finish")).toBe(true)
    expect(tags()).toEqual(["A", "B", "C", "D"])
    held.b.abort()
  }, 20_000)
})
