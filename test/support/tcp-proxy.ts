/**
 * A TCP proxy a test controls, between the gateway and Postgres: `cut` closes every connection and
 * refuses new ones (a restart or a stop of the database), `stall` stops forwarding without closing
 * anything (a network that drops packets), `restore` forwards again.
 */
import { connect, createServer, type Server, type Socket } from "node:net"

export interface TcpProxy {
  readonly port: number
  /** `url` (a postgres:// URL) pointed at the proxy instead. */
  readonly through: (url: string) => string
  readonly cut: () => void
  readonly stall: () => void
  readonly restore: () => void
  readonly close: () => Promise<void>
}

export const startTcpProxy = async (targetHost: string, targetPort: number): Promise<TcpProxy> => {
  let mode: "open" | "cut" | "stalled" = "open"
  const pairs = new Set<{ client: Socket; upstream: Socket }>()
  const join = (pair: { client: Socket; upstream: Socket }) => {
    pair.client.pipe(pair.upstream)
    pair.upstream.pipe(pair.client)
    pair.client.resume()
    pair.upstream.resume()
  }
  const part = (pair: { client: Socket; upstream: Socket }) => {
    pair.client.unpipe(pair.upstream)
    pair.upstream.unpipe(pair.client)
    pair.client.pause()
    pair.upstream.pause()
  }
  const server: Server = createServer((client) => {
    if (mode === "cut") {
      client.destroy()
      return
    }
    const upstream = connect(targetPort, targetHost)
    const pair = { client, upstream }
    pairs.add(pair)
    const drop = () => {
      pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on("error", drop)
    upstream.on("error", drop)
    client.on("close", drop)
    upstream.on("close", drop)
    if (mode === "stalled") part(pair)
    else join(pair)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    port,
    through: (url) => {
      const u = new URL(url)
      u.hostname = "127.0.0.1"
      u.port = String(port)
      return u.toString()
    },
    cut: () => {
      mode = "cut"
      for (const pair of [...pairs]) {
        pair.client.destroy()
        pair.upstream.destroy()
      }
      pairs.clear()
    },
    stall: () => {
      mode = "stalled"
      for (const pair of pairs) part(pair)
    },
    restore: () => {
      const was = mode
      mode = "open"
      if (was === "stalled") for (const pair of pairs) join(pair)
    },
    close: async () => {
      for (const pair of pairs) {
        pair.client.destroy()
        pair.upstream.destroy()
      }
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
