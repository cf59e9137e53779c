/**
 * The HTTP/1.1 upstream client (src/providers/http1.ts) against scripted raw-TCP upstreams that
 * decide every byte of the answer, how it is split across writes and when the connection closes:
 * response framing (chunked read one byte at a time, Content-Length, until-close, 204, interim
 * 1xx heads), the body sink protocol, keep-alive reuse and the stale-connection retry, aborts and
 * cancels, closes in the middle of a body, the exact request it sends, protocol errors, refused
 * connections, TLS with a private CA, and the choice between it and `fetchTransport`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Server, Socket, TCPSocketListener } from "bun"
import {
  type BodySink,
  defaultTransport,
  fetchTransport,
  http1Transport,
  type Transport,
  type UpstreamResponse,
  UpstreamProtocolError,
} from "../../src/providers/http1"

// ------------------------------------------------------------------ small helpers

const encoder = new TextEncoder()

interface Deferred<T> {
  readonly promise: Promise<T>
  resolve(value: T): void
}

const deferred = <T>(): Deferred<T> => {
  let resolve: (value: T) => void = () => undefined
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve: (value) => resolve(value) }
}

/** `promise`, or a failure naming `what` if it has not settled after `ms`. */
const within = <T>(promise: Promise<T>, what: string, ms = 1000): Promise<T> =>
  Promise.race([
    promise,
    Bun.sleep(ms).then((): never => {
      throw new Error(`${what}: not within ${ms} ms`)
    }),
  ])

const concat = (...parts: Array<string | Uint8Array>): Uint8Array => Buffer.concat(parts.map((part) => (typeof part === "string" ? encoder.encode(part) : part)))

