/**
 * The upstream HTTP/1.1 client: keep-alive connections over `Bun.connect` (TLS for https), a
 * byte-level response parser, and a body handed to a synchronous sink chunk by chunk.
 *
 * Why not `fetch` (measured with a relay that only calls the mock upstream, Bun 1.4.5, this
 * machine class): fetch costs ~108 µs of CPU per JSON request at c=1 and ~65 µs at c=32, this
 * client ~49 and ~38. A fetch body read from JavaScript keeps a 64 KB read buffer per open
 * stream and makes several promises per chunk; here a chunk is one callback, and 2,000 held
 * streams cost ~16 KB each instead of ~36 KB. `fetchTransport` stays for what this client does
 * not do (HTTP proxies from the environment): see `defaultTransport`.
 *
 * What it does not do: HTTP/2, request pipelining, proxies, compressed bodies (it asks for
 * `identity`; a compressed answer fails clearly). A body's reader may pause it (`pause`, the
 * socket stops reading: Bun 1.4.5), so a client that reads slowly slows its upstream instead of
 * filling the gateway's memory. Connections per origin are capped (`maxConnections`, default
 * 512); calls beyond the cap wait in line for one to free. A new connection's kernel receive
 * buffer may be fixed (`receiveBufferBytes`): autotuned, one read of a fast upstream was Bun's
 * whole 512 KB read buffer, which a stream paused part way through it kept (socket-buffers.ts).
 */
import type { Socket } from "bun"
import type { AbortLike } from "./abort"
import { setReceiveBuffer } from "./socket-buffers"
import { ProviderError } from "./types"

/**
 * Where a body goes. A chunk is `bytes[start, end)`, valid only during the call: decode or copy
 * it there. It comes as a range of the read, not a view of its own: a streamed answer has one
 * chunk per event (the chunked encoding), and a view per chunk cost ~90 ns. One network read may
 * hold many chunks; `read` follows the last of them, so a sink can do its work once per read.
 */
export interface BodySink {
  data(bytes: Uint8Array, start: number, end: number): void
  read(): void
  end(): void
  error(cause: Error): void
}

/** The headers of an answer, read by name (lower case). */
export interface HeaderReader {
  get(name: string): string | null
}

export interface UpstreamResponse {
  readonly status: number
  readonly statusText: string
  readonly headers: HeaderReader
  /** Sends the body to `sink`; what arrived before is delivered at once. Call once. */
  pipe(sink: BodySink): void
  /** The whole body as text (UTF-8); a body over `maxBytes` is dropped and fails (a "server" ProviderError). */
  text(maxBytes?: number): Promise<string>
  /** Drops the answer: its connection is closed, not reused. */
  cancel(): void
  /** Stops reading the body (what has been read is still delivered) until `resume`. */
  pause(): void
  resume(): void
}

export interface UpstreamRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  /** Aborting closes the connection and fails the request or its body with the signal's reason. */
  readonly signal: AbortLike
  /** Connections to the URL's origin at most (default 512); a call beyond waits for one to free. */
  readonly maxConnections?: number
  /** The kernel receive buffer of a new connection, which bounds one read (absent or 0: autotuned). */
  readonly receiveBufferBytes?: number | undefined
}

export type Transport = (request: UpstreamRequest) => Promise<UpstreamResponse>

export class UpstreamProtocolError extends Error {}

// ------------------------------------------------------------------ the answer

/**
 * Header names read while the head is parsed: the framing ones, and content-type, which every
 * caller asks for. Any other header is read from the head's text on the first `get` for it: a
 * map of every header was ~1.3 µs per answer, with four headers (micro-benchmark, Bun 1.4.5).
 */
const KNOWN_HEADERS = ["connection", "content-type", "content-length", "content-encoding", "transfer-encoding"] as const
const CONNECTION = 0
const CONTENT_LENGTH = 2
const CONTENT_ENCODING = 3
const TRANSFER_ENCODING = 4

