#!/usr/bin/env bun
/**
 * The benchmark's floor: a bare pass-through proxy, plain `Bun.serve` + `fetch`, what any Bun
 * proxy pays. POST /v1/chat/completions goes to the upstream as it came (headers but the
 * hop-by-hop ones, the body) and the answer comes back as it is, streamed.
 *
 *   bun scripts/bench-proxy.ts --port 9101 --upstream http://127.0.0.1:9100
 */

const flag = (name: string, fallback: string): string => {
  const at = Bun.argv.indexOf(`--${name}`)
  return at === -1 ? fallback : (Bun.argv[at + 1] ?? fallback)
}

const port = Number(flag("port", "9101"))
const upstream = flag("upstream", "http://127.0.0.1:9100").replace(/\/$/, "")
const HOP_BY_HOP = ["host", "connection", "keep-alive", "transfer-encoding", "content-length"]

const server = Bun.serve({
  port,
  hostname: "127.0.0.1",
  idleTimeout: 0,
  routes: {
    "/v1/chat/completions": {
      POST: async (req) => {
        const headers = new Headers(req.headers)
        for (const name of HOP_BY_HOP) headers.delete(name)
        const res = await fetch(`${upstream}/v1/chat/completions`, {
          method: "POST",
          headers,
          body: await req.arrayBuffer(),
          signal: req.signal,
        })
        return new Response(res.body, { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "application/json" } })
      },
    },
  },
  fetch: () => new Response("not found", { status: 404 }),
})

export {}
console.log(`bench proxy listening on http://127.0.0.1:${server.port} → ${upstream}`)
const stop = () => {
  void server.stop(true).then(() => process.exit(0))
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
