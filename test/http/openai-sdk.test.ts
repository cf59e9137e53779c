/** The official openai npm client, pointed at the gateway, works unchanged. */
import { describe, expect, test } from "bun:test"
import OpenAI from "openai"
// zod (from @openrouter/sdk) checks the tool's arguments independently of the fake's generator.
import { z } from "zod"
import { useGateway } from "../support/gateway.js"
import { caught, openaiAt, readStream } from "../support/sdk.js"

const gw = useGateway()
const client = () => openaiAt(gw())

describe("the openai client", () => {
  test("responses.create returns the text and usage", async () => {
    const response = await client().responses.create({ model: "demo/echo", input: "hello sdk" })
    expect(response.output_text).toBe("Echo: hello sdk")
    expect(response.status).toBe("completed")
    expect(response.usage?.input_tokens).toBe(3)
    expect(response.usage?.output_tokens).toBe(3)
    expect(response.usage?.total_tokens).toBe(6)
  })

  test("responses.create({stream: true}) iterates to the end", async () => {
    const stream = await client().responses.create({ model: "demo/echo", input: "stream me please", stream: true })
    const { events, types, text } = await readStream(stream)
    expect(types[0]).toBe("response.created")
    expect(types[types.length - 1]).toBe("response.completed")
    expect(text).toBe("Echo: stream me please")
    const final = events.at(-1)
    expect(final?.type === "response.completed" ? final.response.usage?.output_tokens : undefined).toBe(4)
  })

  test("responses.stream().finalResponse() assembles the answer", async () => {
    const runner = client().responses.stream({ model: "demo/echo", input: "final answer please" })
    const deltas: Array<string> = []
    runner.on("response.output_text.delta", (e) => deltas.push(e.delta))
    const response = await runner.finalResponse()
    expect(response.output_text).toBe("Echo: final answer please")
    expect(deltas.join("")).toBe("Echo: final answer please")
    expect(response.usage?.input_tokens).toBe(5)
  })

  test("function calls come back as typed output items", async () => {
    const response = await client().responses.create({
      model: "demo/echo",
      input: "call it [tool:lookup]",
      tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} }, strict: false }],
    })
    const call = response.output.find((o) => o.type === "function_call")
    expect(call?.type === "function_call" ? call.name : undefined).toBe("lookup")
  })

  test("errors surface as the SDK's typed errors with the status", async () => {
    const notFound = await caught(client().responses.create({ model: "nobody/none", input: "x" }))
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError)
    const denied = await caught(openaiAt(gw(), "sk-gw-v1-nope").responses.create({ model: "demo/echo", input: "x" }))
    expect(denied).toBeInstanceOf(OpenAI.AuthenticationError)
    const invalid = await caught(client().responses.create({ model: "demo/echo", input: "x", metadata: { "a[b]": "c" } }))
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
    expect((invalid as Error).message).toContain("metadata")
  })
  test("chat.completions.runTools with a {city} weather tool (a required string) runs to its final answer on the demo", async () => {
    const cities: Array<string> = []
    const runner = client().chat.completions.runTools({
      model: "demo/echo",
      messages: [{ role: "user", content: "What is the weather in Paris? [tool:get_weather]" }],
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "The current weather of a city",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
            // The SDK hands the model's arguments to `parse`; zod refuses anything but {city: string}.
            parse: (args: string) => z.object({ city: z.string() }).strict().parse(JSON.parse(args)),
            function: ({ city }: { city: string }) => {
              cities.push(city)
              return JSON.stringify({ city, temperature_c: 21 })
            },
          },
        },
      ],
    })
    const final = await runner.finalContent()
    expect(cities).toEqual(["What is the weather in Paris?"])
    expect(final).toBe(`The tool get_weather answered: ${JSON.stringify({ city: "What is the weather in Paris?", temperature_c: 21 })}`)
    // One call that asked for the tool, one that answered with its output.
    expect((await runner.totalUsage()).prompt_tokens).toBeGreaterThan(0)
    expect(runner.messages.filter((m) => m.role === "tool")).toHaveLength(1)
  })
  test("a forced function call (how structured-output helpers ask) is answered with arguments valid against its schema, no marker needed", async () => {
    const completion = await client().chat.completions.create({
      model: "demo/echo",
      messages: [{ role: "user", content: "Alice is 31 and lives in Oslo" }],
      tools: [
        {
          type: "function",
          function: {
            name: "person",
            parameters: {
              type: "object",
              properties: { name: { type: "string" }, age: { type: "integer", minimum: 0 }, city: { type: "string" } },
              required: ["name", "age", "city"],
              additionalProperties: false,
            },
          },
        },
      ],
      tool_choice: { type: "function", function: { name: "person" } },
    })
    const call = completion.choices[0]?.message.tool_calls?.[0]
    expect(call?.type === "function" ? call.function.name : undefined).toBe("person")
    const args = call?.type === "function" ? JSON.parse(call.function.arguments) : undefined
    expect(z.object({ name: z.string(), age: z.number().int().min(0), city: z.string() }).strict().safeParse(args).success).toBe(true)
  })
})