/** Which of KNOWN_HEADERS `head[start, end)` names (ASCII case ignored, surrounding spaces or tabs trimmed), or -1. */
const knownHeader = (head: string, start: number, end: number): number => {
  let from = start
  let to = end
  while (from < to && isBlank(head.charCodeAt(from))) from++
  while (to > from && isBlank(head.charCodeAt(to - 1))) to--
  const length = to - from
  for (let k = 0; k < KNOWN_HEADERS.length; k++) {
    const name = KNOWN_HEADERS[k] as string
    if (name.length !== length) continue
    let i = 0
    // Lower-cases letters; the names' other characters ('-') are unchanged by the OR.
    while (i < length && (head.charCodeAt(from + i) | 0x20) === name.charCodeAt(i)) i++
    if (i === length) return k
  }
  return -1
}

const isBlank = (c: number) => c === 32 || c === 9

/** Calls `found` for each header line after `from` (the end of the status line), with its value trimmed. */
const eachHeader = (head: string, from: number, found: (nameStart: number, nameEnd: number, value: string) => void): void => {
  for (let start = from; start !== -1 && start < head.length; ) {
    const next = head.indexOf("\r\n", start + 2)
    const end = next === -1 ? head.length : next
    const colon = head.indexOf(":", start + 2)
    if (colon !== -1 && colon < end) found(start + 2, colon, head.slice(colon + 1, end).trim())
    start = next
  }
}

const DIGITS = /^\d+$/

/**
 * The length of a repeated Content-Length whose values agree ("42, 42"); undefined for any other
 * list or value, a framing no body can be read by (RFC 9112, 6.3): read until close, such an
 * answer waited for the provider's timeout.
 */
const agreedLength = (raw: string): string | undefined => {
  const values = raw.split(",").map((v) => v.trim())
  const first = values[0] as string
  return DIGITS.test(first) && values.every((v) => v === first) ? first : undefined
}

/** A repeated header's values, joined as one. */
const joined = (seen: string | undefined, value: string) => (seen === undefined ? value : `${seen}, ${value}`)

class Headers1 implements HeaderReader {
  private others: Map<string, string> | undefined
  constructor(
    /** The head's text, and where its header lines begin. */
    private readonly head: string,
    private readonly from: number,
    /** The values of KNOWN_HEADERS, by index. */
    private readonly known: ReadonlyArray<string | undefined>,
  ) {}

  get(name: string): string | null {
    const lower = name.toLowerCase()
    const k = (KNOWN_HEADERS as ReadonlyArray<string>).indexOf(lower)
    if (k !== -1) return this.known[k] ?? null
    if (this.others === undefined) {
      const others = new Map<string, string>()
      const head = this.head
      eachHeader(head, this.from, (nameStart, nameEnd, value) => {
        const key = head.slice(nameStart, nameEnd).trim().toLowerCase()
        others.set(key, joined(others.get(key), value))
      })
      this.others = others
    }
    return this.others.get(lower) ?? null
  }
}

const bufferText = Buffer.prototype.toString

/**
 * The body as text. A chunk that starts and ends on a character boundary (its last byte is ASCII,
 * as a JSON body's is) is decoded on its own, one native call; a TextDecoder (a native object per
 * answer) is made only for a body that splits a character between chunks.
 */
const textOf = (response: UpstreamResponse, maxBytes = Number.POSITIVE_INFINITY): Promise<string> =>
  new Promise((resolve, reject) => {
    let decoder: TextDecoder | undefined
    let text = ""
    let size = 0
    response.pipe({
      data: (bytes, start, end) => {
        if (size > maxBytes) return
        size += end - start
        if (size > maxBytes) {
          // An upstream that sends without end is not buffered without end.
          response.cancel()
          return reject(new ProviderError("server", `the upstream's answer is larger than ${maxBytes} bytes`))
        }
        if (decoder === undefined && (bytes[end - 1] as number) < 0x80) {
          text += bufferText.call(bytes, "utf8", start, end)
          return
        }
        if (decoder === undefined) decoder = new TextDecoder()
        text += decoder.decode(bytes.subarray(start, end), { stream: true })
      },
      read: () => undefined,
      end: () => resolve(decoder === undefined ? text : text + decoder.decode()),
      error: reject,
    })
  })

enum Body {
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  Length,
  UntilClose,
  Done,
}

const CR = 13
const LF = 10
const MAX_HEAD_BYTES = 64 * 1024
const HEAD_END = "\r\n\r\n"
/** The needle as bytes: Buffer#indexOf with a string needle converts it on every call (~155 ns against ~40 ns, Bun 1.4.5). */
const HEAD_END_BYTES = Buffer.from(HEAD_END, "latin1")