/** A complete answer with a Content-Length body. */
const ok = (body: string, extraHead = ""): string => `HTTP/1.1 200 OK\r\n${extraHead}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

const call = (transport: Transport, url: string, options: { headers?: Record<string, string>; body?: string; signal?: AbortSignal } = {}): Promise<UpstreamResponse> =>
  transport({ url, headers: options.headers ?? {}, body: options.body ?? "{}", signal: options.signal ?? new AbortController().signal })

/** A sink that records what it is told: event names in order, the bytes, and how it settled. */
const recorder = () => {
  const events: Array<"data" | "read" | "end" | "error"> = []
  const chunks: Array<Uint8Array> = []
  const settled = deferred<Error | undefined>()
  const firstData = deferred<void>()
  const sink: BodySink = {
    data(bytes, start, end) {
      events.push("data")
      chunks.push(bytes.slice(start, end))
      firstData.resolve()
    },
    read() {
      events.push("read")
    },
    end() {
      events.push("end")
      settled.resolve(undefined)
    },
    error(cause) {
      events.push("error")
      settled.resolve(cause)
    },
  }
  return {
    sink,
    events,
    chunks: () => chunks.map((chunk) => new TextDecoder().decode(chunk)),
    text: () => new TextDecoder().decode(Buffer.concat(chunks)),
    settled: settled.promise,
    firstData: firstData.promise,
  }
}

// ------------------------------------------------------------------ a scripted upstream

/** A request as the upstream received it. */
interface Received {
  readonly line: string
  /** In arrival order, names lower-cased. */
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: string
}

const headerValues = (request: Received | undefined, name: string): Array<string> =>
  (request?.headers ?? []).filter(([key]) => key === name).map(([, value]) => value)

/** One accepted connection, as the upstream sees it. */
class Peer {
  /** Bytes received on this connection. */
  bytes = 0
  isClosed = false
  /** Bytes not yet parsed, and how many there must be before parsing again is worth it. */
  private pending: Array<Uint8Array> = []
  private pendingBytes = 0
  private needed = 0
  private readonly queue: Array<Received> = []
  private waiting: ((request: Received) => void) | undefined
  private readonly closing = deferred<void>()

  constructor(
    private readonly socket: Socket<Peer>,
    readonly index: number,
    private readonly log: Array<Received>,
  ) {}

  /** Resolves when the connection has closed (from either side). */
  get closed(): Promise<void> {
    return this.closing.promise
  }

  receive(bytes: Uint8Array): void {
    this.bytes += bytes.length
    this.pending.push(bytes.slice())
    this.pendingBytes += bytes.length
    if (this.pendingBytes < this.needed) return
    let buffered = Buffer.concat(this.pending)
    for (;;) {
      const end = buffered.indexOf("\r\n\r\n")
      if (end === -1) break
      const lines = buffered.toString("latin1", 0, end).split("\r\n")
      const headers = lines.slice(1).map((line) => {
        const colon = line.indexOf(":")
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()] as const
      })
      const total = end + 4 + Number(headers.find(([name]) => name === "content-length")?.[1] ?? "0")
      if (buffered.length < total) {
        this.needed = total
        break
      }
      const request: Received = { line: lines[0] ?? "", headers, body: buffered.toString("utf8", end + 4, total) }
      buffered = buffered.subarray(total)
      this.needed = 0
      this.log.push(request)
      const waiting = this.waiting
      this.waiting = undefined
      if (waiting !== undefined) waiting(request)
      else this.queue.push(request)
    }
    this.pending = [buffered]
    this.pendingBytes = buffered.length
  }

  onClose(): void {
    this.isClosed = true
    this.closing.resolve()
  }

  /** The next complete request on this connection (never resolves if none comes). */
  nextRequest(): Promise<Received> {
    const queued = this.queue.shift()
    if (queued !== undefined) return Promise.resolve(queued)
    return new Promise((resolve) => {
      this.waiting = resolve
    })
  }

  /** Writes each part on its own, pausing after each so that it arrives as its own network read. */
  async send(...parts: Array<string | Uint8Array>): Promise<void> {
    for (const part of parts) {
      if (this.isClosed) return
      this.socket.write(part)
      this.socket.flush()
      await Bun.sleep(1)
    }
  }

  /** Writes `data` one byte per write. */
  async sendBytewise(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? encoder.encode(data) : data
    for (let i = 0; i < bytes.length; i++) await this.send(bytes.subarray(i, i + 1))
  }

  /** Closes the connection (FIN) after what was written. */
  end(): void {
    this.socket.end()
  }
}

interface Upstream {
  readonly port: number
  /** Accepted connections, in order. */
  readonly peers: Array<Peer>
  /** Requests received on all connections, in order. */
  readonly requests: Array<Received>
  url(path?: string): string
}

const listeners: Array<TCPSocketListener<Peer>> = []
afterAll(() => {
  for (const listener of listeners) listener.stop(true)
})

/** A raw TCP upstream on 127.0.0.1 running `script` for each accepted connection. */
const upstream = (script: (peer: Peer) => Promise<void>): Upstream => {
  const peers: Array<Peer> = []
  const requests: Array<Received> = []
  const listener = Bun.listen<Peer>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.setNoDelay(true)
        const peer = new Peer(socket, peers.length, requests)
        socket.data = peer
        peers.push(peer)
        script(peer).catch(() => peer.end())
      },
      data(socket, bytes) {
        socket.data.receive(bytes)
      },
      close(socket) {
        socket.data.onClose()
      },
    },
  })
  listeners.push(listener)
  return { port: listener.port, peers, requests, url: (path = "/v1/x") => `http://127.0.0.1:${listener.port}${path}` }
}

/** Answers every request on every connection with `answer`, each as one write. */
const always =
  (answer: string) =>
  async (peer: Peer): Promise<void> => {
    for (;;) {
      await peer.nextRequest()
      await peer.send(answer)
    }
  }

// ------------------------------------------------------------------ framing

