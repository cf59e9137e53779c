/**
 * What a stream whose client reads nothing makes the gateway produce, and so hold (the bound:
 * 500 such streams add ≤ 150 MB). The answer's text is kept for its terminal events
 * (`response.completed` carries the whole output), so the bound is on what is translated before
 * a write waits: the client connection's kernel send buffer is fixed (`server.send_buffer_bytes`)
 * rather than autotuned (up to 4 MB of the answer on loopback), and Bun's sink keeps ~one write.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import net from "node:net"
import { parseConfigFile } from "../../src/config/Config.js"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { detached, restOfLiteral } from "../../src/pipeline/egress.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import { setReceiveBuffer } from "../../src/providers/socket-buffers.js"
import { catalogOf, endpoint, mockProvider, model } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"

/** "tok " deltas: ~6 MB of Responses SSE (~150 bytes each), more than an autotuned send buffer takes. */
const TOKENS = 40_000
const STALL_MS = 1_500

let mock: MockUpstream
let gw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  mock = await startMockUpstream({ port: 0 })
  const catalog = catalogOf([mockProvider(mock, "long", { "x-mock-tokens": String(TOKENS) })], [model("test/long", endpoint("long", 1, 2))])
  gw = await startTestGateway({ catalog, stallTimeoutMs: STALL_MS })
}, 30_000)
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

/** Opens a streamed request on a socket that never reads; resolves once the gateway closes it (the stall cut). */
const neverRead = (to: TestGateway, model = "test/long"): Promise<void> =>
  new Promise((resolve) => {
    const body = JSON.stringify({ model, input: "go", stream: true, max_output_tokens: TOKENS })
    const socket = net.connect(to.server.port, "127.0.0.1", () => {
      socket.write(
        `POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${to.adminKey}\r\ncontent-type: application/json\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      )
      socket.pause()
    })
    socket.on("error", () => undefined)
    socket.on("close", () => resolve())
  })

/** The records of a gateway's streams (their ids went out in heads the clients never read). */
const theRecord = (to: TestGateway) =>
  to.server.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ outputTokens: number; cancelled: number }>`
      SELECT output_tokens AS "outputTokens", cancelled FROM generations WHERE model = 'test/long'`),
  )

/**
 * As `neverRead`, from a client whose own receive buffer is 4 KB (so the client's window takes
 * little of the answer): what the gateway translates is then mostly what its side holds.
 */
const neverReadNarrow = (to: TestGateway, model: string): Promise<void> =>
  new Promise((resolve) => {
    const body = JSON.stringify({ model, input: "go", stream: true, max_output_tokens: TOKENS })
    void Bun.connect({
      hostname: "127.0.0.1",
      port: to.server.port,
      socket: {
        open(socket) {
          setReceiveBuffer((socket as unknown as { readonly fd: number }).fd, 4096)
          socket.write(
            `POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${to.adminKey}\r\ncontent-type: application/json\r\n` +
              `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          )
          socket.pause()
        },
        data() {},
        close: () => resolve(),
        error: () => resolve(),
      },
    })
  })

describe("a stream whose client never reads", () => {
  test("is translated only as far as the sockets take (~200 KB of a 6 MB answer), not as far as an autotuned send buffer would (~4 MB)", async () => {
    await Promise.race([neverRead(gw), Bun.sleep(STALL_MS * 10)])
    await gw.server.drain()
    const rows = await theRecord(gw)
    expect(rows.length).toBe(1)
    const [row] = rows
    // Cut by the stall timeout, charged for what was produced: one token per "tok " delta translated.
    expect(Number(row?.cancelled)).toBe(1)
    expect(Number(row?.outputTokens)).toBeGreaterThan(0)
    // ~170 bytes of SSE per delta: 4,000 deltas are ~680 KB, over three times what the fixed buffers take.
    expect(Number(row?.outputTokens)).toBeLessThan(4_000)
  }, 30_000)
})

describe("the client connection's unsent low-water mark (server.unsent_low_water_bytes)", () => {
  let autotuned: TestGateway & { stop: () => Promise<void> }
  beforeAll(async () => {
    const catalog = catalogOf([mockProvider(mock, "long", { "x-mock-tokens": String(TOKENS) })], [model("test/long", endpoint("long", 1, 2))])
    autotuned = await startTestGateway({ catalog, stallTimeoutMs: STALL_MS, sendBufferBytes: 0, unsentLowWaterBytes: 16 * 1024 })
  }, 30_000)
  afterAll(async () => {
    await autotuned?.stop()
  })

  test("bounds what a stream whose client never reads is translated into, with the send buffer left to the kernel's autotuning", async () => {
    await Promise.race([neverRead(autotuned), Bun.sleep(STALL_MS * 10)])
    await autotuned.server.drain()
    const rows = await theRecord(autotuned)
    expect(rows.length).toBe(1)
    // Without the mark, the autotuned send buffer takes MBs of the answer (~19,000 deltas here); with
    // it, the client's window (~128 KB) and the mark, give or take a segment: ~1,100 deltas.
    expect(Number(rows[0]?.outputTokens)).toBeGreaterThan(0)
    expect(Number(rows[0]?.outputTokens)).toBeLessThan(4_000)
  }, 30_000)
})

