/**
 * How each HTTP adapter fails: HTTP statuses and error bodies before the first byte, error
 * events and resets after it, the caller's abort, the deadline, and a refused connection.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream"
import { anthropicProvider } from "../../src/providers/anthropic/adapter"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesProvider } from "../../src/providers/openai-responses/adapter"
import type { Provider, ProviderConfig, ProviderErrorKind } from "../../src/providers/types"
import { configFor, eventsOf, eventually, literalTexts, providerErrorOf, textRequest } from "./helpers"

const CASES: ReadonlyArray<{ readonly kind: ProviderConfig["kind"]; readonly provider: Provider; readonly midStreamKind: ProviderErrorKind }> = [
  { kind: "openai-chat", provider: openAiChatProvider, midStreamKind: "server" },
  { kind: "openai-responses", provider: openAiResponsesProvider, midStreamKind: "server" },
  // The mock's Anthropic mid-stream error is an overloaded_error event, as Anthropic sends.
  { kind: "anthropic", provider: anthropicProvider, midStreamKind: "overloaded" },
]

const STATUS_ERRORS: ReadonlyArray<{ readonly error: string; readonly kind: ProviderErrorKind; readonly message?: string }> = [
  { error: "400", kind: "bad_request", message: "mock: invalid request" },
  { error: "401", kind: "auth", message: "mock: invalid api key" },
  { error: "403", kind: "auth" },
  { error: "429", kind: "rate_limited" },
  { error: "500", kind: "server" },
  { error: "503", kind: "server" },
  { error: "529", kind: "overloaded" },
  { error: "overloaded", kind: "overloaded" },
  { error: "context_length", kind: "context_length" },
]

let mock: MockUpstream
beforeAll(async () => {
  mock = await startMockUpstream({ port: 0, tokens: 3 })
})
afterAll(async () => {
  await mock.stop()
})
beforeEach(() => mock.reset())

for (const c of CASES) {
  const open = (stream: boolean, headers: Record<string, string>, signal = new AbortController().signal, timeoutMs?: number, baseUrl = mock.url) =>
    c.provider.open(textRequest("hello"), configFor(c.kind, baseUrl, headers, timeoutMs), { stream, signal, apiKey: "sk-test" })

  describe(`${c.kind} adapter failures`, () => {
    for (const { error, kind, message } of STATUS_ERRORS) {
      test(`upstream error ${error} rejects open with "${kind}"`, async () => {
        for (const stream of [true, false]) {
          const failure = await providerErrorOf(open(stream, { "x-mock-error": error }))
          expect(failure.kind).toBe(kind)
          if (message !== undefined) expect(failure.message).toBe(message)
          if (kind === "rate_limited") expect(failure.retryAfterSeconds).toBe(1)
        }
      })
    }

    test("a 429 carries the upstream status", async () => {
      const failure = await providerErrorOf(open(true, { "x-mock-error": "429" }))
      expect(failure.upstreamStatus).toBe(429)
    })

    test("a socket reset mid-stream throws \"connection\" from the iterator after the first deltas", async () => {
      const call = await open(true, { "x-mock-error": "reset-mid-stream" })
      const seen: Array<string> = []
      const failure = await providerErrorOf(
        (async () => {
          for await (const batch of call.events) for (const event of batch.flatMap(literalTexts)) if (event.type === "text") seen.push(event.delta)
        })(),
      )
      expect(failure.kind).toBe("connection")
      expect(seen).toEqual(["tok ", "tok "])
    })

    test("an error event mid-stream throws from the iterator", async () => {
      const call = await open(true, { "x-mock-error": "mid-stream-error" })
      const failure = await providerErrorOf(eventsOf(call))
      expect(failure.kind).toBe(c.midStreamKind)
    })

    test("aborting mid-stream cancels the upstream stream at once", async () => {
      const controller = new AbortController()
      const call = await open(true, { "x-mock-tokens": "1000", "x-mock-interval-ms": "20" }, controller.signal)
      const iterator = call.events[Symbol.asyncIterator]()
      const first = await iterator.next()
      expect(first.done).toBe(false)
      expect(mock.stats.open).toBe(1)
      const started = performance.now()
      controller.abort()
      const failure = await providerErrorOf(iterator.next())
      expect(failure.kind).toBe("connection")
      expect(await eventually(() => mock.stats.aborted === 1 && mock.stats.open === 0, 500)).toBe(true)
      expect(performance.now() - started).toBeLessThan(500)
      expect(mock.stats.completed).toBe(0)
    })

    test("aborting before the upstream answers rejects open at once", async () => {
      const controller = new AbortController()
      const pending = open(true, { "x-mock-delay-ms": "5000" }, controller.signal)
      await Bun.sleep(20)
      const started = performance.now()
      controller.abort()
      const failure = await providerErrorOf(pending)
      expect(failure.kind).toBe("connection")
      expect(performance.now() - started).toBeLessThan(200)
    })

    test("an upstream that never answers times out with \"timeout\"", async () => {
      const started = performance.now()
      const failure = await providerErrorOf(open(false, { "x-mock-error": "hang" }, undefined, 150))
      expect(failure.kind).toBe("timeout")
      expect(performance.now() - started).toBeGreaterThanOrEqual(140)
      expect(performance.now() - started).toBeLessThan(1000)
    })

    test("a stream silent past the timeout before its first event fails open with \"timeout\" (before the first byte)", async () => {
      const failure = await providerErrorOf(open(true, { "x-mock-ttft-ms": "2000" }, undefined, 150))
      expect(failure.kind).toBe("timeout")
      expect(await eventually(() => mock.stats.aborted === 1, 500)).toBe(true)
    })

    test("a slow stream whose gaps stay under the timeout completes", async () => {
      // 5 tokens 120 ms apart: the stream (~480 ms) outlasts the 400 ms timeout, each gap leaves 280 ms of room
      // for a loaded machine's pause (60 ms gaps under a 150 ms timeout failed beside other test files).
      const call = await open(true, { "x-mock-interval-ms": "120", "x-mock-tokens": "5" }, undefined, 400)
      const events = await eventsOf(call)
      expect(events.filter((event) => event.type === "text").length).toBe(5)
      expect(events[events.length - 1]).toMatchObject({ type: "finish", reason: "stop" })
    })

    test("a refused connection rejects open with \"connection\"", async () => {
      const closed = await startMockUpstream({ port: 0 })
      await closed.stop()
      const failure = await providerErrorOf(open(true, {}, undefined, undefined, closed.url))
      expect(failure.kind).toBe("connection")
    })

    test("an already aborted signal rejects open without calling upstream", async () => {
      const controller = new AbortController()
      controller.abort()
      const failure = await providerErrorOf(open(true, {}, controller.signal))
      expect(failure.kind).toBe("connection")
      expect(mock.requests.length).toBe(0)
    })
  })
}
