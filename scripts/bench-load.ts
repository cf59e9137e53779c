#!/usr/bin/env bun
/**
 * The benchmark's load generator: closed loop over raw keep-alive HTTP/1.1 sockets (Bun.connect),
 * so the client costs a few µs per request and the same bytes go to every server under test.
 *
 *   bun scripts/bench-load.ts '<LoadSpec as JSON>'    → one JSON LoadResult line on stdout
 *
 * Modes:
 * - `loop`: `connections` sockets, each sends the request again as soon as the previous answer
 *   ends, for `durationMs` (after `warmupMs` not counted) or until `requests` answers in all.
 * - `hold`: `connections` sockets each send the request once (opened at `rampPerSec`) and read
 *   the answer to its end. When every one has its first byte, an `{"event":"all-open"}` line is
 *   printed (the orchestrator samples the server's RSS then); the result follows at the end.
 * - `rate`: open loop: requests start at `ratePerSec` for `durationMs` whatever the answers do,
 *   over a pool of `connections` keep-alive sockets (a request due while every socket is busy
 *   waits for the next one free); latency counts from when the request was due, not from when a
 *   socket took it, so a stall shows in the tail (no coordinated omission).
 * - `unread`: as `hold`, but each socket reads the answer's first bytes and then nothing (a client
 *   that stopped reading); `holdMs` after all have their first byte, every socket is closed. An
 *   answer counts when its status is 200, an error when its connection closes before the end.
 *
 * An answer counts as an error unless its status is 200 and, when `expectTail` is set, its body
 * ends with that text (e.g. "data: [DONE]\n\n"): a stream cut short is not a success.
 */
import type { Socket } from "bun"

export interface LoadSpec {
  readonly host: string
  readonly port: number
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly connections: number
  readonly mode: "loop" | "hold" | "unread" | "rate"
  /** rate: requests started per second. */
  readonly ratePerSec?: number
  /** loop: how long to measure. */
  readonly durationMs?: number
  /** loop: stop after this many answers in all (with or without durationMs). */
  readonly requests?: number
  /** loop: run this long first without recording. */
  readonly warmupMs?: number
  /** hold, unread: sockets opened per second (default 500). */
  readonly rampPerSec?: number
  /** unread: how long the sockets stay open, reading nothing, once all have their first byte. */
  readonly holdMs?: number
  /** The whole run gives up after this long (default durationMs + 120 s). */
  readonly deadlineMs?: number
  readonly expectTail?: string
}

export interface Percentiles {
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly mean: number
}

export interface LoadResult {
  readonly requests: number
  readonly errors: number
  /** The first few error descriptions. */
  readonly errorSamples: ReadonlyArray<string>
  readonly elapsedMs: number
  readonly rps: number
  /** Milliseconds from writing the request to the end of the answer. */
  readonly latency: Percentiles
  /** Milliseconds from writing the request to the first byte of the answer. */
  readonly ttfb: Percentiles
  readonly bytes: number
}

const percentiles = (values: Array<number>): Percentiles => {
  if (values.length === 0) return { p50: 0, p90: 0, p99: 0, mean: 0 }
  const sorted = Float64Array.from(values).sort()
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
  let sum = 0
  for (const v of sorted) sum += v
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: sum / sorted.length }
}

const CRLF2 = "\r\n\r\n"

/** Where one answer stands: the head, then a body framed by content-length or chunked encoding. */
interface Conn {
  socket: Socket<Conn> | undefined
  /** Unparsed bytes as a latin1 string (one character per byte). */
  buf: string
  state: "idle" | "head" | "length" | "chunked"
  status: number
  remaining: number
  /** Chunked: the tail of the body seen so far (enough to check `expectTail`). */
  tail: string
  sentAt: number
  firstByteAt: number
  bytes: number
}