/** One request on one connection: the parser's state, the answer, and where its body goes. */
class Exchange implements UpstreamResponse {
  status = 0
  statusText = ""
  headers: HeaderReader = new Headers1("", 0, [])
  /** Bytes of the answer seen so far (0: a reused connection may be retried). */
  received = 0
  private head = ""
  private body: Body = Body.Done
  private inHead = true
  private remaining = 0
  /** Chunk-size line being read: its value so far, whether a digit came, whether past a ';'. */
  private size = 0
  private sizeDigits = false
  private sizeExtension = false
  private lineEmpty = true
  private keepAlive = false
  private sink: BodySink | undefined
  /**
   * Chunks that came before `pipe`, as ranges (bytes, start, end) of their reads. Kept without a
   * copy: Bun hands each socket read over as a Buffer of its own, never written again (a JSON
   * answer's body nearly always shares its read with the head, before `pipe`).
   */
  private early: Array<Uint8Array | number> | undefined
  private outcome: "open" | "ended" | Error = "open"

  constructor(
    readonly connection: Connection,
    private readonly onHead: (response: Exchange) => void,
    /** The head could not be read; `retryable`: not one byte of it came. */
    private readonly onFail: (cause: Error, retryable: boolean) => void,
    /** Called once, when the exchange is over (ended, failed or dropped). */
    private readonly onSettled: () => void,
  ) {}

  pipe(sink: BodySink): void {
    this.sink = sink
    const early = this.early
    this.early = undefined
    if (early !== undefined) {
      for (let i = 0; i < early.length; i += 3) sink.data(early[i] as Uint8Array, early[i + 1] as number, early[i + 2] as number)
      sink.read()
    }
    if (this.outcome === "ended") sink.end()
    else if (this.outcome !== "open") sink.error(this.outcome)
  }

  text(maxBytes?: number): Promise<string> {
    return textOf(this, maxBytes)
  }

  cancel(): void {
    if (this.outcome !== "open") return
    this.outcome = new Error("the answer was dropped")
    this.onSettled()
    this.connection.destroy()
  }

  pause(): void {
    if (this.outcome === "open") this.connection.pause()
  }

  resume(): void {
    this.connection.resume()
  }

  /** Parses a packet of this exchange's answer. */
  feed(bytes: Uint8Array): void {
    this.received += bytes.length
    let pos = 0
    if (this.inHead) {
      pos = this.readHead(bytes)
      if (pos < 0) return
    }
    while (pos < bytes.length && this.outcome === "open") {
      switch (this.body) {
        case Body.ChunkSize:
        case Body.Trailers:
        case Body.ChunkEnd:
          pos = this.readLine(bytes, pos)
          break
        case Body.ChunkData:
        case Body.Length: {
          const n = Math.min(this.remaining, bytes.length - pos)
          this.deliver(bytes, pos, pos + n)
          pos += n
          this.remaining -= n
          if (this.remaining > 0) break
          if (this.body === Body.ChunkData) this.body = Body.ChunkEnd
          else this.finish()
          break
        }
        case Body.UntilClose:
          this.deliver(bytes, pos, bytes.length)
          pos = bytes.length
          break
      }
    }
    if (this.sink !== undefined && this.outcome === "open") this.sink.read()
    if (this.outcome === "open" && this.body === Body.Length && this.remaining === 0) this.finish()
    // Bytes after the end of the answer: the connection is out of step, so it is not reused.
    else if (pos < bytes.length && this.outcome === "ended") this.connection.destroy()
  }

  /** The connection closed (or failed) while this exchange was on it. */
  closed(cause: Error | undefined): void {
    if (this.outcome !== "open") return
    if (!this.inHead && this.body === Body.UntilClose && cause === undefined) {
      this.finish()
      return
    }
    if (this.inHead) this.fail(cause ?? new Error("the upstream closed the connection before answering"), this.received === 0)
    else this.fail(new Error("the upstream closed the connection in the middle of the body"))
  }

  /**
   * Ends the exchange with `cause`; its connection cannot be trusted again and is closed.
   * `retryable` (head only): not one byte of the answer came.
   */
  fail(cause: Error, retryable = false): void {
    if (this.outcome !== "open") return
    this.outcome = cause
    this.onSettled()
    if (this.inHead) this.onFail(cause, retryable)
    else if (this.sink !== undefined) this.sink.error(cause)
    this.connection.destroy()
  }