describe("response framing", () => {
  test("a chunked answer written one byte at a time is reassembled exactly", async () => {
    const body = "ñé✓ — a chunked body read one byte at a time, with emoji 🎉 and the end"
    const bytes = encoder.encode(body)
    // The first chunk ends inside "✓" (ñ and é are 2 bytes each); sizes in both hex cases, one with an extension; a trailer.
    const wire = concat(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Trace: abc\r\n\r\n",
      "5;ext=1\r\n",
      bytes.subarray(0, 5),
      "\r\n",
      "1A\r\n",
      bytes.subarray(5, 31),
      "\r\n",
      `${(bytes.length - 31).toString(16)}\r\n`,
      bytes.subarray(31),
      "\r\n",
      "0\r\nX-Checksum: 1\r\n\r\n",
    )
    expect(bytes.length - 31).toBeGreaterThan(16)
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.sendBytewise(wire)
      await peer.nextRequest()
      await peer.send(ok("again"))
    })
    const transport = http1Transport()
    const response = await call(transport, server.url())
    expect(response.status).toBe(200)
    expect(response.statusText).toBe("OK")
    expect(response.headers.get("x-trace")).toBe("abc")
    expect(response.headers.get("X-Trace")).toBe("abc")
    expect(response.headers.get("content-length")).toBeNull()
    expect(await response.text()).toBe(body)
    // The body ended exactly at the trailer's blank line: the connection is in step for the next answer.
    expect(await (await call(transport, server.url())).text()).toBe("again")
    expect(server.peers.length).toBe(1)
  })

  test("pipe: a read() after each network read, data chunks that make up the body, one end()", async () => {
    const go = deferred<void>()
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
      await go.promise
      // Two chunks in one write: two data() calls, then one read().
      await peer.send("4\r\nabcd\r\n", "3\r\nefg\r\n2\r\nhi\r\n", "1\r\nj\r\n", "0\r\n\r\n")
    })
    const response = await call(http1Transport(), server.url())
    const sink = recorder()
    response.pipe(sink.sink)
    go.resolve()
    expect(await within(sink.settled, "end of the body")).toBeUndefined()
    expect(sink.chunks()).toEqual(["abcd", "efg", "hi", "j"])
    expect(sink.text()).toBe("abcdefghij")
    expect(sink.events.filter((event) => event === "end").length).toBe(1)
    expect(sink.events).not.toContain("error")
    // Every run of data() is closed by a read() before anything else; end() comes last.
    expect(sink.events.join(",")).toMatch(/^((data,)*read,)+end$/)
    expect(sink.events.join(",")).toContain("data,data,read")
    expect(sink.events.filter((event) => event === "read").length).toBeGreaterThanOrEqual(3)
  })

  test("a body that arrived before pipe() is delivered at once: data, read, end", async () => {
    const server = upstream(always(ok("early body")))
    const response = await call(http1Transport(), server.url())
    const sink = recorder()
    response.pipe(sink.sink)
    expect(sink.events).toEqual(["data", "read", "end"])
    expect(sink.text()).toBe("early body")
  })

  test("chunks that came in the head's read, before pipe(), are each delivered intact, then read and end", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst \r\n7\r\nsecond \r\n5\r\nthird\r\n0\r\n\r\n")
    })
    const response = await call(http1Transport(), server.url())
    await Bun.sleep(5)
    const sink = recorder()
    response.pipe(sink.sink)
    expect(sink.chunks()).toEqual(["first ", "second ", "third"])
    expect(sink.events).toEqual(["data", "data", "data", "read", "end"])
  })

  test("a body that arrives over several reads before pipe() is kept intact", async () => {
    const sent = deferred<void>()
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
      await peer.send("6\r\nfirst \r\n", "7\r\nsecond \r\n", "5\r\nthird\r\n")
      sent.resolve()
    })
    const response = await call(http1Transport(), server.url())
    await within(sent.promise, "the body being sent")
    await Bun.sleep(5)
    const sink = recorder()
    response.pipe(sink.sink)
    expect(sink.chunks()).toEqual(["first ", "second ", "third"])
    expect(sink.events).toEqual(["data", "data", "data", "read"])
    await server.peers[0]?.send("0\r\n\r\n")
    expect(await within(sink.settled, "the end")).toBeUndefined()
    expect(sink.text()).toBe("first second third")
  })

  test("a Content-Length body split across writes; repeated headers are joined", async () => {
    const body = "{\"answer\":\"naïve ✓\"}"
    const bytes = encoder.encode(body)
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send(`HTTP/1.1 201 Created\r\nContent-Length: ${bytes.length}\r\nX-Many: a\r\nx-many: b\r\n\r\n`, bytes.subarray(0, 13), bytes.subarray(13))
    })
    const response = await call(http1Transport(), server.url())
    expect(response.status).toBe(201)
    expect(response.statusText).toBe("Created")
    expect(response.headers.get("x-many")).toBe("a, b")
    expect(await response.text()).toBe(body)
  })

  test("header names in any case and with blanks around them; framing read from them; others read on demand", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send(
        "HTTP/1.1 200 OK\r\nCONTENT-TYPE:  application/json \r\nTransfer-Encoding : chunked\r\nContent-TypeX: no\r\n" +
          "x-Ratelimit-Remaining:\t7\r\nconnection: keep-alive\r\nContent-Type: charset=utf-8\r\nX-EMPTY:\r\n\r\n" +
          "5\r\nhello\r\n0\r\n\r\n",
      )
      await peer.nextRequest()
      await peer.send(ok("again"))
    })
    const transport = http1Transport()
    const response = await call(transport, server.url())
    // Read as chunked (Transfer-Encoding with a blank before its colon), the body is exact.
    expect(await response.text()).toBe("hello")
    expect(response.headers.get("content-type")).toBe("application/json, charset=utf-8")
    expect(response.headers.get("Transfer-Encoding")).toBe("chunked")
    expect(response.headers.get("content-typex")).toBe("no")
    expect(response.headers.get("X-RateLimit-Remaining")).toBe("7")
    expect(response.headers.get("x-empty")).toBe("")
    expect(response.headers.get("content-length")).toBeNull()
    expect(response.headers.get("retry-after")).toBeNull()
    // Kept alive: the next call goes on the same connection.
    expect(await (await call(transport, server.url())).text()).toBe("again")
    expect(server.peers.length).toBe(1)
  })

  test("text(): a body split inside a character, at every byte, decodes whole", async () => {
    const body = '{"t":"naïve ✓ 🎉"}'
    const bytes = encoder.encode(body)
    const server = upstream(async (peer) => {
      for (let cut = 1; cut < bytes.length; cut++) {
        await peer.nextRequest()
        await peer.send(`HTTP/1.1 200 OK\r\ncontent-length: ${bytes.length}\r\n\r\n`, bytes.subarray(0, cut))
        await Bun.sleep(1)
        await peer.send(bytes.subarray(cut))
      }
    })
    const transport = http1Transport()
    for (let cut = 1; cut < bytes.length; cut++) {
      expect([cut, await (await call(transport, server.url())).text()]).toEqual([cut, body])
    }
  })

  test("a body with neither length nor chunked ends at the close, and its connection is not reused", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      if (peer.index === 0) await peer.send("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n", "part one, ", "part two")
      else await peer.send(ok("second"))
    })
    const transport = http1Transport()
    const response = await call(transport, server.url())
    const sink = recorder()
    response.pipe(sink.sink)
    await within(sink.firstData, "first data")
    await Bun.sleep(10)
    // Not over until the upstream closes.
    expect(sink.events).not.toContain("end")
    server.peers[0]?.end()
    expect(await within(sink.settled, "end at close")).toBeUndefined()
    expect(sink.text()).toBe("part one, part two")
    expect(await (await call(transport, server.url())).text()).toBe("second")
    expect(server.peers.length).toBe(2)
  })

  test("a 204 has no body, and the connection stays in step", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 204 No Content\r\nx-id: 1\r\n\r\n")
      await peer.nextRequest()
      await peer.send(ok("after"))
    })
    const transport = http1Transport()
    const response = await call(transport, server.url())
    expect(response.status).toBe(204)
    expect(await within(response.text(), "204 body")).toBe("")
    expect(await (await call(transport, server.url())).text()).toBe("after")
    expect(server.peers.length).toBe(1)
  })

  test("interim 100 and 103 heads are skipped, whether in their own writes or in one", async () => {
    const interim = ["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"]
    const final = "HTTP/1.1 200 OK\r\nX-Final: yes\r\nContent-Length: 2\r\n\r\nok"
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send(...interim, final)
      await peer.nextRequest()
      await peer.send(interim.join("") + final)
      await peer.nextRequest()
      await peer.sendBytewise(interim.join("") + final)
    })
    const transport = http1Transport()
    for (let i = 0; i < 3; i++) {
      const response = await call(transport, server.url())
      expect(response.status).toBe(200)
      expect(response.statusText).toBe("OK")
      expect(response.headers.get("x-final")).toBe("yes")
      expect(response.headers.get("link")).toBeNull()
      expect(await response.text()).toBe("ok")
    }
    expect(server.peers.length).toBe(1)
  })
})

