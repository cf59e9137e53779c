/**
 * The demo catalog (config/demo.json) as a user meets it: it loads, each routing demo does what
 * its name says, and the offline fake finishes a tool round trip and answers JSON formats.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import type OpenAI from "openai"
// zod (from @openrouter/sdk) reads JSON Schema independently of the fake's generator.
import { z } from "zod"
import { demoCatalog, parseConfigFile } from "../../src/config/Config.js"
import { useGateway } from "../support/gateway.js"
import { openaiAt } from "../support/sdk.js"

const gw = useGateway()
const client = () => openaiAt(gw())

interface Answer {
  readonly status: number
  readonly generationId: string | null
  readonly body: {
    readonly model: string
    readonly output: ReadonlyArray<{ readonly type: string; readonly content?: ReadonlyArray<{ readonly text: string }> }>
    readonly usage: { readonly cost: number; readonly is_byok: boolean }
    readonly service_metadata?: {
      readonly attempts: ReadonlyArray<{ readonly model: string; readonly provider: string; readonly status: number }>
      readonly endpoints: { readonly available: ReadonlyArray<{ readonly provider: string; readonly selected: boolean }> }
    }
  }
}

const ask = async (json: Record<string, unknown>): Promise<Answer> => {
  const res = await gw().fetch("/v1/responses", { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
  return { status: res.status, generationId: res.headers.get("x-generation-id"), body: (await res.json()) as Answer["body"] }
}

const textOf = (answer: Answer) =>
  answer.body.output.flatMap((item) => (item.type === "message" ? (item.content ?? []).map((c) => c.text) : [])).join("")

describe("the demo catalog", () => {
  test("config/demo.json loads as the built-in catalog, with every routing demo", async () => {
    const file = parseConfigFile("config/demo.json", await Bun.file(new URL("../../config/demo.json", import.meta.url)).text())
    expect(Either.isRight(file)).toBe(true)
    expect(Either.getOrThrow(file)).toEqual(demoCatalog)
    expect(demoCatalog.models.map((m) => m.id)).toEqual(["demo/echo", "demo/free", "demo/fallback", "demo/slow", "demo/byok", "demo/embed", "demo/rerank"])
  })

  test("demo/fallback: its first endpoint fails with 503, the second answers", async () => {
    const answer = await ask({ model: "demo/fallback", input: "hello fallback" })
    expect(answer.status).toBe(200)
    expect(textOf(answer)).toBe("Echo: hello fallback")
    expect(answer.body.service_metadata?.attempts).toEqual([
      { model: "demo/fallback", provider: "flaky", status: 503 },
      { model: "demo/fallback", provider: "fake-backup", status: 200 },
    ])
    // Billed at the endpoint that answered ($1.5 / $3 per million tokens): 4 tokens in, 3 out.
    expect(answer.body.usage.cost).toBeCloseTo((4 * 1.5 + 3 * 3) / 1e6, 12)
  })

  test("demo/free: zero-priced, so it costs nothing", async () => {
    const answer = await ask({ model: "demo/free", input: "hello free" })
    expect(answer.status).toBe(200)
    expect(answer.body.usage.cost).toBe(0)
  })

  test("demo/slow: a stream's first token comes after the endpoint's scripted second", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/slow", input: "hi", stream: true } })
    expect(res.status).toBe(200)
    const body = await res.text()
    expect(body).toContain('"delta":"Echo: "')
    const id = res.headers.get("x-generation-id")
    const generation = (await (await gw().fetch(`/v1/generation?id=${id}`)).json()) as { data: { latency: number; streamed: boolean } }
    expect(generation.data.streamed).toBe(true)
    // A lower bound only: the fake waits at least this long, however fast the machine.
    expect(generation.data.latency).toBeGreaterThanOrEqual(1000)
  })

  test("demo/byok: spend through a byok provider is marked BYOK and counted as the key's byok_usage", async () => {
    const before = (await (await gw().fetch("/v1/key")).json()) as { data: { byok_usage: number; usage: number } }
    const answer = await ask({ model: "demo/byok", input: "hello byok" })
    expect(answer.status).toBe(200)
    expect(answer.body.usage.is_byok).toBe(true)
    expect(answer.body.usage.cost).toBeGreaterThan(0)
    const after = (await (await gw().fetch("/v1/key")).json()) as { data: { byok_usage: number; usage: number } }
    expect(after.data.byok_usage - before.data.byok_usage).toBeCloseTo(answer.body.usage.cost, 12)
    expect(after.data.usage).toBe(before.data.usage)
  })
})

describe("the demo catalog with the openai client", () => {
  const weather = {
    type: "function" as const,
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    strict: false,
  }

  test("a tool-call round trip ends in text that uses the tool's output", async () => {
    const input: Array<OpenAI.Responses.ResponseInputItem> = [{ role: "user", content: "Weather in Paris? [tool:get_weather]" }]
    const first = await client().responses.create({ model: "demo/echo", input, tools: [weather] })
    const call = first.output.find((item) => item.type === "function_call")
    if (call?.type !== "function_call") throw new Error(`no function call: ${JSON.stringify(first.output)}`)
    input.push(call, { type: "function_call_output", call_id: call.call_id, output: '{"temperature_c":21}' })
    const second = await client().responses.create({ model: "demo/echo", input, tools: [weather] })
    expect(second.output.some((item) => item.type === "function_call")).toBe(false)
    expect(second.output_text).toBe('The tool get_weather answered: {"temperature_c":21}')
  })

  test("text.format json_schema: the answer parses and is valid against the schema, streamed or not", async () => {
    const schema = {
      type: "object",
      properties: { city: { type: "string" }, temperature_c: { type: "number" }, sky: { type: "string", enum: ["clear", "cloudy"] } },
      required: ["city", "temperature_c", "sky"],
      additionalProperties: false,
    }
    const format = { type: "json_schema" as const, name: "weather", schema, strict: true }
    const answer = await client().responses.create({ model: "demo/echo", input: "Weather in Paris?", text: { format } })
    const validator = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0])
    expect(validator.safeParse(JSON.parse(answer.output_text)).success).toBe(true)
    const stream = client().responses.stream({ model: "demo/echo", input: "Weather in Paris?", text: { format } })
    const streamed = await stream.finalResponse()
    expect(validator.safeParse(JSON.parse(streamed.output_text)).success).toBe(true)
  })
  test("the fusion server tool on the demo: the fake calls fusion with a {prompt}, the panel and the judge answer, the model ends in text", async () => {
    const response = await client().responses.create({
      model: "demo/echo",
      input: "Is tea better than coffee? [tool:fusion]",
      tools: [{ type: "openrouter:fusion", parameters: { analysis_models: ["demo/echo", "demo/free"], model: "demo/echo", tools: [] } }] as never,
    })
    const item = response.output.find((o) => (o.type as string) === "openrouter:fusion") as unknown as {
      status: string
      responses: ReadonlyArray<{ model: string; content: string }>
      analysis?: Record<string, unknown>
    }
    expect(item.status).toBe("completed")
    // The panel got the prompt the fake filled from the message, its marker left out.
    expect(item.responses).toEqual([
      { model: "demo/echo", content: "Echo: Is tea better than coffee?" },
      { model: "demo/free", content: "Echo: Is tea better than coffee?" },
    ])
    expect(Object.keys(item.analysis ?? {}).sort()).toEqual(["blind_spots", "consensus", "contradictions", "partial_coverage", "unique_insights"])
    expect(response.output_text).toStartWith("The tool fusion answered: ")
  })
})
