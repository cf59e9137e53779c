/**
 * Parallel tool calls whose argument pieces the upstream interleaves (a Chat Completions stream
 * names each piece's call by `index`, so call A opened, call B opened, then A's and B's pieces in
 * turn is legal). A Responses or Messages client takes one item or block at a time and nothing
 * after its done/stop: every call still arrives with its whole arguments, streamed or not.
 */
import { describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import type { ResponsesRequest } from "../../src/domain/responses.js"
import { MessagesEncoder } from "../../src/formats/messages/encoder.js"
import { ResponseAssembler, type ResultBase } from "../../src/formats/responses/assembler.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import { callDelta, callStart, finishWith, text } from "../support/provider-events.js"
import { counterIds, parseSse, payloads } from "../responses/helpers.js"

const PARIS = '{"city":"Paris","unit":"celsius"}'
const BERLIN = '{"city":"Berlin"}'
const OSLO = '{"city":"Oslo","days":[1,2]}'

/** `args` in pieces of `size` characters. */
const pieces = (args: string, size = 3): Array<string> => args.match(new RegExp(`[^]{1,${size}}`, "g")) ?? []

/** Both calls opened, then one batch per piece, A's and B's alternating (the longer one's tail alone). */
const interleaved = (): Array<Array<ProviderEvent>> => {
  const a = pieces(PARIS)
  const b = pieces(BERLIN)
  const batches: Array<Array<ProviderEvent>> = [[callStart(0, "call_A", "get_weather")], [callStart(1, "call_B", "get_weather")]]
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (i < a.length) batches.push([callDelta(0, a[i] as string)])
    if (i < b.length) batches.push([callDelta(1, b[i] as string)])
  }
  batches.push([finishWith("tool_calls")])
  return batches
}