// ------------------------------------------------------------------ connections

describe("keep-alive", () => {
  test("two sequential calls to one origin share one connection", async () => {
    const server = upstream(always(ok("same")))
    const transport = http1Transport()
    expect(await (await call(transport, server.url(), { body: "1" })).text()).toBe("same")
    expect(await (await call(transport, server.url("/other"), { body: "2" })).text()).toBe("same")
    expect(server.peers.length).toBe(1)
    expect(server.requests.map((request) => request.body)).toEqual(["1", "2"])
    expect(server.peers[0]?.isClosed).toBe(false)
  })

  test("after `Connection: close` the next call opens a new connection, and the client closes the old one", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      // The upstream does not close: the client must.
      await peer.send(ok("bye", "Connection: close\r\n"))
    })
    const transport = http1Transport()
    expect(await (await call(transport, server.url())).text()).toBe("bye")
    await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the client closes the connection")
    expect(await (await call(transport, server.url())).text()).toBe("bye")
    expect(server.peers.length).toBe(2)
  })

  test("an HTTP/1.0 answer without keep-alive is not reused; with keep-alive it is", async () => {
    const plain = upstream(always("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    const transport = http1Transport()
    expect(await (await call(transport, plain.url())).text()).toBe("ok")
    await within(plain.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the client closes the HTTP/1.0 connection")
    expect(await (await call(transport, plain.url())).text()).toBe("ok")
    expect(plain.peers.length).toBe(2)

    const kept = upstream(always("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"))
    expect(await (await call(transport, kept.url())).text()).toBe("ok")
    expect(await (await call(transport, kept.url())).text()).toBe("ok")
    expect(kept.peers.length).toBe(1)
  })

  test("bytes after the end of an answer, or on an idle connection: that connection is not reused", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      if (peer.index === 0) await peer.send(`${ok("one")}HTTP/1.1 200 OK\r\n`)
      else if (peer.index === 1) await peer.send(ok("two"), "unasked")
      else await peer.send(ok("three"))
    })
    const transport = http1Transport()
    expect(await (await call(transport, server.url())).text()).toBe("one")
    await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the client closing the first connection")
    expect(await (await call(transport, server.url())).text()).toBe("two")
    await within(server.peers[1]?.closed ?? Promise.reject(new Error("no connection")), "the client closing the second connection")
    expect(await (await call(transport, server.url())).text()).toBe("three")
    expect(server.peers.length).toBe(3)
  })

  test("a kept-alive connection closed before any byte of the answer: the call is sent again on a new one", async () => {
    const server = upstream(async (peer) => {
      const first = await peer.nextRequest()
      if (peer.index === 0) {
        await peer.send(ok("first"))
        await peer.nextRequest()
        peer.end()
      } else await peer.send(ok(`retried ${first.body}`))
    })
    const transport = http1Transport()
    expect(await (await call(transport, server.url(), { body: "a" })).text()).toBe("first")
    expect(await (await within(call(transport, server.url(), { body: "b" }), "the retried call")).text()).toBe("retried b")
    expect(server.peers.length).toBe(2)
    expect(server.requests.map((request) => request.body)).toEqual(["a", "b", "b"])
  })

  test("a kept-alive connection closed after part of a head: the call fails, no retry", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send(ok("first"))
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\nContent-Le")
      peer.end()
    })
    const transport = http1Transport()
    expect(await (await call(transport, server.url())).text()).toBe("first")
    await expect(call(transport, server.url())).rejects.toThrow()
    await Bun.sleep(20)
    expect(server.peers.length).toBe(1)
    expect(server.requests.length).toBe(2)
  })

  test("a new connection closed before any byte of the answer: the call fails, no retry", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      peer.end()
    })
    await expect(call(http1Transport(), server.url())).rejects.toThrow()
    await Bun.sleep(20)
    expect(server.peers.length).toBe(1)
    expect(server.requests.length).toBe(1)
  })
})

