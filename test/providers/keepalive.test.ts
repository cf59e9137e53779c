/** Upstream connections are reused across calls, even when the body ends a little after its terminal event. */
import { afterAll, beforeAll, expect, test } from "bun:test"
import type { Server } from "bun"
import { anthropicProvider } from "../../src/providers/anthropic/adapter"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import { openAiResponsesProvider } from "../../src/providers/openai-responses/adapter"
import { configFor, eventsOf, textRequest } from "./helpers"

const TERMINAL: Record<string, string> = {
  "/v1/chat/completions": 'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
  "/v1/responses": 'event: response.completed\ndata: {"type":"response.completed","response":{"status":"completed"}}\n\n',
  "/v1/messages": 'event: message_stop\ndata: {"type":"message_stop"}\n\n',
}

const clientPorts = new Set<number>()
let server: Server<undefined>
beforeAll(() => {
  const encoder = new TextEncoder()
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req, srv) {
      clientPorts.add(srv.requestIP(req)?.port ?? -1)
      const terminal = encoder.encode(TERMINAL[new URL(req.url).pathname])
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(controller) {
            controller.enqueue(terminal)
            // The end of the chunked body comes after the terminal event, as it may on a real network.
            await Bun.sleep(5)
            controller.close()
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      )
    },
  })
})
afterAll(() => server.stop(true))

for (const [kind, provider] of [
  ["openai-chat", openAiChatProvider],
  ["openai-responses", openAiResponsesProvider],
  ["anthropic", anthropicProvider],
] as const) {
  test(`${kind}: sequential streamed calls share one keep-alive connection`, async () => {
    clientPorts.clear()
    for (let i = 0; i < 4; i++) {
      const call = await provider.open(textRequest("hi"), configFor(kind, `http://127.0.0.1:${server.port}/v1`), { stream: true, signal: new AbortController().signal })
      const events = await eventsOf(call)
      expect(events[events.length - 1].type).toBe("finish")
      // Time for the rest of the body (5 ms behind) to be read off the caller's path: 100 ms, as on a
      // loaded machine (the suite's files run two at a time) 25 ms was seen to fall short.
      await Bun.sleep(100)
    }
    expect(clientPorts.size).toBe(1)
  })
}
