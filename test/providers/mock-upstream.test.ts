/** The mock upstream itself: each format's real event sequence, its knobs, its log and its CLI. */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { type MockUpstream, parseMockArgs, startMockUpstream } from "../../scripts/mock-upstream"
import { createSseParser, endSse, feedSse, type SseEvent } from "../../src/providers/sse"
import { textAnswerTypes } from "../support/sse.js"

let mock: MockUpstream
beforeAll(async () => {
  mock = await startMockUpstream({ port: 0, tokens: 2 })
})
afterAll(async () => {
  await mock.stop()
})
beforeEach(() => mock.reset())

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(mock.url + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })

const sseOf = async (response: Response): Promise<Array<SseEvent>> => {
  const parser = createSseParser()
  return feedSse(parser, await response.text()).concat(endSse(parser))
}

describe("mock upstream wire formats", () => {
  test("chat streams a role chunk, content chunks, a finish chunk, a usage chunk and [DONE]", async () => {
    const events = await sseOf(await post("/chat/completions", { model: "m", stream: true, stream_options: { include_usage: true } }))
    expect(events[events.length - 1]).toEqual({ data: "[DONE]" })
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.data))
    expect(chunks.map((chunk) => chunk.choices[0]?.delta ?? null)).toEqual([{ role: "assistant", content: "" }, { content: "tok " }, { content: "tok " }, {}, null])
    expect(chunks[3].choices[0].finish_reason).toBe("stop")
    expect(chunks[4].usage.completion_tokens).toBe(2)
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk" && chunk.model === "m")).toBe(true)
  })

  test("chat sends no usage chunk unless stream_options.include_usage asks", async () => {
    const events = await sseOf(await post("/chat/completions", { model: "m", stream: true }))
    expect(events.some((event) => event.data.includes('"usage"'))).toBe(false)
  })

  test("responses events carry consecutive sequence numbers from created to completed", async () => {
    const events = await sseOf(await post("/responses", { model: "m", stream: true }))
    const data = events.map((event) => JSON.parse(event.data))
    expect(data.map((item) => item.sequence_number)).toEqual(data.map((_, index) => index))
    expect(events.every((event, index) => event.event === data[index].type)).toBe(true)
    expect(data.map((item) => item.type)).toEqual(textAnswerTypes(2))
    expect(data[9].response.output[0].content[0].text).toBe("tok tok ")
  })

  test("anthropic streams message_start … message_stop", async () => {
    const events = await sseOf(await post("/messages", { model: "m", stream: true }))
    expect(events.map((event) => event.event)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ])
    expect(events.every((event) => JSON.parse(event.data).type === event.event)).toBe(true)
  })

  test("a chunk with quotes and backslashes stays valid JSON in every format", async () => {
    const chunk = 'say "hi" \\o/'
    const headers = { "x-mock-chunk": chunk }
    const chat = await (await post("/chat/completions", { model: "m" }, headers)).json()
    expect(chat.choices[0].message.content).toBe(chunk.repeat(2))
    const messages = await sseOf(await post("/messages", { model: "m", stream: true }, headers))
    expect(JSON.parse(messages[3].data).delta.text).toBe(chunk)
    const responses = await sseOf(await post("/responses", { model: "m", stream: true, tools: [{ type: "function", name: "f" }] }, { ...headers, "x-mock-scenario": "tool_call" }))
    expect(JSON.parse(JSON.parse(responses[responses.length - 1].data).response.output[0].arguments)).toEqual({ input: chunk.repeat(2) })
  })

  test("errors come in each format's error shape, 429 with Retry-After", async () => {
    const chat = await post("/chat/completions", { model: "m" }, { "x-mock-error": "429" })
    expect(chat.status).toBe(429)
    expect(chat.headers.get("retry-after")).toBe("1")
    expect((await chat.json()).error.code).toBe("rate_limit_exceeded")
    const anthropic = await post("/messages", { model: "m" }, { "x-mock-error": "overloaded" })
    expect(anthropic.status).toBe(529)
    expect(await anthropic.json()).toEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
  })

  test("an error rate of 1 always fails with 500, of 0 never", async () => {
    expect((await post("/responses", { model: "m" }, { "x-mock-error-rate": "1" })).status).toBe(500)
    expect((await post("/responses", { model: "m" }, { "x-mock-error-rate": "0" })).status).toBe(200)
  })

  test("x-mock-delay-ms delays the head and x-mock-ttft-ms the first token", async () => {
    let started = performance.now()
    const response = await post("/chat/completions", { model: "m", stream: true }, { "x-mock-delay-ms": "60" })
    expect(performance.now() - started).toBeGreaterThanOrEqual(55)
    await response.text()
    started = performance.now()
    const slow = await post("/chat/completions", { model: "m", stream: true }, { "x-mock-ttft-ms": "80" })
    expect(performance.now() - started).toBeLessThan(60)
    await slow.text()
    expect(performance.now() - started).toBeGreaterThanOrEqual(75)
  })

  test("a body that is not JSON is refused with 400", async () => {
    const response = await fetch(mock.url + "/chat/completions", { method: "POST", body: "{nope" })
    expect(response.status).toBe(400)
  })
})

