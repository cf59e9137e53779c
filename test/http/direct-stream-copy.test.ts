/**
 * What the streamed-answer route relies on in Bun: a direct stream's `controller.write` of a
 * Uint8Array copies it, so the assembler's one byte buffer (`ResponseAssembler#push` hands out a
 * view of it) is written over by the next push without touching what the client gets, even while
 * the client reads nothing and the sink holds megabytes.
 */
import { afterAll, expect, test } from "bun:test"
import net from "node:net"

const WRITES = 400
const SIZE = 12 * 1024

const buffer = new Uint8Array(SIZE)
/** Writes the sink took while the socket could not: the case the test is for. */
let pending = 0
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: () =>
    new Response(
      new ReadableStream({
        type: "direct",
        pull(controller: ReadableStreamDirectController) {
          for (let i = 0; i < WRITES; i++) {
            buffer.fill(65 + (i % 26))
            const written = controller.write(buffer)
            if (typeof written !== "number") {
              pending++
              written.catch(() => undefined)
            }
            // Written over at once, as the next push does.
            buffer.fill(48)
          }
          controller.close()
        },
      } as unknown as UnderlyingDefaultSource<Uint8Array>),
    ),
})
afterAll(() => server.stop(true))

/** The body of a chunked HTTP/1.1 answer. */
const dechunk = (raw: Buffer): Buffer => {
  let at = raw.indexOf("\r\n\r\n") + 4
  const parts: Array<Buffer> = []
  for (;;) {
    const lineEnd = raw.indexOf("\r\n", at)
    const size = Number.parseInt(raw.subarray(at, lineEnd).toString("latin1"), 16)
    if (size === 0) return Buffer.concat(parts)
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size))
    at = lineEnd + 2 + size + 2
  }
}

test("bytes written to a direct stream are copied: a client that reads late gets each write as it was", async () => {
  const received: Array<Buffer> = []
  const ended = new Promise<void>((resolve, reject) => {
    const socket = net.connect(server.port as number, "127.0.0.1", () => {
      socket.write("GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
      // Read nothing for a while: the answer waits in the server's sink and the socket buffers.
      socket.pause()
      setTimeout(() => socket.resume(), 300)
    })
    socket.on("data", (data: Buffer) => received.push(data))
    socket.on("end", resolve)
    socket.on("error", reject)
  })
  await ended
  const body = dechunk(Buffer.concat(received))
  // The sink did hold writes the socket could not take yet.
  expect(pending).toBeGreaterThan(0)
  expect(body.length).toBe(WRITES * SIZE)
  for (let i = 0; i < WRITES; i++) {
    const piece = body.subarray(i * SIZE, (i + 1) * SIZE)
    expect([i, piece.every((b) => b === 65 + (i % 26))]).toEqual([i, true])
  }
})
