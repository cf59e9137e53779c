/**
 * Bun's `routes` matching, for the route table `startServer` hands `Bun.serve` (src/http/route-table.ts),
 * so the test kit calls the same handlers in-process: an exact path first, then a path with
 * `:param` segments (the one with more fixed segments first), then a trailing `*` (the longest
 * prefix first); a path matched without a handler for the method, or not matched, goes to `fetch`.
 * test/testing/routes.test.ts sends the same requests through both and compares the answers.
 */
import type { RouteHandler, RouteTable } from "../http/server.js"

type Methods = Partial<Record<string, RouteHandler>>

interface Parametric {
  readonly segments: ReadonlyArray<string | undefined>
  readonly fixed: number
  readonly methods: Methods
}

/**
 * A request made in-process as it arrives over HTTP: a body is framed by a content-length (a
 * constructed Request has none, and the handlers tell a body by its framing headers, body.ts).
 */
const framed = async (req: Request): Promise<Request> => {
  if (req.body === null || req.headers.has("content-length") || req.headers.has("transfer-encoding")) return req
  const body = await req.arrayBuffer()
  const headers = new Headers(req.headers)
  headers.set("content-length", String(body.byteLength))
  return new Request(req.url, { method: req.method, headers, body, signal: req.signal })
}

/**
 * The answer as the client reads it: a client that aborts has gone away, as over a closed
 * connection, so the gateway's stream is cancelled and the client's read fails.
 */
const untilAborted = (res: Response, body: ReadableStream<Uint8Array>, signal: AbortSignal): Response => {
  const reader = body.getReader()
  let out: ReadableStreamDefaultController<Uint8Array> | undefined
  const onAbort = () => {
    reader.cancel(signal.reason).catch(() => {})
    try {
      out?.error(signal.reason)
    } catch {
      // Already closed.
    }
  }
  signal.addEventListener("abort", onAbort, { once: true })
  const stream = new ReadableStream<Uint8Array>({
    start: (controller) => {
      out = controller
    },
    pull: async (controller) => {
      try {
        const { done, value } = await reader.read()
        if (done) {
          signal.removeEventListener("abort", onAbort)
          controller.close()
        } else controller.enqueue(value)
      } catch (e) {
        signal.removeEventListener("abort", onAbort)
        controller.error(e)
      }
    },
    cancel: (reason) => {
      signal.removeEventListener("abort", onAbort)
      return reader.cancel(reason)
    },
  })
  return new Response(stream, { status: res.status, statusText: res.statusText, headers: res.headers })
}

export const routeDispatcher = (table: RouteTable): ((req: Request) => Promise<Response>) => {
  const exact = new Map<string, Methods>()
  const parametric: Array<Parametric> = []
  const wildcards: Array<{ readonly prefix: string; readonly methods: Methods }> = []
  for (const [path, methods] of Object.entries(table.routes)) {
    if (path.endsWith("*")) wildcards.push({ prefix: path.slice(0, -1), methods })
    else if (path.includes("/:")) {
      const segments = path.split("/").map((s) => (s.startsWith(":") ? undefined : s))
      parametric.push({ segments, fixed: segments.filter((s) => s !== undefined).length, methods })
    } else exact.set(path, methods)
  }
  parametric.sort((a, b) => b.fixed - a.fixed)
  wildcards.sort((a, b) => b.prefix.length - a.prefix.length)

  const match = (path: string): Methods | undefined => {
    const found = exact.get(path)
    if (found !== undefined) return found
    const parts = path.split("/")
    for (const route of parametric) {
      if (route.segments.length !== parts.length) continue
      if (route.segments.every((s, i) => (s === undefined ? parts[i] !== "" : s === parts[i]))) return route.methods
    }
    return wildcards.find((w) => path.startsWith(w.prefix))?.methods
  }

  return async (given) => {
    const req = await framed(given)
    const handler = match(new URL(req.url).pathname)?.[req.method]
    let res: Response
    try {
      res = await (handler ?? table.fetch)(req)
    } catch {
      return table.error()
    }
    return res.body === null ? res : untilAborted(res, res.body, req.signal)
  }
}