  private deliver(bytes: Uint8Array, start: number, end: number): void {
    if (start === end) return
    if (this.sink !== undefined) this.sink.data(bytes, start, end)
    else if (this.early === undefined) this.early = [bytes, start, end]
    else this.early.push(bytes, start, end)
  }

  private finish(): void {
    if (this.outcome !== "open") return
    this.sink?.read()
    this.outcome = "ended"
    this.body = Body.Done
    this.onSettled()
    this.connection.release(this.keepAlive)
    this.sink?.end()
  }

  /** Reads head bytes; returns where the body starts in `bytes`, or -1 if the head goes on. */
  private readHead(bytes: Uint8Array): number {
    // Most heads come whole in one packet: find their end in the bytes and decode only them.
    const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    let head: string
    let bodyStart: number
    if (this.head === "") {
      const end = buffer.indexOf(HEAD_END_BYTES)
      if (end === -1) {
        this.head = buffer.toString("latin1")
        return this.headTooLong()
      }
      head = buffer.toString("latin1", 0, end)
      bodyStart = end + 4
    } else {
      const before = this.head.length
      this.head += buffer.toString("latin1")
      const end = this.head.indexOf(HEAD_END, Math.max(0, before - 3))
      if (end === -1) return this.headTooLong()
      head = this.head.slice(0, end)
      bodyStart = end + 4 - before
      this.head = ""
    }
    const lineEnd = head.indexOf("\r\n")
    const statusLine = lineEnd === -1 ? head : head.slice(0, lineEnd)
    const status = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(statusLine)
    if (status === null) {
      this.fail(new UpstreamProtocolError(`the upstream did not answer in HTTP/1.1: ${JSON.stringify(statusLine.slice(0, 80))}`))
      return -1
    }
    const code = Number(status[2])
    if (code >= 100 && code < 200) {
      // An interim answer (100 Continue, 103 Early Hints): the real head follows.
      if (bodyStart >= bytes.length) return -1
      const next = this.readHead(bytes.subarray(bodyStart))
      return next < 0 ? -1 : next + bodyStart
    }
    const known: Array<string | undefined> = [undefined, undefined, undefined, undefined, undefined]
    eachHeader(head, lineEnd, (nameStart, nameEnd, value) => {
      const k = knownHeader(head, nameStart, nameEnd)
      if (k !== -1) known[k] = joined(known[k], value)
    })
    this.status = code
    this.statusText = status[3] ?? ""
    this.headers = new Headers1(head, lineEnd, known)
    const connection = known[CONNECTION]?.toLowerCase() ?? ""
    this.keepAlive = status[1] === "1" ? !connection.includes("close") : connection.includes("keep-alive")
    const encoding = known[CONTENT_ENCODING]?.toLowerCase() ?? "identity"
    if (encoding !== "identity" && encoding !== "") {
      this.fail(new UpstreamProtocolError(`the upstream sent a ${encoding}-encoded body although identity was asked for`))
      return -1
    }
    const transferEncoding = known[TRANSFER_ENCODING]
    if (transferEncoding !== undefined && transferEncoding.toLowerCase() !== "chunked") {
      this.fail(new UpstreamProtocolError(`the upstream sent transfer-encoding ${transferEncoding}; only chunked is read`))
      return -1
    }
    const rawLength = known[CONTENT_LENGTH]
    const length = rawLength === undefined || transferEncoding !== undefined || DIGITS.test(rawLength) ? rawLength : agreedLength(rawLength)
    if (length === undefined && rawLength !== undefined) {
      this.fail(new UpstreamProtocolError(`the upstream sent an invalid content-length: ${JSON.stringify(rawLength.slice(0, 80))}`))
      return -1
    }
    this.inHead = false
    if (code === 204 || code === 304) {
      this.body = Body.Length
      this.remaining = 0
    } else if (transferEncoding !== undefined) {
      this.body = Body.ChunkSize
    } else if (length !== undefined) {
      this.body = Body.Length
      this.remaining = Number(length)
    } else {
      this.body = Body.UntilClose
      this.keepAlive = false
    }
    this.onHead(this)
    return bodyStart
  }

  private headTooLong(): number {
    if (this.head.length > MAX_HEAD_BYTES) this.fail(new UpstreamProtocolError("the upstream's response head is over 64 KB"))
    return -1
  }