// ------------------------------------------------------------------ aborts, cancels and closes

describe("aborts and early ends", () => {
  test("an abort before the head rejects with the signal's reason and closes the connection", async () => {
    const server = upstream(async () => undefined)
    const controller = new AbortController()
    const pending = call(http1Transport(), server.url(), { signal: controller.signal })
    pending.catch(() => undefined)
    const reason = new Error("x")
    await within(
      (async () => {
        while (server.requests.length === 0) await Bun.sleep(1)
      })(),
      "the request reaching the upstream",
    )
    controller.abort(reason)
    await expect(pending).rejects.toBe(reason)
    await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the upstream seeing the close")
  })

  test("an already aborted signal rejects with its reason and sends nothing", async () => {
    const server = upstream(always(ok("unused")))
    const controller = new AbortController()
    const reason = new Error("before")
    controller.abort(reason)
    await expect(call(http1Transport(), server.url(), { signal: controller.signal })).rejects.toBe(reason)
    await Bun.sleep(10)
    expect(server.requests.length).toBe(0)
    expect(server.peers.every((peer) => peer.bytes === 0)).toBe(true)
  })

  test("an abort in the middle of the body fails the sink with the reason and closes the connection", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "5\r\nhello\r\n")
    })
    const controller = new AbortController()
    const response = await call(http1Transport(), server.url(), { signal: controller.signal })
    const sink = recorder()
    response.pipe(sink.sink)
    await within(sink.firstData, "the first chunk")
    const reason = new Error("x")
    controller.abort(reason)
    expect(await within(sink.settled, "the sink failing")).toBe(reason)
    expect(sink.events).not.toContain("end")
    expect(sink.text()).toBe("hello")
    await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the upstream seeing the close")
  })

  test("cancel() in the middle of the body closes the connection; the next call opens a new one", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      if (peer.index === 0) await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n", "abc")
      else await peer.send(ok("fresh"))
    })
    const transport = http1Transport()
    const response = await call(transport, server.url())
    response.cancel()
    await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "the upstream seeing the close")
    expect(await (await call(transport, server.url())).text()).toBe("fresh")
    expect(server.peers.length).toBe(2)
  })

  test("a close in the middle of a chunked body fails the sink (no end)", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", "5\r\nhello\r\n", "9\r\nhal")
      peer.end()
    })
    const response = await call(http1Transport(), server.url())
    const sink = recorder()
    response.pipe(sink.sink)
    expect(await within(sink.settled, "the sink settling")).toBeInstanceOf(Error)
    expect(sink.events).toContain("error")
    expect(sink.events).not.toContain("end")
    expect(sink.text()).toBe("hellohal")
  })

  test("a close before the end of a Content-Length body fails text()", async () => {
    const server = upstream(async (peer) => {
      await peer.nextRequest()
      await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n", "abc")
      peer.end()
    })
    const response = await call(http1Transport(), server.url())
    await expect(within(response.text(), "text()")).rejects.toThrow("closed the connection in the middle of the body")
  })
})

