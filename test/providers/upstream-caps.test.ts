/**
 * Bodies from upstream are capped. A JSON (or error) body over
 * `server.max_upstream_body_bytes` and one SSE event over `max_upstream_event_bytes` are dropped
 * with a "server" failure (502, or `response.failed` mid-stream), over both transports, instead
 * of being buffered for as long as the upstream sends.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { Server } from "bun"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { httpProvider } from "../../src/providers/http"
import { fetchTransport, http1Transport } from "../../src/providers/http1"
import { openAiChatWire } from "../../src/providers/openai-chat/adapter"
import type { UpstreamLimits } from "../../src/providers/types"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { parseSse } from "../support/sse.js"
import { configFor, eventsOf, providerErrorOf, textRequest } from "./helpers"

const LIMITS: UpstreamLimits = { bodyBytes: 64 * 1024, eventBytes: 16 * 1024 }
const CHUNK = "x".repeat(8 * 1024)

/** What the upstream sends: a JSON body or an SSE event far over the caps, in chunks (or a fitting answer). */
type Shape = "json-huge" | "error-huge" | "event-huge" | "event-many-lines" | "json-ok"

/** `total` bytes of `piece` after `prefix`, sent as a stream of chunks. */
const chunked = (prefix: string, piece: string, total: number, suffix = "") =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      const encoder = new TextEncoder()
      controller.enqueue(encoder.encode(prefix))
      for (let sent = 0; sent < total; sent += piece.length) controller.enqueue(encoder.encode(piece))
      controller.enqueue(encoder.encode(suffix))
      controller.close()
    },
  })

const answerFor = (shape: Shape): Response => {
  switch (shape) {
    case "json-ok":
      return Response.json({ choices: [{ message: { content: "fits" }, finish_reason: "stop" }] })
    case "json-huge":
      return new Response(chunked('{"choices":[{"message":{"content":"', CHUNK, 1024 * 1024, '"},"finish_reason":"stop"}]}'), {
        headers: { "content-type": "application/json" },
      })
    case "error-huge":
      return new Response(chunked('{"error":{"message":"', CHUNK, 1024 * 1024, '"}}'), {
        status: 500,
        headers: { "content-type": "application/json" },
      })
    case "event-huge":
      return new Response(
        chunked('data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"', CHUNK, 1024 * 1024, '"}}]}\n\n'),
        { headers: { "content-type": "text/event-stream" } },
      )
    case "event-many-lines":
      return new Response(chunked('data: {"choices":[{"delta":{"content":"a"}}]}\n\n', `data: ${"y".repeat(1000)}\n`, 1024 * 1024, "\n"), {
        headers: { "content-type": "text/event-stream" },
      })
  }
}

let upstream: Server<undefined>
beforeAll(() => {
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) => answerFor((req.headers.get("x-shape") ?? "json-ok") as Shape),
  })
})
afterAll(() => upstream.stop(true))

const transports = { http1: http1Transport(), fetch: fetchTransport }

describe.each(Object.keys(transports) as Array<keyof typeof transports>)("upstream caps over %s", (name) => {
  const provider = httpProvider(openAiChatWire, transports[name])
  const open = (shape: Shape, stream: boolean) =>
    provider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${upstream.port}/v1`, { "x-shape": shape }), {
      stream,
      signal: new AbortController().signal,
      limits: LIMITS,
    })

  test("a JSON body over max_upstream_body_bytes fails as a server error, not read to its end", async () => {
    const failure = await providerErrorOf(open("json-huge", false))
    expect(failure.kind).toBe("server")
    expect(failure.message).toContain(`larger than ${LIMITS.bodyBytes} bytes`)
  })

  test("an error body over the cap keeps the upstream's status (its text is dropped)", async () => {
    const failure = await providerErrorOf(open("error-huge", false))
    expect(failure.upstreamStatus).toBe(500)
  })

  test("one SSE event over max_upstream_event_bytes fails the stream", async () => {
    for (const shape of ["event-huge", "event-many-lines"] as const) {
      const failure = await providerErrorOf(eventsOf(await open(shape, true)))
      expect([shape, failure.kind]).toEqual([shape, "server"])
      expect(failure.message).toContain(`event larger than ${LIMITS.eventBytes} bytes`)
    }
  })

  test("answers within the caps are read as before", async () => {
    expect(await eventsOf(await open("json-ok", false))).toEqual([{ type: "text", delta: "fits" }, { type: "finish", reason: "stop" }])
  })
})

describe("upstream caps through the gateway", () => {
  let gw: InProcessGateway & { stop: () => Promise<void> }
  const catalog = (url: string): ConfigFile => ({
    ...demoCatalog,
    providers: [
      ...demoCatalog.providers,
      ...(["json-huge", "event-huge"] as const).map((shape) => ({ id: shape, kind: "openai-chat" as const, base_url: url, headers: { "x-shape": shape } })),
    ],
    models: [
      ...demoCatalog.models,
      ...(["json-huge", "event-huge"] as const).map((shape) => ({
        id: `caps/${shape}`,
        context_length: 100000,
        endpoints: [{ provider: shape, upstream_model: "m", pricing: { prompt: 1, completion: 1 } }] as const,
      })),
    ],
  })
  beforeAll(async () => {
    gw = await startInProcessGateway({
      catalog: catalog(`http://127.0.0.1:${upstream.port}/v1`),
      maxUpstreamBodyBytes: LIMITS.bodyBytes,
      maxUpstreamEventBytes: LIMITS.eventBytes,
    })
  })
  afterAll(() => gw?.stop())

  test("a JSON answer over the cap is a 502", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "caps/json-huge", input: "hi" } })
    expect(res.status).toBe(502)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("larger than")
  })

  test("a streamed answer with an event over the cap ends in response.failed", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "caps/event-huge", input: "hi", stream: true } })
    expect(res.status).toBe(200)
    const { events } = parseSse(await res.text())
    const failed = events.find((e) => e.event === "response.failed")
    expect(failed).toBeDefined()
    expect(JSON.stringify(failed?.data)).toContain("event larger than")
  })
})
