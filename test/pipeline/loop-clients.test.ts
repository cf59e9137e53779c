/**
 * The server-tool loop read by the official clients: the official SDK of this API family
 * (`@openrouter/sdk`: its zod schemas validate the `openrouter:datetime` item, the usage's
 * `server_tool_use_details` and every stream event) and `openai` (its stream reader throws when
 * an event's `output_index` names no item it saw added), over a loop of three turns.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type { OpenResponsesResult } from "@openrouter/sdk/models"
import type { CreateResponsesResponse } from "@openrouter/sdk/models/operations"
import type OpenAI from "openai"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { endpoint, mockProvider, model } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { openaiAt, openRouterAt, readStream, validated } from "../support/sdk.js"

let mock: MockUpstream
let gw: TestGateway & { stop: () => Promise<void> }

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startTestGateway({
    catalog: {
      providers: [mockProvider(mock, "twice", { "x-mock-server-tool-calls": "2" })],
      models: [model("test/twice", endpoint("twice", 1, 2))],
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const sdk = () => openRouterAt(gw)
const openai = () => openaiAt(gw)

const whole = (r: CreateResponsesResponse): OpenResponsesResult => {
  if (Symbol.asyncIterator in r) throw new Error("expected a JSON result, got a stream")
  return r
}

const REQUEST = { model: "test/twice", input: "what time is it?", tools: [{ type: "openrouter:datetime" as const }] }

describe("@openrouter/sdk", () => {
  test("JSON: the datetime items and the answer validate, with server_tool_use_details", async () => {
    const result = whole(await validated(sdk().responses.send({ responsesRequest: REQUEST })))
    expect(result.status).toBe("completed")
    expect(result.output.map((i) => i.type)).toEqual(["openrouter:datetime", "openrouter:datetime", "message"])
    const item = result.output[0] as { type: string; timezone: string; datetime: string; status: string }
    expect(item.timezone).toBe("UTC")
    expect(item.status).toBe("completed")
    expect(result.usage?.serverToolUseDetails).toEqual({ toolCallsRequested: 2, toolCallsExecuted: 2, webSearchRequests: 0 })
  })

  test("stream: every event validates; one response.created; the items in order; ends completed", async () => {
    const stream = await validated(sdk().responses.send({ responsesRequest: { ...REQUEST, stream: true } }))
    if (!(Symbol.asyncIterator in stream)) throw new Error("expected a stream")
    const { events, types, text } = await validated(readStream(stream))
    const indexes = events.flatMap((e) => (e.type === "response.output_item.added" ? [e.outputIndex] : []))
    expect(types.filter((t) => t === "response.created")).toHaveLength(1)
    expect(indexes).toEqual([0, 1, 2])
    expect(types[types.length - 1]).toBe("response.completed")
    expect(text).toStartWith("Tool output: ")
  })
})

describe("openai", () => {
  test("responses.create({stream: true}) reads the whole loop", async () => {
    const stream = await openai().responses.create({ ...REQUEST, stream: true } as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    const { types, text } = await readStream(stream)
    expect(types[0]).toBe("response.created")
    expect(types[types.length - 1]).toBe("response.completed")
    expect(text).toStartWith("Tool output: ")
  })

  test("responses.stream().finalResponse() assembles the items of every turn", async () => {
    const runner = openai().responses.stream(REQUEST as unknown as OpenAI.Responses.ResponseCreateParamsStreaming)
    const final = await runner.finalResponse()
    expect(final.output.map((i) => i.type as string)).toEqual(["openrouter:datetime", "openrouter:datetime", "message"])
    expect(final.output_text).toStartWith("Tool output: ")
  })
})