// ------------------------------------------------------------------ the request

describe("the request sent", () => {
  test("request line, own headers, the caller's headers, and a UTF-8 body with its byte length", async () => {
    const server = upstream(always(ok("{}")))
    const body = JSON.stringify({ input: "héllo ✓ 🎉" })
    const response = await call(http1Transport(), server.url("/path?q=1"), {
      body,
      headers: {
        authorization: "Bearer t",
        "X-Custom": "v",
        Host: "evil.example",
        "Content-Length": "1",
        Connection: "close",
        "Transfer-Encoding": "chunked",
      },
    })
    expect(await response.text()).toBe("{}")
    const request = server.requests[0]
    expect(request?.line).toBe("POST /path?q=1 HTTP/1.1")
    expect(headerValues(request, "host")).toEqual([`127.0.0.1:${server.port}`])
    expect(headerValues(request, "accept-encoding")).toEqual(["identity"])
    expect(headerValues(request, "content-length")).toEqual([String(Buffer.byteLength(body))])
    expect(Buffer.byteLength(body)).toBeGreaterThan(body.length)
    expect(headerValues(request, "authorization")).toEqual(["Bearer t"])
    expect(headerValues(request, "x-custom")).toEqual(["v"])
    expect(headerValues(request, "connection")).toEqual([])
    expect(headerValues(request, "transfer-encoding")).toEqual([])
    expect(request?.body).toBe(body)
  })

  test("a header with a line break rejects with UpstreamProtocolError and nothing is sent", async () => {
    const server = upstream(always(ok("fine")))
    const transport = http1Transport()
    await expect(call(transport, server.url(), { headers: { "x-bad": "a\r\nx-injected: 1" } })).rejects.toBeInstanceOf(UpstreamProtocolError)
    await Bun.sleep(20)
    expect(server.peers.length).toBe(0)
    // With a kept-alive connection waiting: it receives nothing either, and stays usable.
    expect(await (await call(transport, server.url())).text()).toBe("fine")
    const sent = server.peers[0]?.bytes
    await expect(call(transport, server.url(), { headers: { "x-bad\n": "a" } })).rejects.toBeInstanceOf(UpstreamProtocolError)
    await Bun.sleep(20)
    expect(server.peers[0]?.bytes).toBe(sent)
    expect(await (await call(transport, server.url())).text()).toBe("fine")
    expect(server.peers.length).toBe(1)
    expect(server.requests.length).toBe(2)
  })

  test("a request body larger than the socket's buffer is sent in full", async () => {
    const server = upstream(always(ok("got it")))
    const body = "x".repeat(16 * 1024 * 1024)
    const response = await within(call(http1Transport(), server.url(), { body }), "the answer to a large request", 3000)
    expect(await response.text()).toBe("got it")
    expect(server.requests[0]?.body.length).toBe(body.length)
  })
})

// ------------------------------------------------------------------ failures

