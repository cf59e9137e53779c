/**
 * What a stream whose client reads nothing makes the gateway produce, and so hold (issue 19, §2:
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
const neverRead = (to: TestGateway): Promise<void> =>
  new Promise((resolve) => {
    const body = JSON.stringify({ model: "test/long", input: "go", stream: true, max_output_tokens: TOKENS })
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

/** The record of the one stream of this file (its id went out in a head the client never read). */
const theRecord = (to: TestGateway) =>
  to.server.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ outputTokens: number; cancelled: number }>`
      SELECT output_tokens AS "outputTokens", cancelled FROM generations WHERE model = 'test/long'`),
  )

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

describe("server.send_buffer_bytes and server.upstream_receive_buffer_bytes", () => {
  test("take 0 (the kernel's autotuning) or 4 KB to 64 MB; anything else is refused, naming the field and the rule", () => {
    const parse = (server: Record<string, unknown>) => parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], server }))
    expect(Either.isRight(parse({ send_buffer_bytes: 0, upstream_receive_buffer_bytes: 65536 }))).toBe(true)
    for (const [field, value] of [
      ["send_buffer_bytes", 100],
      ["upstream_receive_buffer_bytes", -1],
      ["send_buffer_bytes", 1.5],
      ["upstream_receive_buffer_bytes", 128 * 1024 * 1024],
    ] as const) {
      const bad = parse({ [field]: value })
      expect(Either.isLeft(bad) && bad.left.message).toContain(`server.${field}`)
      expect(Either.isLeft(bad) && bad.left.message).toMatch(/must be 0 or an integer from 4096 to 67108864|Expected an integer/)
    }
  })
})
