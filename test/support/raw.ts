/** Raw HTTP/1.1 over a socket: partial bodies, kept-alive connections, and seeing when the server closes. */
import net from "node:net"

export interface RawConnection {
  /** Everything the server sent so far. */
  readonly text: () => string
  readonly closed: () => boolean
  write(data: string): void
  /** Resolves once the server closed the connection, or after `ms` (then `closed()` is false). */
  waitClosed(ms: number): Promise<boolean>
  /** Resolves once the text received holds `needle`, or after `ms`. */
  waitFor(needle: string, ms: number): Promise<boolean>
  destroy(): void
}

export const rawConnect = (port: number): Promise<RawConnection> =>
  new Promise((resolve, reject) => {
    let text = ""
    let closed = false
    const waiters = new Set<() => void>()
    const wake = () => {
      for (const w of waiters) w()
    }
    const socket = net.connect(port, "127.0.0.1")
    socket.on("data", (d) => {
      text += d.toString()
      wake()
    })
    socket.on("close", () => {
      closed = true
      wake()
    })
    socket.on("error", () => {})
    const until = (done: () => boolean, ms: number) =>
      new Promise<boolean>((settle) => {
        if (done()) return settle(true)
        const check = () => {
          if (!done()) return
          clearTimeout(timer)
          waiters.delete(check)
          settle(true)
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          settle(done())
        }, ms)
        waiters.add(check)
      })
    socket.on("connect", () =>
      resolve({
        text: () => text,
        closed: () => closed,
        write: (data) => void socket.write(data),
        waitClosed: (ms) => until(() => closed, ms),
        waitFor: (needle, ms) => until(() => text.includes(needle), ms),
        destroy: () => socket.destroy(),
      }),
    )
    socket.once("error", reject)
  })

/** The head of a POST whose body is declared `length` bytes long. */
export const postHead = (path: string, length: number, headers: Record<string, string> = {}) =>
  `POST ${path} HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n` +
  Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("") +
  "\r\n"

/** The status code of the first response in `text`, or undefined. */
export const statusOf = (text: string): number | undefined => {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(text)
  return m === null ? undefined : Number(m[1])
}

/** The value of a header of the first response in `text` (lower-case name), or undefined. */
export const headerOf = (text: string, name: string): string | undefined => {
  const head = text.split("\r\n\r\n")[0] ?? ""
  for (const line of head.split("\r\n").slice(1)) {
    const i = line.indexOf(":")
    if (i > 0 && line.slice(0, i).trim().toLowerCase() === name) return line.slice(i + 1).trim()
  }
  return undefined
}
