/**
 * Regression (found in review): the streaming deadline only aborts the upstream; the stream itself is ended (and the
 * reservation settled) by the next `pull`. A client that keeps the connection open but stops
 * reading never causes another pull (the socket is full, Bun stops reading the body stream), and
 * the server has `idleTimeout: 0`, so `end()`/`finalize` never run: the reservation (and the
 * buffered output) is held past the deadline for as long as the client likes.
 */
import { expect, test } from "bun:test"
import { Effect } from "effect"
import net from "node:net"
import { Spend } from "../../src/services/Spend.js"
import { useGateway } from "../support/gateway.js"

const gw = useGateway({ requestTimeoutMs: 500 })
const open = () => gw().server.runtime.runPromise(Effect.flatMap(Spend, (s) => s.openReservations))

test("a stalled reader does not hold its reservation past the request deadline", async () => {
  const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "stall", limit: 100 } })).json()) as { key: string }
  // A long answer: the fake echoes 200 000 words, one delta event each (~30 MB of SSE).
  const body = JSON.stringify({ model: "demo/echo", provider: { order: ["fake"] }, stream: true, input: "w ".repeat(200_000) })
  const before = await open()
  const socket = net.connect(gw().server.port, "127.0.0.1", () => {
    socket.write(
      `POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${made.key}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    )
  })
  socket.on("error", () => {})
  socket.on("data", () => {
    socket.pause() // read one chunk, then stop reading (connection stays open)
  })
  await Bun.sleep(2500) // 5x the deadline
  const held = (await open()) - before
  socket.destroy()
  await Bun.sleep(200)
  expect(held).toBe(0)
})