describe("protocol errors and refused connections", () => {
  test("a gzip-encoded answer rejects with UpstreamProtocolError", async () => {
    const server = upstream(always("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"))
    await expect(call(http1Transport(), server.url())).rejects.toBeInstanceOf(UpstreamProtocolError)
  })

  test("a transfer-encoding other than plain chunked (e.g. gzip, chunked) rejects with UpstreamProtocolError", async () => {
    for (const encoding of ["gzip, chunked", "identity"]) {
      const server = upstream(always(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${encoding}\r\n\r\n5\r\nhello\r\n0\r\n\r\n`))
      await expect(call(http1Transport(), server.url())).rejects.toBeInstanceOf(UpstreamProtocolError)
    }
  })

  test("a header name that is not an HTTP token (a colon, a space, a NUL) rejects and nothing is sent", async () => {
    const server = upstream(always(ok("fine")))
    for (const name of ["x-a:b", "x a", "x-\0"]) {
      await expect(call(http1Transport(), server.url(), { headers: { [name]: "v" } })).rejects.toBeInstanceOf(UpstreamProtocolError)
    }
    await Bun.sleep(20)
    expect(server.peers.length).toBe(0)
  })

  test("a malformed chunk size fails the body with UpstreamProtocolError", async () => {
    for (const size of ["zz", "5g"]) {
      const server = upstream(always(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${size}\r\nhello\r\n0\r\n\r\n`))
      const response = await call(http1Transport(), server.url())
      const sink = recorder()
      response.pipe(sink.sink)
      expect(await within(sink.settled, `the sink settling after ${size}`)).toBeInstanceOf(UpstreamProtocolError)
      expect(sink.events).not.toContain("end")
      expect(sink.events).not.toContain("data")
    }
  })

  test("Content-Length values that disagree, or are not a length, reject at once (they waited for the timeout); agreeing repeats are one", async () => {
    for (const lengths of ["5\r\nContent-Length: 3", "5, 3", "-5", "5x"]) {
      const server = upstream(always(`HTTP/1.1 200 OK\r\nContent-Length: ${lengths}\r\n\r\nhello`))
      await expect(call(http1Transport(), server.url())).rejects.toBeInstanceOf(UpstreamProtocolError)
    }
    const agreeing = upstream(always("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"))
    expect(await (await call(http1Transport(), agreeing.url())).text()).toBe("hello")
  })

  test("a status line that is not HTTP/1.x rejects with UpstreamProtocolError", async () => {
    for (const head of ["HTTP/2 200\r\n\r\n", "ICY 200 OK\r\ncontent-length: 0\r\n\r\n"]) {
      const server = upstream(always(head))
      await expect(call(http1Transport(), server.url())).rejects.toBeInstanceOf(UpstreamProtocolError)
    }
  })

  test("after a protocol error the client closes the connection it can no longer use", async () => {
    // The upstream keeps every connection open; the client has no use for a connection whose answer it gave up on.
    const bad: Record<string, string> = {
      "gzip-encoded head": "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
      "HTTP/2 status line": "HTTP/2 200\r\n\r\n",
      "malformed chunk size": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
    }
    const leaked: Array<string> = []
    for (const [name, answer] of Object.entries(bad)) {
      const server = upstream(always(answer))
      const outcome = call(http1Transport(), server.url()).then((response) => response.text())
      await expect(outcome).rejects.toBeInstanceOf(UpstreamProtocolError)
      const closed = await within(server.peers[0]?.closed ?? Promise.reject(new Error("no connection")), "close", 200).then(
        () => true,
        () => false,
      )
      if (!closed) leaked.push(name)
    }
    expect(leaked).toEqual([])
  })

  test("a refused connection rejects", async () => {
    const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
    const port = closed.port
    closed.stop(true)
    await expect(within(call(http1Transport(), `http://127.0.0.1:${port}/x`), "the refusal")).rejects.toThrow()
  })

  test("a URL that is not http or https rejects with UpstreamProtocolError", async () => {
    await expect(call(http1Transport(), "ftp://127.0.0.1:1/x")).rejects.toBeInstanceOf(UpstreamProtocolError)
  })
})

// ------------------------------------------------------------------ TLS

