/** The official openai npm client, pointed at the gateway, works unchanged. */
import { describe, expect, test } from "bun:test"
import OpenAI from "openai"
import { useGateway } from "../support/gateway.js"

const gw = useGateway()
const client = () => new OpenAI({ apiKey: gw().adminKey, baseURL: `${gw().url}/v1`, maxRetries: 0 })

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
    const types: Array<string> = []
    let text = ""
    let final: OpenAI.Responses.Response | undefined
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "response.output_text.delta") text += event.delta
      if (event.type === "response.completed") final = event.response
    }
    expect(types[0]).toBe("response.created")
    expect(types[types.length - 1]).toBe("response.completed")
    expect(text).toBe("Echo: stream me please")
    expect(final?.usage?.output_tokens).toBe(4)
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
    // The SDK's promises are lazy: await them directly rather than through expect().rejects.
    const caught = async (p: PromiseLike<unknown>) => {
      try {
        await p
      } catch (e) {
        return e
      }
      return undefined
    }
    const notFound = await caught(client().responses.create({ model: "nobody/none", input: "x" }))
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError)
    const unauthorized = new OpenAI({ apiKey: "sk-gw-v1-nope", baseURL: `${gw().url}/v1`, maxRetries: 0 })
    const denied = await caught(unauthorized.responses.create({ model: "demo/echo", input: "x" }))
    expect(denied).toBeInstanceOf(OpenAI.AuthenticationError)
    const invalid = await caught(client().responses.create({ model: "demo/echo", input: "x", metadata: { "a[b]": "c" } }))
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError)
    expect((invalid as Error).message).toContain("metadata")
  })
})