  /** Chunk-size lines, the line end after chunk data, and trailer lines. */
  private readLine(bytes: Uint8Array, from: number): number {
    for (let i = from; i < bytes.length; i++) {
      const byte = bytes[i] as number
      if (byte !== LF) {
        if (byte === CR) continue
        this.lineEmpty = false
        if (this.body !== Body.ChunkSize || this.sizeExtension) continue
        const digit = byte <= 57 ? byte - 48 : (byte | 32) - 87
        if (byte === 59 /* ; */) this.sizeExtension = true
        else if (digit >= 0 && digit < 16 && (byte <= 57 || (byte | 32) >= 97)) {
          this.size = this.size * 16 + digit
          this.sizeDigits = true
        } else if (byte !== 32 && byte !== 9) {
          this.fail(new UpstreamProtocolError("the upstream sent a malformed chunked body"))
          return bytes.length
        }
        continue
      }
      // End of a line.
      if (this.body === Body.ChunkEnd) {
        this.body = Body.ChunkSize
      } else if (this.body === Body.ChunkSize) {
        if (!this.sizeDigits) {
          this.fail(new UpstreamProtocolError("the upstream sent a malformed chunked body"))
          return bytes.length
        }
        this.remaining = this.size
        this.body = this.size === 0 ? Body.Trailers : Body.ChunkData
        this.size = 0
        this.sizeDigits = false
        this.sizeExtension = false
      } else if (this.lineEmpty) {
        this.finish()
        return i + 1
      }
      this.lineEmpty = true
      if (this.body === Body.ChunkData) return i + 1
    }
    return bytes.length
  }
}

// ------------------------------------------------------------------ connections

interface Origin {
  readonly key: string
  readonly tls: boolean
  readonly hostname: string
  readonly port: number
  /** The Host header. */
  readonly authority: string
}

/** Idle connections per origin; closed after this long unused (servers drop theirs at 5-120 s). */
const IDLE_SECONDS = 4
const MAX_IDLE_PER_ORIGIN = 1024
/** Connections per origin when the provider does not say (`max_connections`). */
export const DEFAULT_MAX_CONNECTIONS = 512

/** A call waiting for a connection to an origin at its cap. */
interface Waiter {
  readonly signal: AbortLike
  readonly resolve: (connection: Connection) => void
  readonly reject: (cause: unknown) => void
  readonly onAbort: () => void
}

/** One origin's connections: the idle ones, how many are open (idle, busy or connecting), the calls in line. */
interface OriginSlots {
  readonly idle: Array<Connection>
  open: number
  /** The cap the latest call asked for. */
  max: number
  /** The receive buffer the latest call asked for, for the connections opened next (0: autotuned). */
  receiveBuffer: number
  readonly waiting: Array<Waiter>
}

class Connection {
  exchange: Exchange | undefined
  /** Set once connected (the Connection is the socket's data from its first event). */
  socket!: Socket<Connection>
  /** Has served an answer before: a close before any byte of the next one may be a stale reuse. */
  reused = false
  /** Why the TLS handshake failed, for the error the caller sees. */
  tlsError: Error | undefined
  /** Counted in its origin's `open` until it is closed. */
  counted = true
  private pending: Uint8Array | undefined
  private dead = false
  private paused = false

  constructor(
    readonly pool: Pool,
    readonly origin: Origin,
    readonly slots: OriginSlots,
  ) {}

  pause(): void {
    if (this.paused || this.dead) return
    this.paused = true
    this.socket.pause()
  }

  resume(): void {
    if (!this.paused) return
    this.paused = false
    if (!this.dead) this.socket.resume()
  }

  send(bytes: Uint8Array): void {
    const written = this.socket.write(bytes)
    if (written < bytes.length) this.pending = bytes.subarray(Math.max(0, written))
  }

  drain(): void {
    const pending = this.pending
    if (pending === undefined) return
    this.pending = undefined
    this.send(pending)
  }

  release(keepAlive: boolean): void {
    this.exchange = undefined
    this.resume()
    if (!keepAlive || this.dead || this.pending !== undefined) {
      this.destroy()
      return
    }
    this.reused = true
    this.pool.idle(this)
  }

  destroy(): void {
    if (this.dead) return
    this.dead = true
    this.pool.forget(this)
    // Undefined only while connecting, if the connect itself fails.
    if (this.socket !== undefined) this.socket.terminate()
  }