/** Three calls: A and B begun together, C's first piece with no start of its own, all three alternating. */
const threeInterleaved = (): Array<Array<ProviderEvent>> => {
  const parts = [pieces(PARIS, 4), pieces(BERLIN, 4), pieces(OSLO, 4)]
  const batches: Array<Array<ProviderEvent>> = [[callStart(0, "call_A", "a"), callStart(1, "call_B", "b")]]
  for (let i = 0; i < 12; i++) {
    for (let c = 0; c < 3; c++) {
      const piece = parts[c]?.[i]
      if (piece !== undefined) batches.push([callDelta(c, piece)])
    }
  }
  batches.push([finishWith("tool_calls")])
  return batches
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

const BASE: ResultBase = { id: "resp_test", created_at: 1_700_000_000, model: "acme/model-1" }

const runResponses = (batches: ReadonlyArray<ReadonlyArray<ProviderEvent>>, options: { stream?: boolean; fail?: boolean } = {}) => {
  const assembler = new ResponseAssembler(BASE, { stream: options.stream ?? true, newId: counterIds(), now: () => 1_700_000_009 })
  let sse = assembler.start()
  for (const batch of batches) {
    const out = assembler.push(batch)
    sse += typeof out === "string" ? out : new TextDecoder().decode(out)
  }
  sse += options.fail === true ? assembler.fail({ code: "server_error", message: "boom" }) : assembler.finish()
  return { assembler, sse }
}

interface ResponsesCall {
  readonly id: string
  readonly deltas: string
  readonly done: string
  readonly item: Record<string, unknown>
}

/**
 * The calls a strict Responses client reads, asserting its rules on the way: one item open at a
 * time, added before its deltas, nothing for it after its output_item.done, sequence numbers 0, 1, …
 */
const responsesCalls = (sse: string): Array<ResponsesCall> => {
  const list = payloads(parseSse(sse))
  expect(list.map((e) => e.sequence_number)).toEqual(list.map((_, i) => i))
  const calls: Array<ResponsesCall> = []
  const closed = new Set<string>()
  let open: { id: string; index: number; deltas: string; done?: string } | undefined
  for (const e of list) {
    switch (e.type) {
      case "response.output_item.added": {
        expect(open).toBeUndefined()
        const item = e.item as { id: string }
        expect(closed.has(item.id)).toBe(false)
        open = { id: item.id, index: e.output_index as number, deltas: "" }
        break
      }
      case "response.function_call_arguments.delta":
        expect(e.item_id).toBe(open?.id)
        expect(e.output_index).toBe(open?.index)
        if (open !== undefined) open.deltas += e.delta as string
        break
      case "response.function_call_arguments.done":
        expect(e.item_id).toBe(open?.id)
        if (open !== undefined) open.done = e.arguments as string
        break
      case "response.output_item.done": {
        expect(open).toBeDefined()
        if (open === undefined) break
        expect((e.item as { id: string }).id).toBe(open.id)
        closed.add(open.id)
        const item = e.item as Record<string, unknown>
        if (item.type === "function_call") calls.push({ id: open.id, deltas: open.deltas, done: open.done ?? "", item })
        open = undefined
        break
      }
    }
  }
  expect(open).toBeUndefined()
  return calls
}

describe("Responses: interleaved tool calls", () => {
  test("streamed: each call is one whole item, its deltas, arguments.done and output_item.done carrying its full arguments", () => {
    const { sse, assembler } = runResponses(interleaved())
    const calls = responsesCalls(sse)
    expect(calls.map((c) => [c.item.call_id, c.deltas, c.done, c.item.arguments])).toEqual([
      ["call_A", PARIS, PARIS, PARIS],
      ["call_B", BERLIN, BERLIN, BERLIN],
    ])
    const completed = payloads(parseSse(sse)).find((e) => e.type === "response.completed") as { response: { output: Array<{ arguments: string }> } }
    expect(completed.response.output.map((i) => i.arguments)).toEqual([PARIS, BERLIN])
    expect(assembler.result().output.map((i) => (i.type === "function_call" ? i.arguments : ""))).toEqual([PARIS, BERLIN])
  })

  test("not streamed: the result carries both calls' full arguments, in the order they began", () => {
    const { sse, assembler } = runResponses(interleaved(), { stream: false })
    expect(sse).toBe("")
    expect(assembler.result().output).toEqual([
      { type: "function_call", id: "fc_1", call_id: "call_A", name: "get_weather", arguments: PARIS, status: "completed" },
      { type: "function_call", id: "fc_2", call_id: "call_B", name: "get_weather", arguments: BERLIN, status: "completed" },
    ])
  })

  test("three calls, one begun by its first piece alone: three whole items in the order they began", () => {
    const { sse, assembler } = runResponses(threeInterleaved())
    const calls = responsesCalls(sse)
    expect(calls.map((c) => [c.item.name, c.deltas, c.item.arguments])).toEqual([
      ["a", PARIS, PARIS],
      ["b", BERLIN, BERLIN],
      ["", OSLO, OSLO],
    ])
    expect(assembler.result().output.length).toBe(3)
  })

  test("calls one after the other still stream each piece as it comes", () => {
    const batches: Array<Array<ProviderEvent>> = [[callStart(0, "call_A", "f")], ...pieces(PARIS).map((p) => [callDelta(0, p)])]
    batches.push([callStart(1, "call_B", "g")], ...pieces(BERLIN).map((p) => [callDelta(1, p)]), [finishWith("tool_calls")])
    const { sse } = runResponses(batches)
    const deltas = payloads(parseSse(sse)).filter((e) => e.type === "response.function_call_arguments.delta")
    expect(deltas.map((e) => e.delta)).toEqual([...pieces(PARIS), ...pieces(BERLIN)])
  })

  test("a failure mid-interleaving closes every call incomplete, each with the arguments it had", () => {
    const batches = interleaved().slice(0, 6)
    const { sse } = runResponses(batches, { fail: true })
    const calls = responsesCalls(sse)
    expect(calls.map((c) => [c.item.status, c.done])).toEqual([
      ["incomplete", pieces(PARIS).slice(0, 2).join("")],
      ["incomplete", pieces(BERLIN).slice(0, 2).join("")],
    ])
    expect(payloads(parseSse(sse)).at(-1)?.type).toBe("response.failed")
  })

  test("text after interleaved calls opens its message after both whole calls", () => {
    const batches = interleaved()
    batches.splice(-1, 0, [text("Done.")])
    const { sse, assembler } = runResponses(batches)
    expect(responsesCalls(sse).map((c) => c.done)).toEqual([PARIS, BERLIN])
    expect(assembler.result().output.map((i) => i.type)).toEqual(["function_call", "function_call", "message"])
    expect(assembler.completionText).toBe("Done.")
  })

  test("the openai SDK's responses.stream() accumulates both calls with their full arguments", async () => {
    const { sse } = runResponses(interleaved())
    const client = new OpenAI({
      apiKey: "sk-test",
      baseURL: "http://gateway.test/v1",
      maxRetries: 0,
      fetch: async () => new Response(sse, { headers: { "content-type": "text/event-stream" } }),
    })
    const stream = client.responses.stream({ model: "acme/model-1", input: "hi" })
    const done: Array<string> = []
    stream.on("response.function_call_arguments.done", (e) => done.push(e.arguments))
    const final = await stream.finalResponse()
    expect(done).toEqual([PARIS, BERLIN])
    expect(final.output.map((i) => (i.type === "function_call" ? [i.call_id, i.arguments] : []))).toEqual([
      ["call_A", PARIS],
      ["call_B", BERLIN],
    ])
  })
})

// ---------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------

const REQUEST: ResponsesRequest = { stream: true, store: false, model: "acme/model-1" }

const runMessages = (batches: ReadonlyArray<ReadonlyArray<ProviderEvent>>, options: { stream?: boolean; fail?: boolean } = {}) => {
  const enc = new MessagesEncoder(REQUEST, { stream: options.stream ?? true, model: "acme/model-1", newId: counterIds() })
  let sse = enc.start()
  for (const batch of batches) sse += enc.push(batch)
  sse += options.fail === true ? enc.fail({ code: "server_error", message: "boom" }) : enc.finish()
  return { enc, sse }
}

interface MessagesBlock {
  readonly start: Record<string, unknown>
  readonly json: string
}

/**
 * The tool_use blocks an Anthropic client reads, asserting its rules on the way: one block open at
 * a time, indexes 0, 1, … in order, no delta outside its block.
 */
const messagesBlocks = (sse: string): Array<MessagesBlock> => {
  const events = parseSse(sse).map((e) => e.data as Record<string, unknown>)
  const blocks: Array<MessagesBlock> = []
  let open: { index: number; start: Record<string, unknown>; json: string } | undefined
  let next = 0
  for (const e of events) {
    switch (e.type) {
      case "content_block_start":
        expect(open).toBeUndefined()
        expect(e.index).toBe(next++)
        open = { index: e.index as number, start: e.content_block as Record<string, unknown>, json: "" }
        break
      case "content_block_delta":
        expect(e.index).toBe(open?.index)
        if (open !== undefined && (e.delta as { type: string }).type === "input_json_delta") open.json += (e.delta as { partial_json: string }).partial_json
        break
      case "content_block_stop":
        expect(e.index).toBe(open?.index)
        if (open !== undefined && open.start.type === "tool_use") blocks.push({ start: open.start, json: open.json })
        open = undefined
        break
    }
  }
  expect(open).toBeUndefined()
  return blocks
}

describe("Messages: interleaved tool calls", () => {
  test("streamed: each call is one whole tool_use block whose input_json_delta pieces make its full input", () => {
    const { sse, enc } = runMessages(interleaved())
    const blocks = messagesBlocks(sse)
    expect(blocks.map((b) => [b.start.id, b.json])).toEqual([
      ["call_A", PARIS],
      ["call_B", BERLIN],
    ])
    expect(enc.result().content).toEqual([
      { type: "tool_use", id: "call_A", name: "get_weather", input: JSON.parse(PARIS) },
      { type: "tool_use", id: "call_B", name: "get_weather", input: JSON.parse(BERLIN) },
    ])
  })

  test("not streamed: the message carries both calls' full input", () => {
    const { sse, enc } = runMessages(interleaved(), { stream: false })
    expect(sse).toBe("")
    expect(enc.result().content).toEqual([
      { type: "tool_use", id: "call_A", name: "get_weather", input: JSON.parse(PARIS) },
      { type: "tool_use", id: "call_B", name: "get_weather", input: JSON.parse(BERLIN) },
    ])
  })

  test("three calls, one begun by its first piece alone: three whole blocks in the order they began", () => {
    const { sse, enc } = runMessages(threeInterleaved())
    expect(messagesBlocks(sse).map((b) => [b.start.name, b.json])).toEqual([
      ["a", PARIS],
      ["b", BERLIN],
      ["", OSLO],
    ])
    expect(enc.result().content.map((b) => (b.type === "tool_use" ? b.input : undefined))).toEqual([JSON.parse(PARIS), JSON.parse(BERLIN), JSON.parse(OSLO)])
  })

  test("calls one after the other still stream each piece as it comes", () => {
    const batches: Array<Array<ProviderEvent>> = [[callStart(0, "call_A", "f")], ...pieces(PARIS).map((p) => [callDelta(0, p)])]
    batches.push([callStart(1, "call_B", "g")], ...pieces(BERLIN).map((p) => [callDelta(1, p)]), [finishWith("tool_calls")])
    const { sse } = runMessages(batches)
    const deltas = parseSse(sse)
      .map((e) => e.data as Record<string, unknown>)
      .filter((e) => e.type === "content_block_delta")
      .map((e) => (e.delta as { partial_json: string }).partial_json)
    expect(deltas).toEqual([...pieces(PARIS), ...pieces(BERLIN)])
  })

  test("a failure mid-interleaving closes every block before the error event", () => {
    const { sse } = runMessages(interleaved().slice(0, 6), { fail: true })
    expect(messagesBlocks(sse).map((b) => b.json)).toEqual([pieces(PARIS).slice(0, 2).join(""), pieces(BERLIN).slice(0, 2).join("")])
    expect(parseSse(sse).at(-1)?.data).toMatchObject({ type: "error" })
  })

  test("the Anthropic SDK's messages.stream() accumulates both calls with their full input", async () => {
    const { sse } = runMessages(interleaved())
    const client = new Anthropic({
      apiKey: "sk-test",
      baseURL: "http://gateway.test",
      maxRetries: 0,
      fetch: (async () => new Response(sse, { headers: { "content-type": "text/event-stream" } })) as unknown as typeof fetch,
    })
    const stream = client.messages.stream({ model: "acme/model-1", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    const message = await stream.finalMessage()
    expect(message.content as Array<unknown>).toEqual([
      { type: "tool_use", id: "call_A", name: "get_weather", input: JSON.parse(PARIS) },
      { type: "tool_use", id: "call_B", name: "get_weather", input: JSON.parse(BERLIN) },
    ])
    expect(message.stop_reason).toBe("tool_use")
  })
})
