/**
 * An openai-chat stream read over loopback, split into HTTP chunks anywhere (inside an event, a
 * literal, a UTF-8 character), framed with LF or CRLF, with comments and a byte order mark: the
 * events are those of parsing every data line with JSON.parse, whichever way each byte went
 * (read from the bytes in place, or decoded and parsed).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { openAiChatProvider } from "../../src/providers/openai-chat/adapter"
import type { ProviderEvent } from "../../src/providers/types"
import { configFor, literalTexts, textRequest } from "./helpers"

const HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":['
const textChunk = (content: string) => `${HEAD}{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}`
const FINISH = `${HEAD}{"index":0,"delta":{},"finish_reason":"stop"}]}`
const USAGE = `${HEAD}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`

/** Bun's direct stream: each write is one HTTP chunk once flushed. */
const DirectStream = ReadableStream as unknown as new (source: Bun.DirectUnderlyingSource<Uint8Array>) => ReadableStream<Uint8Array>

/** The body of the next answer, as the HTTP chunks to send. */
const bodies = new Map<string, ReadonlyArray<Uint8Array>>()
let server: ReturnType<typeof Bun.serve> | undefined
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    fetch: (req) => {
      const chunks = bodies.get(req.headers.get("x-body") ?? "") ?? []
      // Apart in time, each chunk is a read of its own at the client.
      const pauseMs = Number(req.headers.get("x-pause-ms") ?? 0)
      const source: Bun.DirectUnderlyingSource<Uint8Array> = {
        type: "direct",
        async pull(controller) {
          for (const chunk of chunks) {
            controller.write(chunk)
            await controller.flush()
            if (pauseMs > 0) await Bun.sleep(pauseMs)
          }
          controller.close()
        },
      }
      return new Response(new DirectStream(source), { headers: { "content-type": "text/event-stream" } })
    },
  })
})
afterAll(() => server?.stop(true))

let seed = 11
const next = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed
}
const alphabet = ["a", "b", " ", '"', "\\", "\n", "\t", "é", "😀", "\u2028", "/", "{", "}", ":", "data: "]

const eventsOver = async (id: string, chunks: ReadonlyArray<Uint8Array>, pauseMs = 0, events: Array<ProviderEvent> = []): Promise<Array<ProviderEvent>> => {
  bodies.set(id, chunks)
  const headers = { "x-body": id, "x-pause-ms": String(pauseMs) }
  const call = await openAiChatProvider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${server!.port}/v1`, headers), {
    stream: true,
    signal: new AbortController().signal,
    apiKey: "sk-test",
  })
  for await (const batch of call.events) events.push(...batch.flatMap(literalTexts))
  return events
}

test("random streams split anywhere: the same events as parsing every chunk, and literals that decode to their deltas", async () => {
  const encoder = new TextEncoder()
  let inPlace = 0
  for (let round = 0; round < 60; round++) {
    const contents = Array.from({ length: 1 + (next() % 30) }, () => Array.from({ length: next() % 5 }, () => alphabet[next() % alphabet.length]).join(""))
    const crlf = round % 5 === 4
    const eol = crlf ? "\r\n" : "\n"
    const lines = [...contents.map(textChunk), FINISH, USAGE, "[DONE]"].map((d, i) => (i % 7 === 3 ? `: comment${eol}` : "") + `data: ${d}${eol}${eol}`)
    const bytes = encoder.encode((round % 3 === 0 ? "\uFEFF" : "") + lines.join(""))
    // Cut where events end (as upstreams mostly send them), and, in half the rounds, also
    // anywhere; a third of the rounds send each chunk apart, as a read of its own.
    const ends = new Set<number>()
    let offset = round % 3 === 0 ? 3 : 0
    for (const line of lines) {
      offset += encoder.encode(line).length
      if (next() % 3 !== 0) ends.add(offset)
    }
    if (round % 2 === 1) for (let i = 0; i < 1 + (next() % 8); i++) ends.add(1 + (next() % (bytes.length - 1)))
    const cuts = [0, ...[...ends].filter((e) => e > 0 && e < bytes.length).sort((a, b) => a - b), bytes.length]
    const chunks = cuts.slice(1).map((end, i) => bytes.slice(cuts[i], end))
    const events = await eventsOver(`r${round}`, chunks, round % 3 === 2 ? 1 : 0)
    const expected: Array<ProviderEvent> = [
      ...contents.filter((c) => c !== "").map((delta): ProviderEvent => ({ type: "text", delta })),
      { type: "usage", usage: { inputTokens: 3, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 4, reasoningTokens: 0 } },
      { type: "finish", reason: "stop" },
    ]
    const plain = events.map((e) => {
      if (e.type !== "text" || e.json === undefined) return e
      expect(JSON.parse(e.json)).toBe(e.delta)
      inPlace++
      return { type: "text" as const, delta: e.delta }
    })
    expect(plain).toEqual(expected)
  }
  expect(inPlace).toBeGreaterThan(100)
})

test("an event still being built takes the next line as its own: two data lines are one event, not JSON, as the full parse says", async () => {
  const encoder = new TextEncoder()
  const chunks = [`data: ${textChunk("learn")}\n\n`, `data: ${textChunk("x")}\n`, `data: ${textChunk("y")}\n\n`, "data: [DONE]\n\n"].map((t) => encoder.encode(t))
  const events: Array<ProviderEvent> = []
  const error = await eventsOver("two-lines", chunks, 30, events).then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(String(error)).toContain("not JSON")
  expect(events.map((e) => (e.type === "text" ? e.delta : e.type))).toEqual(["learn"])
})

test("a whole answer in one read (a fast upstream): its text events after the first are taken from the bytes, and are the same events", async () => {
  const encoder = new TextEncoder()
  const role = `${HEAD}{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
  const contents = Array.from({ length: 200 }, (_, i) => `tok ${i} `)
  for (const eol of ["\n", "\r\n"]) {
    const body = [role, ...contents.map(textChunk), FINISH, USAGE, "[DONE]"].map((d) => `data: ${d}${eol}${eol}`).join("")
    bodies.set(`whole${eol.length}`, [encoder.encode(body)])
    const call = await openAiChatProvider.open(textRequest("hi"), configFor("openai-chat", `http://127.0.0.1:${server!.port}/v1`, { "x-body": `whole${eol.length}` }), {
      stream: true,
      signal: new AbortController().signal,
      apiKey: "sk-test",
    })
    const raw: Array<ProviderEvent> = []
    for await (const batch of call.events) raw.push(...batch)
    expect(raw.flatMap(literalTexts).map((e) => (e.type === "text" ? e.delta : e.type))).toEqual([...contents, "usage", "finish"])
    // LF-framed: the first text event is parsed (the translator learns its shape), the other 199 are one run of
    // literals in the read. The learned shape ends in LF LF, so a CRLF-framed answer is parsed as a whole.
    const runs = raw.filter((e) => e.type === "text_literals")
    expect(runs.map((e) => (e.type === "text_literals" ? e.spans.length / 2 : 0))).toEqual(eol === "\n" ? [199] : [])
  }
})