  closed(cause: Error | undefined): void {
    this.dead = true
    this.pool.forget(this)
    const exchange = this.exchange
    this.exchange = undefined
    exchange?.closed(this.tlsError ?? cause)
  }
}

const handlers: Bun.SocketHandler<Connection> = {
  data(socket, bytes) {
    const exchange = socket.data.exchange
    // Bytes on an idle connection answer nothing we asked: the connection is not trusted again.
    if (exchange === undefined) socket.data.destroy()
    else exchange.feed(bytes)
  },
  drain(socket) {
    socket.data.drain()
  },
  close(socket, error) {
    socket.data?.closed(error)
  },
  error(socket, error) {
    socket.data?.exchange?.fail(error)
    socket.data?.destroy()
  },
  handshake(socket, success, authorizationError) {
    const connection = socket.data
    if (success && (authorizationError === null || !connection.pool.verifies)) return
    connection.tlsError = new Error(`TLS handshake with ${connection.origin.authority} failed: ${authorizationError?.message ?? "no detail"}`)
    socket.terminate()
  },
  timeout(socket) {
    // Only idle connections have a timeout: an active one is bounded by the caller's deadline.
    if (socket.data.exchange === undefined) socket.data.destroy()
  },
}

class Pool {
  private readonly byOrigin = new Map<string, OriginSlots>()

  /** Whether certificates are verified (`rejectUnauthorized: false` turns it off, for tests and private setups). */
  readonly verifies: boolean

  constructor(private readonly tlsOptions: Bun.TLSOptions | undefined) {
    this.verifies = tlsOptions?.rejectUnauthorized !== false
  }

  private slotsOf(origin: Origin): OriginSlots {
    let slots = this.byOrigin.get(origin.key)
    if (slots === undefined) {
      slots = { idle: [], open: 0, max: DEFAULT_MAX_CONNECTIONS, receiveBuffer: 0, waiting: [] }
      this.byOrigin.set(origin.key, slots)
    }
    return slots
  }

  /** An idle connection to `origin`, taken out of the pool; synchronous, for the common case. */
  takeIdle(origin: Origin): Connection | undefined {
    const connection = this.byOrigin.get(origin.key)?.idle.pop()
    if (connection !== undefined) connection.socket.timeout(0)
    return connection
  }

  /** A new connection while `origin` is under `max`, else the next one freed, in the order asked (aborting leaves the line). */
  acquire(origin: Origin, max: number, receiveBuffer: number, signal: AbortLike): Promise<Connection> {
    const slots = this.slotsOf(origin)
    slots.max = max
    slots.receiveBuffer = receiveBuffer
    if (slots.open < max && slots.waiting.length === 0) return connectUnlessAborted(this, origin, signal)
    if (signal.aborted) return Promise.reject(abortError(signal))
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        signal,
        resolve,
        reject,
        onAbort: () => {
          const at = slots.waiting.indexOf(waiter)
          if (at !== -1) slots.waiting.splice(at, 1)
          reject(abortError(signal))
        },
      }
      signal.addEventListener("abort", waiter.onAbort, { once: true })
      slots.waiting.push(waiter)
    })
  }

  async connect(origin: Origin): Promise<Connection> {
    const slots = this.slotsOf(origin)
    slots.open++
    const fresh = new Connection(this, origin, slots)
    try {
      fresh.socket = await Bun.connect<Connection>({
        hostname: origin.hostname,
        port: origin.port,
        ...(origin.tls ? { tls: { serverName: origin.hostname, ...this.tlsOptions } } : {}),
        socket: handlers,
        data: fresh,
      })
    } catch (cause) {
      this.uncount(fresh)
      throw cause
    }
    fresh.socket.setNoDelay(true)
    // Before the request is sent, so the window the upstream sees is the bounded one. `fd` is
    // Bun's own (undocumented) getter on its sockets.
    const fd = (fresh.socket as unknown as { readonly fd?: number }).fd
    if (slots.receiveBuffer > 0 && typeof fd === "number" && fd >= 0) setReceiveBuffer(fd, slots.receiveBuffer)
    return fresh
  }

  idle(connection: Connection): void {
    const slots = connection.slots
    // A call waiting in line takes the connection as it is freed.
    const waiter = slots.waiting.shift()
    if (waiter !== undefined) {
      waiter.signal.removeEventListener("abort", waiter.onAbort)
      waiter.resolve(connection)
      return
    }
    if (slots.idle.length >= MAX_IDLE_PER_ORIGIN) {
      connection.destroy()
      return
    }
    connection.socket.timeout(IDLE_SECONDS)
    slots.idle.push(connection)
  }

  forget(connection: Connection): void {
    const idle = connection.slots.idle
    const at = idle.indexOf(connection)
    if (at !== -1) idle.splice(at, 1)
    this.uncount(connection)
  }

  /** A connection closed (or never opened): its place goes to the first call in line. */
  private uncount(connection: Connection): void {
    if (!connection.counted) return
    connection.counted = false
    const slots = connection.slots
    slots.open--
    const waiter = slots.open < slots.max ? slots.waiting.shift() : undefined
    if (waiter === undefined) return
    waiter.signal.removeEventListener("abort", waiter.onAbort)
    connectUnlessAborted(this, connection.origin, waiter.signal).then(waiter.resolve, waiter.reject)
  }
}

