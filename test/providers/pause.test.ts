/**
 * A paused subscription stops reading its upstream, through either client: the own client pauses
 * the socket, the fetch client stops reading the body. So the mock upstream cannot send past what
 * the buffers between hold while paused, and once resumed the events come on, all of them, in order.
 * A paused stream is not timed out as a silent upstream (the silence is its reader's).
 */
import { describe, expect, test } from "bun:test"
import { httpProvider } from "../../src/providers/http"
import { fetchTransport, http1Transport, type Transport } from "../../src/providers/http1"
import { openAiChatWire } from "../../src/providers/openai-chat/adapter"
import { consumeEvents } from "../../src/providers/consume"
import type { Subscription } from "../../src/providers/types"
import { configFor, literalTexts, textRequest, useMockUpstream } from "./helpers"
import { settledValue } from "../support/poll.js"

const mocked = useMockUpstream()

/** ~45 MB of upstream SSE: far more than the sockets' buffers hold. */
const TOKENS = 300_000
const UPSTREAM_BYTES = TOKENS * 150

const CLIENTS: ReadonlyArray<readonly [string, () => Transport]> = [
  ["http1", () => http1Transport()],
  ["fetch", () => fetchTransport],
]

for (const [name, transport] of CLIENTS) {
  describe(`${name} client`, () => {
    test("a paused stream stops reading its upstream, is not timed out, and resumed gives every event in order", async () => {
      mocked.current.reset()
      // A 2 s upstream timeout: the pause lasts longer, and must not count as upstream silence.
      const config = configFor("openai-chat", mocked.current.url, { "x-mock-tokens": String(TOKENS) }, 2_000)
      const call = await httpProvider(openAiChatWire, transport()).open(textRequest("hello"), config, { stream: true, signal: new AbortController().signal })
      let texts = 0
      let finished = false
      let failure: unknown
      let paused = false
      let sentWhilePaused = 0
      let sentAtResume = -1
      let subscription: Subscription | undefined
      // Paused at the first batch, as the relay does when its client's socket is full.
      const pause = () => {
        if (paused || subscription === undefined) return
        paused = true
        subscription.pause()
        const resumeAt = performance.now() + 3_000
        void settledValue(() => mocked.current.stats.sent).then(async (sent) => {
          sentWhilePaused = sent
          await Bun.sleep(Math.max(0, resumeAt - performance.now()))
          sentAtResume = mocked.current.stats.sent
          subscription?.resume()
        })
      }
      const ended = new Promise<void>((resolve) => {
        subscription = consumeEvents(call, {
          batch(events) {
            for (const event of events.flatMap(literalTexts)) if (event.type === "text") texts++
            if (texts > 0) pause()
          },
          end() {
            finished = true
            resolve()
          },
          error(cause) {
            failure = cause
            resolve()
          },
        })
      })
      if (texts > 0) pause()
      await ended
      expect(failure).toBeUndefined()
      // The own client pauses the socket: the upstream gets to send what the kernel's buffers hold.
      // Fetch reads ahead into its own buffer first, by as much as the machine's load lets it before
      // the pause is taken (a loaded CI run: ~31 of the ~45 MB): bounded there, not small.
      expect(sentWhilePaused).toBeLessThan(name === "http1" ? UPSTREAM_BYTES / 2 : UPSTREAM_BYTES * 0.8)
      // Paused, the upstream sent nothing more until the stream was resumed.
      expect(sentAtResume).toBe(sentWhilePaused)
      expect(finished).toBe(true)
      expect(texts).toBe(TOKENS)
    }, 60_000)
  })
}
