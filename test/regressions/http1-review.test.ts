/**
 * Review findings on the HTTP/1.1 upstream client (src/providers/http1.ts) and the shared caller
 * (src/providers/http.ts). Each test states what should happen; they fail on the code as reviewed.
 */
import { afterAll, describe, expect, test } from "bun:test"
import net from "node:net"
import type { TCPSocketListener } from "bun"
import { httpProvider } from "../../src/providers/http"
import { http1Transport } from "../../src/providers/http1"
import { openAiChatWire } from "../../src/providers/openai-chat/adapter"
import type { ProviderError } from "../../src/providers/types"
import { configFor, textRequest } from "../providers/helpers"

const settledWithin = <T>(promise: Promise<T>, ms: number): Promise<{ value?: T; error?: unknown } | "pending"> =>
  Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), Bun.sleep(ms).then(() => "pending" as const)])

const listeners: Array<TCPSocketListener<unknown>> = []
afterAll(() => {
  for (const listener of listeners) listener.stop(true)
})

describe("the connect step is not bounded by the deadline or the caller's abort", () => {
  // Bun.connect delayed by 1.5 s stands in for a SYN to a black-holed address or a slow DNS lookup
  // (with a real black hole Linux gives up only after ~127 s). fetch() aborts its connect; Bun.connect cannot.
  const withSlowConnect = async (run: () => Promise<void>) => {
    const original = Bun.connect
    ;(Bun as { connect: unknown }).connect = async (options: unknown) => {
      await Bun.sleep(1500)
      return original(options as Parameters<typeof original>[0])
    }
    try {
      await run()
    } finally {
      ;(Bun as { connect: unknown }).connect = original
    }
  }
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  listeners.push(listener as TCPSocketListener<unknown>)

  test("timeout_ms 200: open() rejects with kind \"timeout\" well before the connect completes", async () => {
    await withSlowConnect(async () => {
      const provider = httpProvider(openAiChatWire, http1Transport())
      const opened = provider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${listener.port}/v1`, {}, 200), {
        stream: true,
        signal: new AbortController().signal,
      })
      const outcome = await settledWithin(opened, 800)
      expect(outcome).not.toBe("pending")
      if (outcome !== "pending") expect((outcome.error as ProviderError).kind).toBe("timeout")
      await opened.catch(() => undefined)
    })
  })

  test("the caller's abort (client gone / request deadline) ends open() at once", async () => {
    await withSlowConnect(async () => {
      const provider = httpProvider(openAiChatWire, http1Transport())
      const caller = new AbortController()
      setTimeout(() => caller.abort(new Error("client disconnected")), 100)
      const opened = provider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${listener.port}/v1`), { stream: true, signal: caller.signal })
      const outcome = await settledWithin(opened, 800)
      expect(outcome).not.toBe("pending")
      await opened.catch(() => undefined)
    })
  })
})

describe("a reset in the middle of a body read until the close", () => {
  /** Answers head + a truncated JSON body without length, then resets the connection (RST). */
  const resettingUpstream = async (): Promise<{ port: number; close: () => void }> => {
    // pauseOnConnect: the request stays unread in the kernel, so destroy() sends a RST, not a FIN.
    const server = net.createServer({ pauseOnConnect: true }, (socket) => {
      setTimeout(() => {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"choices":[{"message":{"content":"trunc')
        setTimeout(() => socket.destroy(), 30)
      }, 30)
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return { port: (server.address() as net.AddressInfo).port, close: () => server.close() }
  }

  test("text() rejects instead of resolving with the truncated body", async () => {
    const upstream = await resettingUpstream()
    try {
      const response = await http1Transport()({ url: `http://127.0.0.1:${upstream.port}/x`, headers: {}, body: "{}", signal: new AbortController().signal })
      const outcome = await settledWithin(response.text(), 1000)
      expect(outcome).not.toBe("pending")
      if (outcome !== "pending") expect(outcome.error).toBeInstanceOf(Error)
    } finally {
      upstream.close()
    }
  })

  // Not a regression: Bun's fetch also takes the RST as the end of the body. The new client has the
  // ECONNRESET in hand (close(socket, error)) and could tell the truncation apart.
  test("a non-streamed call fails with kind \"connection\", not \"server\" (not JSON)", async () => {
    const upstream = await resettingUpstream()
    try {
      const provider = httpProvider(openAiChatWire, http1Transport())
      const opened = provider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${upstream.port}/v1`), { stream: false, signal: new AbortController().signal })
      const outcome = await settledWithin(opened, 1000)
      expect(outcome).not.toBe("pending")
      if (outcome !== "pending") expect((outcome.error as ProviderError).kind).toBe("connection")
    } finally {
      upstream.close()
    }
  })
})

describe("the stale-connection retry", () => {
  test("a request the upstream received and worked on for 300 ms before dropping the connection is not sent again", async () => {
    const bodies: Array<string> = []
    let connections = 0
    const listener = Bun.listen<{ buffer: string; count: number }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open(socket) {
          connections++
          socket.data = { buffer: "", count: 0 }
        },
        data(socket, bytes) {
          socket.data.buffer += bytes.toString()
          const end = socket.data.buffer.indexOf("\r\n\r\n")
          if (end === -1) return
          const length = Number(/content-length: (\d+)/i.exec(socket.data.buffer)?.[1] ?? 0)
          if (socket.data.buffer.length < end + 4 + length) return
          bodies.push(socket.data.buffer.slice(end + 4, end + 4 + length))
          socket.data.buffer = ""
          socket.data.count++
          const answer = `HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok`
          // First request on a connection: answered. Second: "generates" for 300 ms, then the process dies.
          if (socket.data.count === 1) socket.write(answer)
          else setTimeout(() => socket.end(), 300)
        },
      },
    })
    listeners.push(listener as TCPSocketListener<unknown>)
    const transport = http1Transport()
    const url = `http://127.0.0.1:${listener.port}/v1/chat/completions`
    const send = (body: string) => transport({ url, headers: {}, body, signal: new AbortController().signal })
    expect(await (await send('{"n":1}')).text()).toBe("ok")
    await settledWithin(send('{"n":2,"expensive":true}').then((response) => response.text()), 1500)
    // Expected: the upstream saw request 2 once; the caller gets a connection error and decides.
    expect(bodies.filter((body) => body.includes('"n":2'))).toHaveLength(1)
    expect(connections).toBe(1)
  })
})