describe("mock upstream log and counters", () => {
  test("logs requests and counts streams, over HTTP too, and resets", async () => {
    await (await post("/messages", { model: "m", stream: true }, { "x-trace": "1" })).text()
    await (await post("/messages", { model: "m" })).text()
    expect(mock.requests.map((request) => request.path)).toEqual(["/v1/messages", "/v1/messages"])
    expect(mock.requests[0].headers["x-trace"]).toBe("1")
    expect(mock.requests[0].body).toEqual({ model: "m", stream: true })
    const stats = await (await fetch(mock.url.replace("/v1", "/__mock/stats"))).json()
    expect(stats).toMatchObject({ open: 0, completed: 1, aborted: 0, failed: 0 })
    expect(stats.sent).toBeGreaterThan(0)
    const logged = await (await fetch(mock.url.replace("/v1", "/__mock/requests"))).json()
    expect(logged.length).toBe(2)
    expect((await fetch(mock.url.replace("/v1", "/__mock/reset"), { method: "POST" })).status).toBe(204)
    expect(mock.requests.length).toBe(0)
    expect(mock.stats.completed).toBe(0)
  })

  test("keeps only the newest requests up to its limit", async () => {
    const small = await startMockUpstream({ port: 0, maxLoggedRequests: 2 })
    try {
      for (const model of ["a", "b", "c"]) {
        await fetch(small.url + "/chat/completions", { method: "POST", body: JSON.stringify({ model }) })
      }
      expect(small.requests.map((request) => (request.body as { model: string }).model)).toEqual(["b", "c"])
    } finally {
      await small.stop()
    }
  })
})

describe("mock upstream CLI", () => {
  test("parses its flags", () => {
    expect(parseMockArgs(["--port", "9100", "--ttft-ms", "5", "--tokens", "50", "--interval-ms", "2", "--error-rate", "0.1", "--scenario", "tool_call", "--error", "503", "--chunk", "ab"])).toEqual({
      port: 9100,
      ttftMs: 5,
      tokens: 50,
      intervalMs: 2,
      errorRate: 0.1,
      scenario: "tool_call",
      error: "503",
      chunk: "ab",
    })
    expect(() => parseMockArgs(["--tokens", "many"])).toThrow()
    expect(() => parseMockArgs(["--bogus", "1"])).toThrow()
    expect(() => parseMockArgs(["--scenario", "poetry"])).toThrow()
  })

  test("runs as a server when executed directly", async () => {
    const child = Bun.spawn([process.execPath, "scripts/mock-upstream.ts", "--port", "0", "--tokens", "4", "--chunk", "x"], { stdout: "pipe", stderr: "pipe" })
    try {
      const reader = child.stdout.getReader()
      const { value } = await reader.read()
      const line = new TextDecoder().decode(value)
      const url = /listening on (\S+)/.exec(line)?.[1]
      expect(url).toBeDefined()
      const response = await fetch(`${url}/chat/completions`, { method: "POST", body: JSON.stringify({ model: "m" }) })
      expect((await response.json()).choices[0].message.content).toBe("xxxx")
    } finally {
      child.kill()
      await child.exited
    }
  })
})
