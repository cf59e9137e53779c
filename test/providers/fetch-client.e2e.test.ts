/**
 * The `fetch` client (GATEWAY_UPSTREAM_CLIENT=fetch, or an HTTP(S)_PROXY variable set) behind the
 * same adapters: answers, streams, statuses, resets, the caller's abort and the deadline come out
 * as they do through the own HTTP/1.1 client, so a deployment behind a proxy behaves the same.
 */
import { describe, expect, test } from "bun:test"
import { anthropicWire } from "../../src/providers/anthropic/adapter"
import { httpProvider } from "../../src/providers/http"
import { fetchTransport, http1Transport, type Transport } from "../../src/providers/http1"
import { openAiChatWire } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesWire } from "../../src/providers/openai-responses/adapter"
import type { ProviderConfig } from "../../src/providers/types"
import type { WireFormat } from "../../src/providers/wire"
import { configFor, eventsOf, eventually, providerErrorOf, textRequest, useMockUpstream } from "./helpers"

const mocked = useMockUpstream()

const WIRES: ReadonlyArray<readonly [ProviderConfig["kind"], WireFormat]> = [
  ["openai-chat", openAiChatWire],
  ["openai-responses", openAiResponsesWire],
  ["anthropic", anthropicWire],
]
const CLIENTS: ReadonlyArray<readonly [string, Transport]> = [
  ["fetch", fetchTransport],
  ["http1", http1Transport()],
]

for (const [kind, wire] of WIRES) {
  describe(`${kind}: the fetch client and the own client agree`, () => {
    const open = (transport: Transport, stream: boolean, headers: Record<string, string> = {}, signal = new AbortController().signal, timeoutMs?: number) =>
      httpProvider(wire, transport).open(textRequest("hello"), configFor(kind, mocked.current.url, headers, timeoutMs), { stream, signal, apiKey: "sk-test" })

    test("the same events for a JSON answer and for a stream", async () => {
      for (const stream of [false, true]) {
        const [viaFetch, viaHttp1] = await Promise.all(CLIENTS.map(async ([, transport]) => eventsOf(await open(transport, stream, { "x-mock-tokens": "7" }))))
        expect(viaFetch).toEqual(viaHttp1)
        expect(viaFetch.filter((e) => e.type === "text")).toHaveLength(stream ? 7 : 1)
      }
    })

    for (const [name, transport] of CLIENTS) {
      test(`${name}: a 429 carries the status, a reset mid-stream is "connection", silence is "timeout"`, async () => {
        const limited = await providerErrorOf(open(transport, false, { "x-mock-error": "429" }))
        expect(limited.kind).toBe("rate_limited")
        expect(limited.upstreamStatus).toBe(429)
        const reset = await providerErrorOf(open(transport, true, { "x-mock-error": "reset-mid-stream" }).then(eventsOf))
        expect(reset.kind).toBe("connection")
        const silent = await providerErrorOf(open(transport, true, { "x-mock-ttft-ms": "2000" }, undefined, 100).then(eventsOf))
        expect(silent.kind).toBe("timeout")
        // The timed-out call dropped its connection: the mock sees it closed before the next test.
        expect(await eventually(() => mocked.current.stats.open === 0, 1000)).toBe(true)
      })

      test(`${name}: the caller's abort mid-stream stops the upstream stream`, async () => {
        const controller = new AbortController()
        const call = await open(transport, true, { "x-mock-tokens": "1000", "x-mock-interval-ms": "10" }, controller.signal)
        const iterator = call.events[Symbol.asyncIterator]()
        expect((await iterator.next()).done).toBe(false)
        controller.abort()
        expect((await providerErrorOf(iterator.next())).kind).toBe("connection")
        expect(await eventually(() => mocked.current.stats.aborted === 1 && mocked.current.stats.open === 0, 1000)).toBe(true)
      })
    }
  })
}
