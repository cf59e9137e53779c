/**
 * PushedEvents (src/providers/pushed-events.ts), the hand-on both stream readers share: an
 * iterating consumer that falls behind pauses the upstream's socket past 16 queued batches and
 * resumes it once it has caught up to half of that; a subscribed one is never paused for a queue.
 */
import { describe, expect, test } from "bun:test"
import type { UpstreamResponse } from "../../src/providers/http1"
import { PushedEvents, type ReaderLink } from "../../src/providers/pushed-events"
import type { ProviderEvent } from "../../src/providers/types"

/** The response's pause and resume as calls counted, and its socket's state. */
const fakeResponse = () => {
  const calls = { pause: 0, resume: 0, cancel: 0 }
  const response = {
    pause: () => void calls.pause++,
    resume: () => void calls.resume++,
    cancel: () => void calls.cancel++,
  } as unknown as UpstreamResponse
  return { response, calls }
}

const fakeLink = (): ReaderLink & { touched: number; closed: boolean } => ({
  paused: false,
  touched: 0,
  closed: false,
  touch() {
    this.touched++
  },
  close() {
    this.closed = true
  },
})

/** A reader whose network reads are the test's calls: one batch a read. */
class Reads extends PushedEvents {
  read(n: number): void {
    const batch: ReadonlyArray<ProviderEvent> = [{ type: "text", delta: `part ${n}` }]
    this.push(batch)
  }
  end(): void {
    this.settle({ done: true, value: undefined })
  }
}

describe("an iterated stream held back by its consumer", () => {
  test("16 queued batches pause the socket; taken down to 7 it resumes, and every batch arrives in order", async () => {
    const { response, calls } = fakeResponse()
    const link = fakeLink()
    const reads = new Reads(response, link)
    for (let i = 0; i < 15; i++) reads.read(i)
    expect(calls.pause).toBe(0)
    reads.read(15)
    expect(calls.pause).toBe(1)
    expect(link.paused).toBe(true)
    const texts: Array<string> = []
    const take = async () => {
      const step = await reads.next()
      if (step.done !== true) for (const e of step.value) if (e.type === "text") texts.push(e.delta)
    }
    // 16 queued: taking 8 leaves 8, not yet below half of the mark.
    for (let i = 0; i < 8; i++) await take()
    expect(calls.resume).toBe(0)
    expect(link.paused).toBe(true)
    await take()
    expect(calls.resume).toBe(1)
    expect(link.paused).toBe(false)
    // Resuming marks the call active again, so its silence check starts over.
    expect(link.touched).toBe(1)
    reads.read(16)
    reads.end()
    for (;;) {
      const step = await reads.next()
      if (step.done === true) break
      for (const e of step.value) if (e.type === "text") texts.push(e.delta)
    }
    expect(texts).toEqual(Array.from({ length: 17 }, (_, i) => `part ${i}`))
    expect(calls.pause).toBe(1)
  })

  test("a subscribed consumer takes each batch as it is read: no queue, no pause", () => {
    const { response, calls } = fakeResponse()
    const reads = new Reads(response, fakeLink())
    const seen: Array<number> = []
    let ended = false
    reads.subscribe({
      batch: (events) => void seen.push(events.length),
      end: () => {
        ended = true
      },
      error: (e) => {
        throw e
      },
    })
    for (let i = 0; i < 40; i++) reads.read(i)
    reads.end()
    expect(seen.length).toBe(40)
    expect(ended).toBe(true)
    expect(calls.pause).toBe(0)
  })

  test("a stream whose end is queued is not paused again, and the rest of its body is read", () => {
    const { response, calls } = fakeResponse()
    const link = fakeLink()
    const reads = new Reads(response, link)
    for (let i = 0; i < 16; i++) reads.read(i)
    expect(link.paused).toBe(true)
    reads.end()
    // The terminal event arrived: the socket reads on (the framing's end) for the connection's reuse.
    expect(calls.resume).toBe(1)
    expect(link.paused).toBe(false)
    reads.pause()
    expect(calls.pause).toBe(1)
  })
})
