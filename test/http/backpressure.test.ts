/**
 * A client that reads nothing must not make the gateway buffer the whole answer:
 * while the client's socket is full the relay stops translating and pauses its upstream, so the
 * mock upstream cannot send past what the sockets' buffers hold; when the client reads again the
 * answer goes on, whole and in order. A client that reads nothing for `server.stall_timeout_ms`
 * is cut, and its generation is recorded cancelled and charged for what was produced.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import net from "node:net"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { catalogOf, endpoint, mockProvider, model } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { settledValue } from "../support/poll.js"

/** Deltas of "tok " per answer: ~45 MB of upstream SSE (~150 bytes each), far more than the sockets between hold (~12 MB here). */
const TOKENS = 300_000
const UPSTREAM_BYTES = TOKENS * 150
const STALL_MS = 1_500

let mock: MockUpstream
/** The default stall timeout (60 s), and one of STALL_MS. */
let gw: TestGateway & { stop: () => Promise<void> }
let stallingGw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  mock = await startMockUpstream({ port: 0 })
  const catalog = catalogOf([mockProvider(mock, "long", { "x-mock-tokens": String(TOKENS) })], [model("test/long", endpoint("long", 1, 2))])
  gw = await startTestGateway({ catalog })
  stallingGw = await startTestGateway({ catalog, stallTimeoutMs: STALL_MS })
}, 30_000)
afterAll(async () => {
  await gw?.stop()
  await stallingGw?.stop()
  await mock?.stop()
})

/**
 * What a client read of a chunked SSE answer, checked as it comes (the answer is ~60 MB): the
 * events' sequence numbers in order, the text deltas, the last event, the end.
 */
class StreamCheck {
  head = ""
  events = 0
  outOfOrder = 0
  deltas = 0
  otherDeltas = 0
  lastType = ""
  lastStatus = ""
  done = false
  private raw: Buffer = Buffer.alloc(0)
  private inBody = false
  private text = ""

  feed(data: Buffer): void {
    this.raw = this.raw.length === 0 ? data : Buffer.concat([this.raw, data])
    if (!this.inBody) {
      const end = this.raw.indexOf("\r\n\r\n")
      if (end === -1) return
      this.head = this.raw.subarray(0, end).toString("latin1")
      this.raw = this.raw.subarray(end + 4)
      this.inBody = true
    }
    for (;;) {
      const lineEnd = this.raw.indexOf("\r\n")
      if (lineEnd === -1) break
      const size = Number.parseInt(this.raw.subarray(0, lineEnd).toString("latin1"), 16)
      if (size === 0) break
      if (this.raw.length < lineEnd + 2 + size + 2) break
      this.text += this.raw.subarray(lineEnd + 2, lineEnd + 2 + size).toString("utf8")
      this.raw = this.raw.subarray(lineEnd + 2 + size + 2)
    }
    let at = this.text.indexOf("\n\n")
    let from = 0
    while (at !== -1) {
      this.frame(this.text.slice(from, at))
      from = at + 2
      at = this.text.indexOf("\n\n", from)
    }
    this.text = this.text.slice(from)
  }

  private frame(frame: string): void {
    if (frame === "data: [DONE]") {
      this.done = true
      return
    }
    if (!frame.startsWith("event: ")) return
    const event = JSON.parse(frame.slice(frame.indexOf("\ndata: ") + 7)) as { type: string; sequence_number: number; delta?: string; response?: { status: string } }
    if (event.sequence_number !== this.events) this.outOfOrder++
    this.events++
    if (event.type === "response.output_text.delta") {
      if (event.delta === "tok ") this.deltas++
      else this.otherDeltas++
    }
    this.lastType = event.type
    this.lastStatus = event.response?.status ?? ""
  }
}

/** Sends a streamed request on a raw socket that reads its first chunk, then nothing until `resume`. */
const unreadStream = (to: TestGateway) => {
  const body = JSON.stringify({ model: "test/long", input: "go", stream: true })
  const check = new StreamCheck()
  const state = { closed: false }
  const socket = net.connect(to.server.port, "127.0.0.1", () => {
    socket.write(
      `POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${to.adminKey}\r\ncontent-type: application/json\r\n` +
        `connection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
  })
  let chunks = 0
  const firstChunk = new Promise<void>((resolve) => {
    socket.on("data", (data: Buffer) => {
      check.feed(data)
      if (++chunks === 1) {
        socket.pause()
        resolve()
      }
    })
  })
  socket.on("error", () => undefined)
  const ended = new Promise<void>((resolve) => {
    socket.on("close", () => {
      state.closed = true
      resolve()
    })
  })
  return { firstChunk, ended, check, state, resume: () => void socket.resume() }
}

describe("backpressure: a client that reads nothing", () => {
  test("pauses the upstream (it cannot send the whole answer), and once the client reads the answer completes whole and in order", async () => {
    mock.reset()
    const stream = unreadStream(gw)
    await stream.firstChunk
    // What the upstream could send while the client read nothing: the sockets' buffers, not the answer.
    const sent = await settledValue(() => mock.stats.sent)
    expect(mock.stats.completed).toBe(0)
    expect(sent).toBeLessThan(UPSTREAM_BYTES / 2)

    stream.resume()
    await stream.ended
    expect(mock.stats.completed).toBe(1)
    const check = stream.check
    expect(check.done).toBe(true)
    // In order: sequence numbers 0, 1, 2, … with none missing; every delta there once.
    expect(check.outOfOrder).toBe(0)
    expect(check.deltas).toBe(TOKENS)
    expect(check.otherDeltas).toBe(0)
    expect([check.lastType, check.lastStatus]).toEqual(["response.completed", "completed"])
  }, 60_000)

  test("is cut after the stall timeout; its generation is recorded cancelled and charged for what was produced", async () => {
    mock.reset()
    const stream = unreadStream(stallingGw)
    await stream.firstChunk
    // The gateway closes the connection; the client never read past its first chunk.
    await Promise.race([stream.ended, Bun.sleep(STALL_MS * 10)])
    expect(stream.state.closed).toBe(true)
    const head = stream.check.head
    const id = /x-generation-id: (\S+)/i.exec(head)?.[1]
    expect(id).toBeDefined()
    await stallingGw.server.drain()
    const res = await stallingGw.fetch(`/v1/generation?id=${id}`)
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as { data: { cancelled: boolean; tokens_completion: number; total_cost: number } }
    expect(data.cancelled).toBe(true)
    expect(data.tokens_completion).toBeGreaterThan(0)
    expect(data.total_cost).toBeGreaterThan(0)
    // The upstream was dropped too, not left paused.
    expect(await settledValue(() => mock.stats.aborted)).toBe(1)
    expect(mock.stats.completed).toBe(0)
  }, 60_000)
})