describe("a stream of long deltas whose client never reads", () => {
  let narrow: TestGateway & { stop: () => Promise<void> }
  beforeAll(async () => {
    // 4,000-character deltas: ~4 KB of SSE each, so one upstream read holds a few dozen.
    const catalog = catalogOf(
      [mockProvider(mock, "wide", { "x-mock-tokens": "1000", "x-mock-chunk": "x".repeat(4000) })],
      [model("test/wide", endpoint("wide", 1, 2))],
    )
    narrow = await startTestGateway({ catalog, stallTimeoutMs: STALL_MS, sendBufferBytes: 4096, unsentLowWaterBytes: 4096 })
  }, 30_000)
  afterAll(async () => {
    await narrow?.stop()
  })

  test("is translated in pieces of ~12 KB that stop at the write that waits, not a whole upstream read at a time", async () => {
    for (let i = 0; i < 2; i++) await Promise.race([neverReadNarrow(narrow, "test/wide"), Bun.sleep(STALL_MS * 10)])
    await narrow.server.drain()
    const rows = await narrow.server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ outputTokens: number }>`SELECT output_tokens AS "outputTokens" FROM generations`),
    )
    expect(rows.length).toBe(2)
    for (const row of rows) {
      // 1,000 tokens per delta translated (4,000 characters ÷ 4). Here 16 deltas: what the sockets
      // took and one piece. Translated a read's worth at a time (48 deltas a piece, before), 27.
      expect(Number(row.outputTokens)).toBeGreaterThan(0)
      expect(Number(row.outputTokens)).toBeLessThanOrEqual(20_000)
    }
  }, 40_000)
})

describe("what a held stream keeps of an upstream read", () => {
  /** A read as Bun hands it over (a Buffer of its own) with two `data:` events whose literals are at [10, 20) and [40, 60). */
  const read = () => {
    const bytes = Buffer.alloc(64 * 1024, 0x78)
    const literals: ProviderEvent = { type: "text_literals", source: bytes, spans: [10, 20, 40, 60] }
    return { bytes, literals }
  }

  test("the deltas not yet translated are copied out of the read, which is not kept (Buffer#slice is a view of it)", () => {
    const { bytes, literals } = read()
    const rest = restOfLiteral(literals as Extract<ProviderEvent, { type: "text_literals" }>, 2)
    expect(rest.spans).toEqual([0, 20])
    expect(rest.source.byteLength).toBe(20)
    expect(rest.source.buffer.byteLength).toBe(20)
    expect(rest.source.buffer).not.toBe(bytes.buffer)
  })

  test("a held batch keeps copies of its literals and the rest of its events as they are", () => {
    const { bytes, literals } = read()
    const finish: ProviderEvent = { type: "finish", reason: "stop" }
    const [first, ...others] = detached([{ type: "text", delta: "a" }, literals, finish], 1)
    expect(others).toEqual([finish])
    const copy = first as Extract<ProviderEvent, { type: "text_literals" }>
    expect(copy.spans).toEqual([0, 10, 30, 50])
    expect(copy.source.buffer.byteLength).toBe(50)
    expect(copy.source.buffer).not.toBe(bytes.buffer)
    // Held again (a stream blocked twice on one batch), a copy is not copied again.
    expect(detached([copy], 0)[0]).toBe(copy)
  })
})

describe("server.send_buffer_bytes, server.upstream_receive_buffer_bytes and server.unsent_low_water_bytes", () => {
  test("take 0 (the kernel's autotuning, or no mark) or 4 KB to 64 MB; anything else is refused, naming the field and the rule", () => {
    const parse = (server: Record<string, unknown>) => parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], server }))
    expect(Either.isRight(parse({ send_buffer_bytes: 0, upstream_receive_buffer_bytes: 65536, unsent_low_water_bytes: 0 }))).toBe(true)
    expect(Either.isRight(parse({ unsent_low_water_bytes: 16384 }))).toBe(true)
    for (const [field, value] of [
      ["send_buffer_bytes", 100],
      ["upstream_receive_buffer_bytes", -1],
      ["send_buffer_bytes", 1.5],
      ["upstream_receive_buffer_bytes", 128 * 1024 * 1024],
      ["unsent_low_water_bytes", 1],
      ["unsent_low_water_bytes", "16k"],
    ] as const) {
      const bad = parse({ [field]: value })
      expect(Either.isLeft(bad) && bad.left.message).toContain(`server.${field}`)
      expect(Either.isLeft(bad) && bad.left.message).toMatch(/must be 0 or an integer from 4096 to 67108864|Expected an integer|Expected number/)
    }
  })
})
