/**
 * What an upstream stream keeps of its reads (part of what a stream whose client reads
 * nothing holds). A connection's kernel receive buffer is fixed when asked, so one read of a fast
 * upstream is bounded by it, not by Bun's 512 KB read buffer; and the Chat Completions
 * translator's learned template does not keep the read it was learned from.
 */
import { describe, expect, test } from "bun:test"
import { heapStats } from "bun:jsc"
import { http1Transport, type UpstreamResponse } from "../../src/providers/http1"
import { ChatStreamTranslator } from "../../src/providers/openai-chat/stream"
import { PlainAbort } from "../../src/providers/abort"
import type { ProviderEvent } from "../../src/providers/types"

/**
 * The largest read of an answer that the reader paused at once and resumed once the upstream had
 * filled every buffer between them: one read is then as large as the kernel lets it be.
 */
const largestRead = async (receiveBufferBytes: number | undefined): Promise<number> => {
  const upstream = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(socket) {
        // 8 MB of body in 64 KB chunks, written as fast as the socket takes them.
        const piece = Buffer.alloc(64 * 1024, "x")
        const frame = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
        let body = Buffer.from("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
        for (let i = 0; i < 128; i++) body = Buffer.concat([body, frame])
        body = Buffer.concat([body, Buffer.from("0\r\n\r\n")])
        let at = socket.write(body)
        const more = () => {
          if (at < body.length) at += Math.max(0, socket.write(body.subarray(at)))
        }
        ;(socket as unknown as { more: () => void }).more = more
      },
      drain(socket) {
        ;(socket as unknown as { more?: () => void }).more?.()
      },
    },
  })
  try {
    const transport = http1Transport()
    const response: UpstreamResponse = await transport({
      url: `http://127.0.0.1:${upstream.port}/`,
      headers: {},
      body: "{}",
      signal: new PlainAbort(),
      receiveBufferBytes,
    })
    let read = 0
    let largest = 0
    let resumed = false
    const ended = new Promise<void>((resolve, reject) => {
      response.pipe({
        data: (_bytes, start, end) => {
          read += end - start
        },
        read: () => {
          // Reads before the pause are whatever came with the head; only those after it count.
          if (resumed) largest = Math.max(largest, read)
          read = 0
        },
        end: resolve,
        error: reject,
      })
    })
    response.pause()
    // Long enough for the upstream to fill its send buffer and our receive buffer.
    await Bun.sleep(300)
    resumed = true
    response.resume()
    await ended
    return largest
  } finally {
    upstream.stop(true)
  }
}

describe("an upstream connection's receive buffer", () => {
  test("fixed at 64 KB, no read of a fast upstream is larger than the buffer the kernel keeps for it (2 × 64 KB)", async () => {
    expect(await largestRead(64 * 1024)).toBeLessThanOrEqual(128 * 1024)
  }, 20_000)

  test("autotuned (not set), a read of the same upstream is Bun's whole 512 KB read buffer", async () => {
    expect(await largestRead(undefined)).toBeGreaterThan(256 * 1024)
  }, 20_000)
})

describe("the Chat Completions template", () => {
  test("does not keep alive the upstream read it was learned from", () => {
    const chunk = (i: number) =>
      JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: `hello ${i}` }, finish_reason: null }] })
    const decoder = new TextDecoder()
    const encoder = new TextEncoder()
    Bun.gc(true)
    const before = heapStats().heapSize
    const translators: Array<ChatStreamTranslator> = []
    for (let i = 0; i < 32; i++) {
      // The event's data is a slice of a decoded read (as the SSE parser gives it), here of 1 MB.
      const json = chunk(i)
      const read = decoder.decode(encoder.encode(`${json}${"z".repeat(1024 * 1024)}`))
      const translator = new ChatStreamTranslator()
      translator.push({ data: read.slice(0, json.length) }, [])
      translators.push(translator)
    }
    Bun.gc(true)
    const kept = heapStats().heapSize - before
    // 32 translators that each kept their read hold 32 MB.
    expect(kept).toBeLessThan(8 * 1024 * 1024)
    // Each learned its template, which still takes a chunk of the same shape in place.
    for (const [i, translator] of translators.entries()) {
      const event = encoder.encode(`data: ${chunk(i)}\n\n`)
      const out: Array<ProviderEvent> = []
      expect(translator.pushBytes(event, 0, event.length, out)).toBe(event.length)
      expect(out.map((e) => e.type)).toEqual(["text_literals"])
    }
  })
})
