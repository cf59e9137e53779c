/**
 * End to end against the fake clouds (scripts/mock-clouds.ts): the gateway serves models on the
 * gemini, vertex (Google's and Anthropic's models) and azure-openai kinds in each client format
 * (Responses, Chat Completions, Messages), JSON and streamed, with usage; a Gemini tool call's
 * thought signature survives the round trip through each client format; upstream errors reach
 * the caller as the contract's statuses, and no upstream secret reaches an answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { type MockClouds, startMockClouds } from "../../scripts/mock-clouds.js"
import { makeServiceAccount } from "../providers/service-account.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { parseSse } from "../support/sse.js"

const GEMINI_KEY = "gm-e2e-secret-key"
const AZURE_KEY = "az-e2e-secret-key"
const PRICE = { prompt: 1, completion: 2 }

let clouds: MockClouds
let gw: InProcessGateway & { stop: () => Promise<void> }

type Provider = ConfigFile["providers"][number]

/** Model `cloud/<id>` on provider `<id>`. */
const MODELS: Record<string, { readonly upstream: string; readonly publisher?: "anthropic" }> = {
  gemini: { upstream: "gemini-test" },
  "vertex-gemini": { upstream: "gemini-test" },
  "vertex-claude": { upstream: "claude-test@20250101", publisher: "anthropic" },
  "azure-chat": { upstream: "gpt-deployment" },
  "azure-responses": { upstream: "gpt-deployment" },
  "gemini-tools": { upstream: "gemini-test" },
  "vertex-tools": { upstream: "gemini-test" },
  "vertex-claude-tools": { upstream: "claude-test@20250101", publisher: "anthropic" },
  "azure-tools": { upstream: "gpt-deployment" },
  "gemini-429": { upstream: "gemini-test" },
  "gemini-503": { upstream: "gemini-test" },
  "gemini-400": { upstream: "gemini-test" },
  "gemini-wrong-key": { upstream: "gemini-test" },
  "vertex-429": { upstream: "gemini-test" },
  "azure-429": { upstream: "gpt-deployment" },
  "azure-wrong-key": { upstream: "gpt-deployment" },
}

const catalogFor = (keyFile: string): ConfigFile => {
  const gemini = (id: string, headers: Record<string, string> = {}, keyEnv = "CLOUD_E2E_GEMINI_KEY"): Provider => ({
    id,
    kind: "gemini",
    base_url: `${clouds.url}/v1beta`,
    api_key_env: keyEnv,
    headers,
  })
  const vertex = (id: string, headers: Record<string, string> = {}): Provider => ({
    id,
    kind: "vertex",
    base_url: `${clouds.url}/v1`,
    project: "proj",
    location: "global",
    credentials_file: keyFile,
    token_url: `${clouds.url}/token`,
    headers,
  })
  const azure = (id: string, extra: Partial<Provider> = {}, keyEnv = "CLOUD_E2E_AZURE_KEY"): Provider => ({
    id,
    kind: "azure-openai",
    base_url: clouds.url,
    api_key_env: keyEnv,
    ...extra,
  })
  return {
    ...demoCatalog,
    providers: [
      ...demoCatalog.providers,
      gemini("gemini"),
      vertex("vertex-gemini"),
      vertex("vertex-claude"),
      azure("azure-chat", { api_version: "2024-10-21" }),
      azure("azure-responses", { api: "responses" }),
      gemini("gemini-tools", { "x-mock-scenario": "tool_call" }),
      vertex("vertex-tools", { "x-mock-scenario": "tool_call" }),
      vertex("vertex-claude-tools", { "x-mock-scenario": "tool_call" }),
      azure("azure-tools", { api_version: "2024-10-21", headers: { "x-mock-scenario": "tool_call" } }),
      gemini("gemini-429", { "x-mock-error": "429" }),
      gemini("gemini-503", { "x-mock-error": "503" }),
      gemini("gemini-400", { "x-mock-error": "400" }),
      gemini("gemini-wrong-key", {}, "CLOUD_E2E_WRONG_KEY"),
      vertex("vertex-429", { "x-mock-error": "429" }),
      azure("azure-429", { headers: { "x-mock-error": "429" } }),
      azure("azure-wrong-key", {}, "CLOUD_E2E_WRONG_KEY"),
    ],
    models: [
      ...demoCatalog.models,
      ...Object.entries(MODELS).map(
        ([id, m]): ConfigFile["models"][number] => ({
          id: `cloud/${id}`,
          context_length: 100_000,
          endpoints: [{ provider: id, upstream_model: m.upstream, pricing: PRICE, ...(m.publisher === undefined ? {} : { publisher: m.publisher }) }],
        }),
      ),
    ],
  }
}