describe("TLS", () => {
  let dir = ""
  let cert = ""
  let server: Server<undefined> | undefined
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "http1-tls-"))
    const made = Bun.spawnSync(
      ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
      { cwd: dir, stdout: "ignore", stderr: "pipe" },
    )
    if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`)
    cert = await Bun.file(join(dir, "c.pem")).text()
    const key = await Bun.file(join(dir, "k.pem")).text()
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      tls: { cert, key },
      fetch: async (request) => {
        if (new URL(request.url).pathname === "/parts") {
          // Five parts, apart in time: five reads on the client, before it pipes the body.
          const body = new ReadableStream<Uint8Array>({
            async start(controller) {
              for (let i = 0; i < 5; i++) {
                controller.enqueue(encoder.encode(`part${i};`))
                await Bun.sleep(5)
              }
              controller.close()
            },
          })
          return new Response(body)
        }
        return Response.json({ path: new URL(request.url).pathname, method: request.method, body: await request.text() })
      },
    })
  })
  afterAll(() => {
    server?.stop(true)
    if (dir !== "") rmSync(dir, { recursive: true, force: true })
  })

  test("with the certificate as CA, an https call is answered", async () => {
    const response = await within(call(http1Transport({ ca: cert }), `https://localhost:${server?.port}/x`, { body: "hello" }), "the TLS answer")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toContain("application/json")
    expect(JSON.parse(await response.text())).toEqual({ path: "/x", method: "POST", body: "hello" })
  })

  test("a body read over several TLS reads before pipe() is kept intact (each read is a buffer of its own)", async () => {
    const response = await within(call(http1Transport({ ca: cert }), `https://localhost:${server?.port}/parts`), "the TLS answer")
    await Bun.sleep(100)
    const sink = recorder()
    response.pipe(sink.sink)
    expect(await within(sink.settled, "the end")).toBeUndefined()
    expect(sink.text()).toBe("part0;part1;part2;part3;part4;")
    expect(sink.chunks().length).toBeGreaterThanOrEqual(2)
  })

  test("rejectUnauthorized: false accepts the untrusted certificate", async () => {
    const response = await within(call(http1Transport({ rejectUnauthorized: false }), `https://localhost:${server?.port}/x`, { body: "hi" }), "the unverified TLS answer")
    expect(JSON.parse(await response.text())).toEqual({ path: "/x", method: "POST", body: "hi" })
  })

  test("without it, the untrusted certificate makes the call reject, saying the handshake failed", async () => {
    await expect(within(call(http1Transport(), `https://localhost:${server?.port}/x`), "the TLS refusal")).rejects.toThrow(/TLS handshake with localhost:\d+ failed/)
  })
})

// ------------------------------------------------------------------ fetch and the choice

describe("defaultTransport and fetchTransport", () => {
  test("http1 by default and when asked for; fetch when asked for or when a proxy is set", () => {
    expect(defaultTransport({})).not.toBe(fetchTransport)
    expect(defaultTransport({ HTTPS_PROXY: "http://p:1" })).toBe(fetchTransport)
    expect(defaultTransport({ https_proxy: "http://p:1" })).toBe(fetchTransport)
    expect(defaultTransport({ http_proxy: "http://p:1" })).toBe(fetchTransport)
    expect(defaultTransport({ HTTP_PROXY: "" })).not.toBe(fetchTransport)
    expect(defaultTransport({ GATEWAY_UPSTREAM_CLIENT: "fetch" })).toBe(fetchTransport)
    expect(defaultTransport({ GATEWAY_UPSTREAM_CLIENT: "http1", HTTP_PROXY: "x" })).not.toBe(fetchTransport)
  })

  test("fetchTransport delivers a streamed body through pipe (data + read, one end) and text()", async () => {
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const sent = await request.text()
        const parts = ["one ", "two ", `three ${sent}`]
        return new Response(
          new ReadableStream<Uint8Array>({
            async pull(controller) {
              const part = parts.shift()
              if (part === undefined) return controller.close()
              controller.enqueue(encoder.encode(part))
              await Bun.sleep(2)
            },
          }),
          { status: 202, headers: { "x-kind": "stream" } },
        )
      },
    })
    try {
      const url = `http://127.0.0.1:${server.port}/s`
      const response = await call(fetchTransport, url, { body: "✓" })
      expect(response.status).toBe(202)
      expect(response.headers.get("X-Kind")).toBe("stream")
      const sink = recorder()
      response.pipe(sink.sink)
      expect(await within(sink.settled, "the fetch body")).toBeUndefined()
      expect(sink.text()).toBe("one two three ✓")
      expect(sink.events.filter((event) => event === "end").length).toBe(1)
      expect(sink.events).not.toContain("error")
      expect(sink.events.join(",")).toMatch(/^(data,read,)+end$/)
      expect(await (await call(fetchTransport, url, { body: "again" })).text()).toBe("one two three again")
    } finally {
      server.stop(true)
    }
  })
})