export const runLoad = (spec: LoadSpec, onEvent: (event: string) => void = () => {}): Promise<LoadResult> =>
  new Promise((resolve) => {
    const headerLines = Object.entries({
      host: `${spec.host}:${spec.port}`,
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(spec.body)),
      ...spec.headers,
    })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("")
    const request = Buffer.from(`POST ${spec.path} HTTP/1.1\r\n${headerLines}\r\n${spec.body}`)
    const tailWanted = spec.expectTail ?? ""
    const keepTail = Math.max(tailWanted.length, 16)

    const latencies: Array<number> = []
    const ttfbs: Array<number> = []
    const errorSamples: Array<string> = []
    let errors = 0
    let answered = 0
    let bytes = 0
    let recording = spec.mode !== "loop" || (spec.warmupMs ?? 0) === 0
    let stopping = false
    let measureStart = performance.now()
    let measureEnd = 0
    const conns: Array<Conn> = []
    let finished = 0
    let firstBytes = 0

    const fail = (why: string) => {
      if (!recording) return
      errors++
      if (errorSamples.length < 5) errorSamples.push(why)
    }

    const done = () => {
      if (measureEnd !== 0) return
      measureEnd = performance.now()
      stopping = true
      clearTimeout(deadline)
      for (const c of conns) c.socket?.end()
      const elapsedMs = measureEnd - measureStart
      resolve({
        requests: answered,
        errors,
        errorSamples,
        elapsedMs,
        rps: (answered / elapsedMs) * 1000,
        latency: percentiles(latencies),
        ttfb: percentiles(ttfbs),
        bytes,
      })
    }

    /** rate: due times of requests waiting for a free socket, and the sockets free. */
    const backlog: Array<number> = []
    const idle: Array<Conn> = []

    const send = (c: Conn, dueAt = performance.now()) => {
      if (stopping || c.socket === undefined) return
      c.state = "head"
      c.buf = ""
      c.tail = ""
      c.firstByteAt = 0
      c.bytes = 0
      c.sentAt = dueAt
      const written = c.socket.write(request)
      if (written !== request.byteLength) {
        // Tiny requests go out whole on loopback; anything else is a broken socket.
        fail(`short write (${written} of ${request.byteLength})`)
        c.socket.end()
      }
    }

    const complete = (c: Conn, ok: boolean, why: string) => {
      const now = performance.now()
      c.state = "idle"
      if (recording) {
        if (ok) {
          answered++
          latencies.push(now - c.sentAt)
          ttfbs.push(c.firstByteAt - c.sentAt)
          bytes += c.bytes
        } else fail(why)
      }
      if (spec.mode === "hold") {
        finished++
        if (finished === spec.connections) done()
        return
      }
      if (spec.requests !== undefined && answered >= spec.requests) return done()
      if (spec.mode === "rate") {
        const due = backlog.shift()
        if (due === undefined) idle.push(c)
        else send(c, due)
        return
      }
      send(c)
    }

    const checkTail = (c: Conn, tail: string) =>
      c.status === 200 && tail.endsWith(tailWanted) ? "" : `status ${c.status}, tail ${JSON.stringify(tail.slice(-40))}`

    /** Consumes as much of `c.buf` as forms the current answer; true when it has ended. */
    const parse = (c: Conn): boolean => {
      for (;;) {
        if (c.state === "head") {
          const end = c.buf.indexOf(CRLF2)
          if (end === -1) return false
          const head = c.buf.slice(0, end).toLowerCase()
          c.status = Number(head.slice(9, 12))
          c.buf = c.buf.slice(end + 4)
          const length = /\r\ncontent-length:\s*(\d+)/.exec(head)
          if (length !== null) {
            c.state = "length"
            c.remaining = Number(length[1])
          } else if (head.includes("transfer-encoding: chunked")) {
            c.state = "chunked"
          } else {
            fail(`no framing in head: ${head.slice(0, 80)}`)
            c.socket?.end()
            return false
          }
          continue
        }
        if (c.state === "length") {
          if (c.buf.length < c.remaining) return false
          const body = c.buf.slice(0, c.remaining)
          c.buf = c.buf.slice(c.remaining)
          const why = checkTail(c, body)
          complete(c, why === "", why)
          return true
        }
        if (c.state === "chunked") {
          const eol = c.buf.indexOf("\r\n")
          if (eol === -1) return false
          const size = Number.parseInt(c.buf.slice(0, eol), 16)
          if (size === 0) {
            if (c.buf.length < eol + 4) return false
            c.buf = c.buf.slice(eol + 4)
            const why = checkTail(c, c.tail)
            complete(c, why === "", why)
            return true
          }
          if (c.buf.length < eol + 2 + size + 2) return false
          const data = c.buf.slice(eol + 2, eol + 2 + size)
          c.tail = (c.tail + data).slice(-keepTail)
          c.buf = c.buf.slice(eol + 2 + size + 2)
          continue
        }
        return false
      }
    }

    const connect = (c: Conn) =>
      Bun.connect<Conn>({
        hostname: spec.host,
        port: spec.port,
        data: c,
        socket: {
          open: (socket) => {
            c.socket = socket
            if (spec.mode === "rate") idle.push(c)
            else send(c)
          },
          data: (_socket, chunk) => {
            if (c.state === "idle") return
            if (spec.mode === "unread") {
              // The first bytes only: the status, then the socket reads nothing more.
              c.firstByteAt = performance.now()
              c.state = "idle"
              _socket.pause()
              const status = Number(chunk.toString("latin1", 9, 12))
              if (status === 200) {
                answered++
                ttfbs.push(c.firstByteAt - c.sentAt)
              } else fail(`status ${status}`)
              if (++firstBytes === spec.connections) {
                onEvent(JSON.stringify({ event: "all-open" }))
                setTimeout(done, spec.holdMs ?? 10_000)
              }
              return
            }
            if (c.firstByteAt === 0) {
              c.firstByteAt = performance.now()
              if (spec.mode === "hold" && ++firstBytes === spec.connections) onEvent(JSON.stringify({ event: "all-open" }))
            }
            c.bytes += chunk.byteLength
            c.buf += chunk.toString("latin1")
            parse(c)
          },
          close: () => {
            c.socket = undefined
            if (stopping) return
            if (spec.mode === "unread") return fail("connection closed while the client read nothing")
            if (c.state !== "idle") complete(c, false, `connection closed in state ${c.state}`)
            // A server that closed a keep-alive connection: open another one.
            if (spec.mode === "loop" && !stopping) void reconnect(c)
          },
          error: (_socket, error) => fail(`socket error: ${error.message}`),
          connectError: (_socket, error) => {
            fail(`connect error: ${error.message}`)
            if (spec.mode === "hold") complete(c, false, "connect error")
          },
        },
      }).catch((error: Error) => {
        fail(`connect failed: ${error.message}`)
        if (spec.mode === "hold") complete(c, false, "connect failed")
      })

    const reconnect = async (c: Conn) => {
      await Bun.sleep(10)
      if (!stopping) await connect(c)
    }

    const newConn = (): Conn => ({
      socket: undefined,
      buf: "",
      state: "idle",
      status: 0,
      remaining: 0,
      tail: "",
      sentAt: 0,
      firstByteAt: 0,
      bytes: 0,
    })

    const deadline = setTimeout(
      () => {
        fail("deadline reached")
        done()
      },
      spec.deadlineMs ?? (spec.durationMs ?? 0) + (spec.warmupMs ?? 0) + 120_000,
    )

    if (spec.mode === "rate") {
      for (let i = 0; i < spec.connections; i++) {
        const c = newConn()
        conns.push(c)
        void connect(c)
      }
      const rate = spec.ratePerSec ?? 1000
      // Once the sockets are open: every millisecond, the requests due by now start.
      setTimeout(() => {
        measureStart = performance.now()
        let started = 0
        const tick = setInterval(() => {
          if (stopping) return clearInterval(tick)
          const now = performance.now()
          const due = Math.floor(((now - measureStart) * rate) / 1000)
          for (; started < due; started++) {
            const at = measureStart + (started * 1000) / rate
            const c = idle.pop()
            if (c === undefined || c.socket === undefined) backlog.push(at)
            else send(c, at)
          }
        }, 1)
        setTimeout(() => {
          clearInterval(tick)
          // The requests started are answered before the end (up to the deadline).
          const wait = setInterval(() => {
            if (backlog.length === 0 && conns.every((c) => c.state === "idle")) {
              clearInterval(wait)
              done()
            }
          }, 5)
        }, spec.durationMs ?? 5_000)
      }, 200)
      return
    }

    if (spec.mode !== "loop") {
      const perTick = Math.max(1, Math.round((spec.rampPerSec ?? 500) / 20))
      let opened = 0
      const ramp = setInterval(() => {
        for (let i = 0; i < perTick && opened < spec.connections; i++, opened++) {
          const c = newConn()
          conns.push(c)
          void connect(c)
        }
        if (opened >= spec.connections) clearInterval(ramp)
      }, 50)
      return
    }

    for (let i = 0; i < spec.connections; i++) {
      const c = newConn()
      conns.push(c)
      void connect(c)
    }
    const startMeasuring = () => {
      recording = true
      measureStart = performance.now()
      if (spec.durationMs !== undefined) setTimeout(done, spec.durationMs)
    }
    if ((spec.warmupMs ?? 0) > 0) setTimeout(startMeasuring, spec.warmupMs)
    else startMeasuring()
  })

if (import.meta.main) {
  const spec = JSON.parse(Bun.argv[2] ?? "{}") as LoadSpec
  const result = await runLoad(spec, (event) => console.log(event))
  console.log(JSON.stringify(result))
  process.exit(0)
}