beforeAll(async () => {
  const account = await makeServiceAccount()
  process.env["CLOUD_E2E_GEMINI_KEY"] = GEMINI_KEY
  process.env["CLOUD_E2E_AZURE_KEY"] = AZURE_KEY
  process.env["CLOUD_E2E_WRONG_KEY"] = "wrong-e2e-secret-key"
  clouds = await startMockClouds({ geminiKey: GEMINI_KEY, azureKey: AZURE_KEY, publicKey: account.publicKey })
  gw = await startInProcessGateway({ catalog: catalogFor(account.file) })
  // An RSA key is made and a gateway started (with its database): slow on a loaded machine.
}, 30_000)
afterAll(async () => {
  await gw?.stop()
  await clouds?.stop()
})

type Json = Record<string, any>
const post = (path: string, json: unknown) => gw.fetch(path, { method: "POST", json })

const ask = (format: string, model: string, stream: boolean, extra: Json = {}): Json => {
  if (format === "/v1/responses") return { model, input: "What now?", stream, ...extra }
  if (format === "/v1/chat/completions") return { model, messages: [{ role: "user", content: "What now?" }], stream, ...extra }
  return { model, max_tokens: 256, messages: [{ role: "user", content: "What now?" }], stream, ...extra }
}

/** The answer's text and token usage, read the way each client format gives them. */
const textAndUsage = async (format: string, res: Response, stream: boolean): Promise<{ text: string; input: number; output: number }> => {
  if (!stream) {
    const body = (await res.json()) as Json
    if (format === "/v1/responses") return { text: body.output_text ?? body.output.find((o: Json) => o.type === "message").content[0].text, input: body.usage.input_tokens, output: body.usage.output_tokens }
    if (format === "/v1/chat/completions") return { text: body.choices[0].message.content, input: body.usage.prompt_tokens, output: body.usage.completion_tokens }
    return { text: body.content.map((c: Json) => c.text ?? "").join(""), input: body.usage.input_tokens, output: body.usage.output_tokens }
  }
  const { events } = parseSse(await res.text())
  let text = ""
  let input = -1
  let output = -1
  for (const e of events) {
    const j = e.json as Json | undefined
    if (j === undefined) continue
    if (format === "/v1/responses") {
      if (j.type === "response.output_text.delta") text += j.delta
      if (j.type === "response.completed") ({ input_tokens: input, output_tokens: output } = j.response.usage)
    } else if (format === "/v1/chat/completions") {
      text += j.choices?.[0]?.delta?.content ?? ""
      if (j.usage != null) ({ prompt_tokens: input, completion_tokens: output } = j.usage)
    } else {
      if (j.type === "content_block_delta" && j.delta.type === "text_delta") text += j.delta.text
      // The input is known when the answer ends: message_delta's usage carries it.
      if (j.type === "message_delta") ({ input_tokens: input, output_tokens: output } = j.usage)
    }
  }
  return { text, input, output }
}

const FORMATS = ["/v1/responses", "/v1/chat/completions", "/v1/messages"] as const
const SERVED = ["gemini", "vertex-gemini", "vertex-claude", "azure-chat", "azure-responses"] as const

describe("each cloud kind answers in each client format", () => {
  for (const kind of SERVED) {
    for (const format of FORMATS) {
      for (const stream of [false, true]) {
        test(`${kind} on ${format}, ${stream ? "streamed" : "JSON"}: the text and usage`, async () => {
          const res = await post(format, ask(format, `cloud/${kind}`, stream))
          expect(res.status).toBe(200)
          expect(await textAndUsage(format, res, stream)).toEqual({ text: "tok ".repeat(5), input: 10, output: 5 })
        })
      }
    }
  }
})