// ------------------------------------------------------------------ requests

const origins = new Map<string, { origin: Origin; path: string }>()

/** The origin and path of a URL, memoized (a handful of provider URLs are used over and over). */
const target = (url: string): { origin: Origin; path: string } => {
  const known = origins.get(url)
  if (known !== undefined) return known
  const parsed = new URL(url)
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new UpstreamProtocolError(`unsupported upstream URL scheme ${parsed.protocol}`)
  const tls = parsed.protocol === "https:"
  const port = parsed.port === "" ? (tls ? 443 : 80) : Number(parsed.port)
  const hostname = parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname
  const origin: Origin = { key: `${parsed.protocol}//${parsed.host}`, tls, hostname, port, authority: parsed.host }
  const entry = { origin, path: `${parsed.pathname}${parsed.search}` }
  if (origins.size < 1024) origins.set(url, entry)
  return entry
}

/** Headers the client writes itself. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const OWN_HEADERS = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"])
const encoder = new TextEncoder()

const requestBytes = (origin: Origin, path: string, headers: Readonly<Record<string, string>>, body: string): Uint8Array => {
  let head = `POST ${path} HTTP/1.1\r\nhost: ${origin.authority}\r\naccept-encoding: identity\r\n`
  for (const name in headers) {
    const value = headers[name] as string
    if (OWN_HEADERS.has(name.toLowerCase())) continue
    if (!TOKEN.test(name)) throw new UpstreamProtocolError(`header name ${JSON.stringify(name)} is not an HTTP token`)
    if (/[\r\n\0]/.test(value)) throw new UpstreamProtocolError(`header ${name} has a line break`)
    head += `${name}: ${value}\r\n`
  }
  return encoder.encode(`${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
}

/**
 * How soon after sending a close with no byte of answer counts as the idle connection's own close
 * crossing our request (about one round trip), which is retried; later, the upstream may have
 * worked on the request, and the caller gets the failure (the router's failover decides).
 */
const STALE_WINDOW_MS = 250

/** A new connection, unless the signal aborts first (a connect can hang for minutes). */
const connectUnlessAborted = (pool: Pool, origin: Origin, signal: AbortLike): Promise<Connection> => {
  if (signal.aborted) return Promise.reject(abortError(signal))
  return new Promise((resolve, reject) => {
    let settled = false
    const onAbort = () => {
      settled = true
      reject(abortError(signal))
    }
    signal.addEventListener("abort", onAbort, { once: true })
    pool.connect(origin).then(
      (connection) => {
        signal.removeEventListener("abort", onAbort)
        // Connected after the caller gave up: the connection is still good for the next call.
        if (settled) connection.release(true)
        else resolve(connection)
      },
      (cause: unknown) => {
        signal.removeEventListener("abort", onAbort)
        if (!settled) reject(cause)
      },
    )
  })
}

const abortError = (signal: AbortLike): Error => (signal.reason instanceof Error ? signal.reason : new Error("the upstream call was aborted"))

