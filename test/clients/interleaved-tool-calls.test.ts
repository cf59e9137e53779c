/**
 * The official clients against a gateway whose Chat Completions upstream streams two parallel tool
 * calls with their argument pieces interleaved (both calls opened, then A's and B's pieces in turn,
 * each naming its call by `index`): POST /v1/responses through `openai` and POST /v1/messages
 * through `@anthropic-ai/sdk` each get both calls with their full arguments. A request that does not
 * stream asks the upstream for one JSON body (no interleaving there): test/formats covers the
 * non-streamed answer built from an interleaved stream.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import type Anthropic from "@anthropic-ai/sdk"
import { demoCatalog } from "../../src/config/Config.js"
import { MOCK_UPSTREAM_KEY_ENV } from "../support/catalog.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { anthropicAt, openaiAt } from "../support/sdk.js"

const PARIS = '{"city":"Paris","unit":"celsius"}'
const BERLIN = '{"city":"Berlin"}'

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-x", object: "chat.completion.chunk", created: 1, model: "upstream", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

/** The upstream's stream: call A opened, call B opened, then their pieces alternating. */
const interleavedStream = (): string => {
  let sse = chunk({ role: "assistant", content: null })
  sse += chunk({ tool_calls: [{ index: 0, id: "call_A", type: "function", function: { name: "get_weather", arguments: "" } }] })
  sse += chunk({ tool_calls: [{ index: 1, id: "call_B", type: "function", function: { name: "get_weather", arguments: "" } }] })
  for (let i = 0; i < Math.max(PARIS.length, BERLIN.length); i += 2) {
    if (i < PARIS.length) sse += chunk({ tool_calls: [{ index: 0, function: { arguments: PARIS.slice(i, i + 2) } }] })
    if (i < BERLIN.length) sse += chunk({ tool_calls: [{ index: 1, function: { arguments: BERLIN.slice(i, i + 2) } }] })
  }
  sse += chunk({}, "tool_calls")
  sse += `data: ${JSON.stringify({ id: "chatcmpl-x", object: "chat.completion.chunk", created: 1, model: "upstream", choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })}\n\n`
  return `${sse}data: [DONE]\n\n`
}

/** The same answer as one JSON body, for an upstream request that does not stream. */
const wholeAnswer = () => ({
  id: "chatcmpl-x",
  object: "chat.completion",
  created: 1,
  model: "upstream",
  choices: [
    {
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_A", type: "function", function: { name: "get_weather", arguments: PARIS } },
          { id: "call_B", type: "function", function: { name: "get_weather", arguments: BERLIN } },
        ],
      },
    },
  ],
  usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
})

let upstream: ReturnType<typeof Bun.serve>
let gw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  process.env[MOCK_UPSTREAM_KEY_ENV] = "sk-upstream-secret"
  upstream = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      const body = (await req.json()) as { stream?: boolean }
      return body.stream === true ? new Response(interleavedStream(), { headers: { "content-type": "text/event-stream" } }) : Response.json(wholeAnswer())
    },
  })
  gw = await startTestGateway({
    catalog: {
      ...demoCatalog,
      providers: [
        ...demoCatalog.providers,
        { id: "interleaving", kind: "openai-chat", base_url: `http://127.0.0.1:${upstream.port}/v1`, api_key_env: MOCK_UPSTREAM_KEY_ENV },
      ],
      models: [
        ...demoCatalog.models,
        { id: "mock/interleaving", context_length: 100_000, endpoints: [{ provider: "interleaving", upstream_model: "upstream", pricing: { prompt: 1, completion: 1 } }] },
      ],
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  upstream?.stop(true)
})

const MODEL = "mock/interleaving"
const WEATHER_FN = { type: "function" as const, name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }
const WEATHER_TOOL: Anthropic.Tool = { name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }

describe("POST /v1/responses with interleaved upstream tool calls", () => {
  test("responses.stream(): both function_call items carry their full arguments, in deltas, done events and the final response", async () => {
    const stream = openaiAt(gw).responses.stream({ model: MODEL, input: "Weather in Paris and Berlin?", tools: [WEATHER_FN] })
    const deltas = new Map<string, string>()
    const done: Array<string> = []
    stream.on("response.function_call_arguments.delta", (e) => deltas.set(e.item_id, (deltas.get(e.item_id) ?? "") + e.delta))
    stream.on("response.function_call_arguments.done", (e) => done.push(e.arguments))
    const final = await stream.finalResponse()
    const calls = final.output.flatMap((i) => (i.type === "function_call" ? [i] : []))
    expect(calls.map((c) => [c.call_id, c.arguments])).toEqual([
      ["call_A", PARIS],
      ["call_B", BERLIN],
    ])
    expect(done).toEqual([PARIS, BERLIN])
    expect(calls.map((c) => deltas.get(c.id ?? ""))).toEqual([PARIS, BERLIN])
  })

  test("responses.create() (the upstream answers whole): the JSON answer carries both calls' full arguments", async () => {
    const response = await openaiAt(gw).responses.create({ model: MODEL, input: "Weather in Paris and Berlin?", tools: [WEATHER_FN] })
    expect(response.output.flatMap((i) => (i.type === "function_call" ? [[i.call_id, i.arguments]] : []))).toEqual([
      ["call_A", PARIS],
      ["call_B", BERLIN],
    ])
  })
})

describe("POST /v1/messages with interleaved upstream tool calls", () => {
  test("messages.stream(): both tool_use blocks carry their full input", async () => {
    const stream = anthropicAt(gw).messages.stream({ model: MODEL, max_tokens: 64, tools: [WEATHER_TOOL], messages: [{ role: "user", content: "Weather in Paris and Berlin?" }] })
    const json: Array<string> = []
    stream.on("inputJson", (partial) => json.push(partial))
    const message = await stream.finalMessage()
    expect(message.content as Array<unknown>).toEqual([
      { type: "tool_use", id: "call_A", name: "get_weather", input: JSON.parse(PARIS) },
      { type: "tool_use", id: "call_B", name: "get_weather", input: JSON.parse(BERLIN) },
    ])
    expect(json.join("")).toBe(PARIS + BERLIN)
    expect(message.stop_reason).toBe("tool_use")
  })

  test("messages.create() (the upstream answers whole): the message carries both calls' full input", async () => {
    const message = await anthropicAt(gw).messages.create({ model: MODEL, max_tokens: 64, tools: [WEATHER_TOOL], messages: [{ role: "user", content: "Weather in Paris and Berlin?" }] })
    expect(message.content as Array<unknown>).toEqual([
      { type: "tool_use", id: "call_A", name: "get_weather", input: JSON.parse(PARIS) },
      { type: "tool_use", id: "call_B", name: "get_weather", input: JSON.parse(BERLIN) },
    ])
  })
})