describe("a Gemini tool call round-trips through each client format with its thought signature", () => {
  const tool = { name: "get_weather", description: "Weather", schema: { type: "object", properties: { city: { type: "string" } } } }
  const expected = 'Tool output: {"result":"sunny"}'

  test("Chat Completions: tool_calls, then a tool message", async () => {
    const tools = [{ type: "function", function: { name: tool.name, description: tool.description, parameters: tool.schema } }]
    const first = (await (await post("/v1/chat/completions", ask("/v1/chat/completions", "cloud/gemini-tools", false, { tools }))).json()) as Json
    const call = first.choices[0].message.tool_calls[0]
    expect(first.choices[0].finish_reason).toBe("tool_calls")
    expect(call.id).toContain("__thought__")
    const messages = [{ role: "user", content: "What now?" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: call.id, content: "sunny" }]
    const second = (await (await post("/v1/chat/completions", { model: "cloud/gemini-tools", messages, tools })).json()) as Json
    expect(second.choices[0].message.content).toBe(expected)
  })

  test("Messages: tool_use, then a tool_result", async () => {
    const tools = [{ name: tool.name, description: tool.description, input_schema: tool.schema }]
    const first = (await (await post("/v1/messages", ask("/v1/messages", "cloud/gemini-tools", false, { tools }))).json()) as Json
    const use = first.content.find((c: Json) => c.type === "tool_use")
    expect(first.stop_reason).toBe("tool_use")
    const messages = [
      { role: "user", content: "What now?" },
      { role: "assistant", content: [use] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] },
    ]
    const second = (await (await post("/v1/messages", { model: "cloud/gemini-tools", max_tokens: 256, messages, tools })).json()) as Json
    expect(second.content[0].text).toBe(expected)
  })

  test("Responses, streamed: a function_call item, then its function_call_output", async () => {
    const tools = [{ type: "function", name: tool.name, description: tool.description, parameters: tool.schema }]
    const { events } = parseSse(await (await post("/v1/responses", ask("/v1/responses", "cloud/gemini-tools", true, { tools }))).text())
    const done = events.map((e) => e.json as Json | undefined).find((j) => j?.type === "response.output_item.done" && j.item.type === "function_call")
    const call = done?.item as Json
    const input = [
      { role: "user", content: "What now?" },
      { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
      { type: "function_call_output", call_id: call.call_id, output: "sunny" },
    ]
    const second = (await (await post("/v1/responses", { model: "cloud/gemini-tools", input, tools })).json()) as Json
    expect(second.output.find((o: Json) => o.type === "message").content[0].text).toBe(expected)
  })
})

describe("tools both ways on every cloud kind", () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } } }]
  /** How the tool's result reached the upstream, in its own format. */
  const resultSent: Record<string, (body: Json) => unknown> = {
    "vertex-tools": (body) => body.contents.at(-1).parts[0].functionResponse,
    "vertex-claude-tools": (body) => {
      const block = body.messages.at(-1).content[0]
      return { name: "get_weather", response: { result: block.content }, id: block.tool_use_id }
    },
    "azure-tools": (body) => {
      const message = body.messages.at(-1)
      return { name: "get_weather", response: { result: message.content }, id: message.tool_call_id }
    },
  }
  for (const [provider, read] of Object.entries(resultSent)) {
    test(`${provider}: the upstream's tool call reaches the client, and the client's result reaches the upstream`, async () => {
      const first = (await (await post("/v1/chat/completions", ask("/v1/chat/completions", `cloud/${provider}`, false, { tools }))).json()) as Json
      const call = first.choices[0].message.tool_calls[0]
      expect([first.choices[0].finish_reason, call.function.name]).toEqual(["tool_calls", "get_weather"])
      const messages = [{ role: "user", content: "What now?" }, { role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: call.id, content: "sunny" }]
      const second = await post("/v1/chat/completions", { model: `cloud/${provider}`, messages, tools })
      expect(second.status).toBe(200)
      const sent = read(clouds.requests.at(-1)?.body as Json) as Json
      expect(sent.name).toBe("get_weather")
      expect(sent.response).toEqual({ result: "sunny" })
      if (sent.id !== undefined) expect(sent.id).toBe(call.id)
    })
  }
})

describe("upstream errors reach the caller as the contract's statuses", () => {
  const messageOf = async (res: Response): Promise<string> => ((await res.json()) as Json).error.message

  test("a quota error is a 429 with the upstream's wait as Retry-After (Gemini's RetryInfo, Vertex, Azure's header)", async () => {
    for (const [model, wait] of [["cloud/gemini-429", "7"], ["cloud/vertex-429", "7"], ["cloud/azure-429", "1"]] as const) {
      const res = await post("/v1/chat/completions", ask("/v1/chat/completions", model, false))
      expect(res.status).toBe(429)
      expect(res.headers.get("retry-after")).toBe(wait)
    }
  })

  test("an overloaded model (503 UNAVAILABLE) is a 529; a bad request a 400", async () => {
    expect((await post("/v1/responses", ask("/v1/responses", "cloud/gemini-503", true))).status).toBe(529)
    expect((await post("/v1/messages", ask("/v1/messages", "cloud/gemini-400", false))).status).toBe(400)
  })

  test("a refused key is a 502 saying it is the gateway's configuration, never showing a key", async () => {
    for (const model of ["cloud/gemini-wrong-key", "cloud/azure-wrong-key"]) {
      const res = await post("/v1/chat/completions", ask("/v1/chat/completions", model, false))
      expect(res.status).toBe(502)
      const message = await messageOf(res)
      expect(message).toContain("a gateway configuration problem")
      for (const secret of ["wrong-e2e-secret-key", GEMINI_KEY, AZURE_KEY, "ya29."]) expect(message).not.toContain(secret)
    }
  })

  test("/metrics shows no upstream key or token", async () => {
    const metrics = await (await gw.fetch("/metrics")).text()
    for (const secret of ["wrong-e2e-secret-key", GEMINI_KEY, AZURE_KEY, "ya29.", "PRIVATE KEY"]) expect(metrics).not.toContain(secret)
  })
})