/** A client with its own connection pool; `tls` adds options such as a private `ca` (tests). */
export const http1Transport = (tls?: Bun.TLSOptions): Transport => {
  const pool = new Pool(tls)
  /** Sends on `connection` and resolves with the answer's head. */
  const exchangeOn = (connection: Connection, bytes: Uint8Array, request: UpstreamRequest, retried: boolean): Promise<UpstreamResponse> => {
    const reused = connection.reused
    const sentAt = performance.now()
    return new Promise<UpstreamResponse>((resolve, reject) => {
      const onAbort = () => {
        exchange.fail(abortError(request.signal))
        connection.destroy()
      }
      const exchange = new Exchange(
        connection,
        resolve,
        (cause, retryable) => {
          // A kept-alive connection the server closed as it went idle (its close crossed our request):
          // send again on a new one. Only then: a request the upstream may have worked on is not resent.
          const stale = retryable && reused && performance.now() - sentAt < STALE_WINDOW_MS
          if (stale && !retried && !request.signal.aborted) resolve(attempt(request, true))
          else reject(cause)
        },
        () => request.signal.removeEventListener("abort", onAbort),
      )
      connection.exchange = exchange
      request.signal.addEventListener("abort", onAbort, { once: true })
      connection.send(bytes)
    })
  }
  // Not async: with a pooled connection the request is written before this returns, and the
  // answer's promise is the only one made.
  const attempt = (request: UpstreamRequest, retried: boolean): Promise<UpstreamResponse> => {
    let origin: Origin
    let bytes: Uint8Array
    try {
      const parsed = target(request.url)
      origin = parsed.origin
      bytes = requestBytes(origin, parsed.path, request.headers, request.body)
    } catch (cause) {
      return Promise.reject(cause)
    }
    if (request.signal.aborted) return Promise.reject(abortError(request.signal))
    const pooled = pool.takeIdle(origin)
    if (pooled !== undefined) return exchangeOn(pooled, bytes, request, retried)
    return pool
      .acquire(origin, request.maxConnections ?? DEFAULT_MAX_CONNECTIONS, request.receiveBufferBytes ?? 0, request.signal)
      .then((connection) => exchangeOn(connection, bytes, request, retried))
  }
  return (request) => attempt(request, false)
}

// ------------------------------------------------------------------ fetch, for proxies

/** `fetch` takes a real AbortSignal: one that follows `signal` when it is not one already. */
const nativeSignal = (signal: AbortLike): AbortSignal => {
  if (signal instanceof AbortSignal) return signal
  const controller = new AbortController()
  if (signal.aborted) controller.abort(signal.reason)
  else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true })
  return controller.signal
}

/** The same interface over `fetch`, which honours HTTP_PROXY / HTTPS_PROXY / NO_PROXY. */
export const fetchTransport: Transport = async (request) => {
  const response = await fetch(request.url, {
    method: "POST",
    headers: request.headers,
    body: request.body,
    signal: nativeSignal(request.signal),
    keepalive: true,
  })
  const body = response.body
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined
  // Paused by not reading: `wake` continues the read loop.
  let paused = false
  let wake: (() => void) | undefined
  const self: UpstreamResponse = {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
    pipe(sink) {
      if (body === null) return sink.end()
      const current = body.getReader()
      reader = current
      void (async () => {
        try {
          for (;;) {
            if (paused) await new Promise<void>((resolve) => (wake = resolve))
            const chunk = await current.read()
            if (chunk.done) return sink.end()
            sink.data(chunk.value, 0, chunk.value.length)
            sink.read()
          }
        } catch (cause) {
          sink.error(cause instanceof Error ? cause : new Error(String(cause)))
        }
      })()
    },
    text: (maxBytes) => textOf(self, maxBytes),
    cancel() {
      if (reader !== undefined) reader.cancel().catch(() => undefined)
      else body?.cancel().catch(() => undefined)
      self.resume()
    },
    pause() {
      paused = true
    },
    resume() {
      paused = false
      const waiting = wake
      wake = undefined
      waiting?.()
    },
  }
  return self
}

const PROXY_VARIABLES = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]

/** `GATEWAY_UPSTREAM_CLIENT=fetch|http1`; by default http1, or fetch when a proxy variable is set. */
export const defaultTransport = (env: Record<string, string | undefined> = process.env): Transport => {
  const chosen = env["GATEWAY_UPSTREAM_CLIENT"]
  if (chosen === "fetch") return fetchTransport
  if (chosen === "http1") return http1Transport()
  return PROXY_VARIABLES.some((name) => (env[name] ?? "") !== "") ? fetchTransport : http1Transport()
}
