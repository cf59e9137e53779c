/**
 * The server-tool loop end to end against the mock upstream, which calls the
 * `datetime` tool when offered and answers "Tool output: <output>" once the tool's output is in
 * the conversation: the loop on each upstream wire format and each client format, its budget
 * (`max_tool_calls`, `stop_server_tools_when`, `server.max_upstream_calls`), the tool-less last
 * turn, a key's limit hit mid-loop, a client leaving mid-loop, and what is charged and recorded.
 * Runs on SQLite, and on Postgres with GATEWAY_TEST_PG_URL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile, ProviderEntry } from "../../src/config/file.js"
import { endpoint, mockProvider, model, USAGE_INPUT } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse } from "../support/sse.js"

type Gw = TestGateway & { stop: () => Promise<void> }
let mock: MockUpstream
let gw: Gw
let capped: Gw
let hurried: Gw

/** $ per million tokens: prompt 1, completion 2. */
const PRICE = { prompt: 1, completion: 2 }
const turnCost = (outputTokens: number) => (USAGE_INPUT * PRICE.prompt + outputTokens * PRICE.completion) / 1_000_000

const catalog = (extra: Partial<ConfigFile> = {}): ConfigFile => {
  const providers: Array<ProviderEntry> = [
    mockProvider(mock, "chat"),
    mockProvider(mock, "resp", {}, { kind: "openai-responses" }),
    mockProvider(mock, "anth", {}, { kind: "anthropic" }),
    mockProvider(mock, "anth-think", { "x-mock-scenario": "reasoning" }, { kind: "anthropic" }),
    mockProvider(mock, "slow", { "x-mock-ttft-ms": "400", "x-mock-server-tool-calls": "30" }),
    mockProvider(mock, "many", { "x-mock-server-tool-calls": "30" }),
    mockProvider(mock, "tc", { "x-mock-scenario": "tool_call" }),
  ]
  return {
    providers,
    models: [
      model("test/chat", endpoint("chat", PRICE.prompt, PRICE.completion)),
      model("test/resp", endpoint("resp", PRICE.prompt, PRICE.completion)),
      model("test/anth", endpoint("anth", PRICE.prompt, PRICE.completion)),
      model("test/anth-think", endpoint("anth-think", PRICE.prompt, PRICE.completion)),
      model("test/slow", endpoint("slow", PRICE.prompt, PRICE.completion)),
      model("test/many", endpoint("many", PRICE.prompt, PRICE.completion)),
      model("test/tc", endpoint("tc", PRICE.prompt, PRICE.completion)),
    ],
    ...extra,
  }
}

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startTestGateway({ catalog: catalog() })
  capped = await startTestGateway({ catalog: catalog({ server: { max_upstream_calls: 3 } }) })
  hurried = await startTestGateway({ catalog: catalog(), requestTimeoutMs: 700 })
})
afterAll(async () => {
  await gw?.stop()
  await capped?.stop()
  await hurried?.stop()
  await mock?.stop()
})

const DATETIME = [{ type: "openrouter:datetime" }]

interface Result {
  readonly status: string
  readonly output: ReadonlyArray<Record<string, unknown> & { type: string }>
  readonly incomplete_details: { reason: string } | null
  readonly usage: {
    input_tokens: number
    output_tokens: number
    cost: number
    server_tool_use_details: { tool_calls_requested: number; tool_calls_executed: number; web_search_requests: number }
  }
}

/** One request to /v1/responses; the upstream calls it made. */
const respond = async (json: Record<string, unknown>, on: Gw = gw, key?: string) => {
  const before = mock.requests.length
  const res = await on.fetch("/v1/responses", { method: "POST", json, key })
  const text = await res.text()
  return { res, text, calls: mock.requests.slice(before).filter((r) => r.path !== "/v1/moderations") }
}

/** The `tool_choice` an upstream call was sent (undefined: none). */
const toolChoiceOf = (call: { body: unknown } | undefined) => (call?.body as { tool_choice?: unknown } | undefined)?.tool_choice

const resultOf = (text: string) => JSON.parse(text) as Result
const messageText = (r: Result) =>
  r.output
    .filter((i) => i.type === "message")
    .map((i) => (i["content"] as Array<{ text: string }>).map((p) => p.text).join(""))
    .join("")

/** The generation record, once the ledger has it. */
const generation = async (on: Gw, id: string) => {
  await on.server.drain()
  for (let i = 0; i < 100; i++) {
    const res = await on.fetch(`/v1/generation?id=${id}`)
    if (res.status === 200) return ((await res.json()) as { data: Record<string, unknown> }).data
    await Bun.sleep(30)
  }
  throw new Error(`no generation ${id}`)
}

describe("the loop runs a server tool and calls the model again", () => {
  for (const [name, modelId] of [
    ["openai-chat", "test/chat"],
    ["openai-responses", "test/resp"],
    ["anthropic", "test/anth"],
  ] as const) {
    test(`${name} upstream: the datetime item, then the answer that saw the tool's output`, async () => {
      const { res, text, calls } = await respond({ model: modelId, input: "what time is it?", tools: DATETIME })
      expect(res.status).toBe(200)
      const result = resultOf(text)
      expect(result.status).toBe("completed")
      expect(result.output.map((i) => i.type)).toEqual(["openrouter:datetime", "message"])
      const item = result.output[0] as unknown as { status: string; datetime: string; timezone: string; id: string }
      expect(item.status).toBe("completed")
      expect(item.timezone).toBe("UTC")
      expect(item.datetime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/)
      expect(item.id).toBeString()
      // The model was given the tool's output: it quotes it.
      expect(messageText(result)).toBe(`Tool output: ${JSON.stringify({ datetime: item.datetime, timezone: "UTC" })}`)
      expect(calls).toHaveLength(2)
      expect(result.usage.server_tool_use_details).toEqual({ tool_calls_requested: 1, tool_calls_executed: 1, web_search_requests: 0 })
      // Both turns are charged: 2 × the mock's input, and each turn's output at its price.
      expect(result.usage.input_tokens).toBe(2 * USAGE_INPUT)
      expect(result.usage.cost).toBeCloseTo(turnCost(1) * 2, 12)
      const record = await generation(gw, res.headers.get("x-generation-id")!)
      expect(record["total_cost"]).toBeCloseTo(result.usage.cost, 12)
      expect(record["tokens_prompt"] ?? record["native_tokens_prompt"]).toBe(2 * USAGE_INPUT)
    })
  }

  test("anthropic with thinking: the turn's signed thinking goes back before its tool use, as Anthropic requires", async () => {
    const { res, text, calls } = await respond({ model: "test/anth-think", input: "what time is it?", tools: DATETIME, reasoning: { effort: "low" } })
    expect(res.status).toBe(200)
    expect(resultOf(text).output.map((i) => i.type)).toEqual(["reasoning", "openrouter:datetime", "reasoning", "message"])
    const second = calls[1]!.body as { messages: Array<{ role: string; content: Array<Record<string, unknown>> }> }
    expect(second.messages[1]!.role).toBe("assistant")
    expect(second.messages[1]!.content.map((block) => block.type)).toEqual(["thinking", "tool_use"])
    expect(second.messages[1]!.content[0]).toEqual({ type: "thinking", thinking: "think think think ", signature: "mock-signature" })
  })

  test("the tool's parameters reach it: timezone from tools[].parameters", async () => {
    const { text } = await respond({ model: "test/chat", input: "time in Kolkata", tools: [{ type: "openrouter:datetime", parameters: { timezone: "Asia/Kolkata" } }] })
    const item = resultOf(text).output[0] as unknown as { timezone: string; datetime: string }
    expect(item.timezone).toBe("Asia/Kolkata")
    expect(item.datetime).toEndWith("+05:30")
  })

  test("an unknown time zone is a failed tool result the model sees, not a 500", async () => {
    const { res, text } = await respond({ model: "test/chat", input: "time on Mars", tools: [{ type: "openrouter:datetime", parameters: { timezone: "Mars/Olympus" } }] })
    expect(res.status).toBe(200)
    const result = resultOf(text)
    expect(result.output[0]?.["status"]).toBe("incomplete")
    expect(messageText(result)).toContain("unknown time zone")
  })

  test("the aliases service:datetime and gateway:datetime run the same tool", async () => {
    for (const type of ["service:datetime", "gateway:datetime"]) {
      const { text } = await respond({ model: "test/chat", input: "time", tools: [{ type }] })
      expect(resultOf(text).output[0]?.type).toBe("openrouter:datetime")
    }
  })

  test("the upstream is offered the tool as a function tool, and given the call and its output", async () => {
    const { calls } = await respond({ model: "test/resp", input: "time", tools: DATETIME })
    const first = calls[0]?.body as { tools: Array<{ type: string; name: string }> }
    expect(first.tools.map((t) => [t.type, t.name])).toEqual([["function", "datetime"]])
    const second = calls[1]?.body as { input: Array<{ type: string; name?: string; output?: string }> }
    expect(second.input.map((i) => i.type)).toEqual(["message", "function_call", "function_call_output"])
    expect(second.input[1]?.name).toBe("datetime")
    expect(JSON.parse(second.input[2]?.output ?? "")).toHaveProperty("timezone", "UTC")
  })

  test("a client function tool beside a server tool: its call ends the loop and is returned as today", async () => {
    // Scenario tool_call: the mock calls the first tool offered, the client's own.
    const before = mock.requests.length
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "test/tc", input: "go", tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }, ...DATETIME] },
    })
    expect(res.status).toBe(200)
    const result = (await res.json()) as Result
    expect(mock.requests.length - before).toBe(1)
    expect(result.output.map((i) => [i.type, i["name"]])).toEqual([["function_call", "lookup"]])
    expect(result.usage.server_tool_use_details.tool_calls_executed).toBe(0)
  })
})

describe("client formats", () => {
  test("chat completions in: the loop runs, the answer is the final text (no server-tool items)", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "test/chat", messages: [{ role: "user", content: "time?" }], tools: DATETIME },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { choices: Array<{ message: { content: string; tool_calls?: unknown }; finish_reason: string }>; usage: Record<string, unknown> }
    expect(body.choices[0]?.message.content).toStartWith("Tool output: ")
    expect(body.choices[0]?.message.tool_calls).toBeUndefined()
    expect(body.choices[0]?.finish_reason).toBe("stop")
    expect(body.usage["server_tool_use_details"]).toEqual({ tool_calls_requested: 1, tool_calls_executed: 1, web_search_requests: 0 })
    expect(body.usage["prompt_tokens"]).toBe(2 * USAGE_INPUT)
  })

  test("messages in: the loop runs, the answer is the final text", async () => {
    const res = await gw.fetch("/v1/messages", {
      method: "POST",
      json: { model: "test/anth", max_tokens: 64, messages: [{ role: "user", content: "time?" }], tools: DATETIME },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { content: Array<{ type: string; text?: string }>; stop_reason: string }
    expect(body.content.map((b) => b.type)).toEqual(["text"])
    expect(body.content[0]?.text).toStartWith("Tool output: ")
    expect(body.stop_reason).toBe("end_turn")
  })

  test("chat completions streamed: the text of the last turn streams, one [DONE]", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: { model: "test/chat", stream: true, messages: [{ role: "user", content: "time?" }], tools: DATETIME },
    })
    const text = await res.text()
    expect(text.match(/\[DONE\]/g)).toHaveLength(1)
    const content = text
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { choices: Array<{ delta: { content?: string } }> })
      .map((c) => c.choices[0]?.delta.content ?? "")
      .join("")
    expect(content).toStartWith("Tool output: ")
  })
})

describe("the budget", () => {
  test("max_tool_calls caps the calls; the last turn is tool-less (tool_choice none)", async () => {
    const { text, calls } = await respond({ model: "test/many", input: "again and again", tools: DATETIME, max_tool_calls: 2 })
    const result = resultOf(text)
    expect(result.output.filter((i) => i.type === "openrouter:datetime")).toHaveLength(2)
    expect(result.usage.server_tool_use_details.tool_calls_executed).toBe(2)
    expect(calls).toHaveLength(3)
    expect(toolChoiceOf(calls[2])).toBe("none")
    expect(toolChoiceOf(calls[1])).toBeUndefined()
    expect(result.status).toBe("completed")
    expect(messageText(result)).toStartWith("Tool output: ")
  })

  test("without max_tool_calls the default is 30 calls", async () => {
    const { text, calls } = await respond({ model: "test/many", input: "all of them", tools: DATETIME })
    const result = resultOf(text)
    expect(result.usage.server_tool_use_details.tool_calls_executed).toBe(30)
    expect(calls).toHaveLength(31)
  })

  test("max_tool_calls above 30 is a 400 naming it", async () => {
    const { res, text } = await respond({ model: "test/many", input: "x", tools: DATETIME, max_tool_calls: 31 })
    expect(res.status).toBe(400)
    expect(text).toContain("max_tool_calls")
  })

  test("stop_server_tools_when step_count_is 1: one tool turn, then the last", async () => {
    const { text, calls } = await respond({
      model: "test/many",
      input: "x",
      tools: DATETIME,
      stop_server_tools_when: [{ type: "step_count_is", step_count: 1 }],
    })
    expect(resultOf(text).usage.server_tool_use_details.tool_calls_executed).toBe(1)
    expect(calls).toHaveLength(2)
    expect(toolChoiceOf(calls[1])).toBe("none")
  })

  test("stop_server_tools_when has_tool_call datetime stops after that call", async () => {
    const { calls } = await respond({ model: "test/many", input: "x", tools: DATETIME, stop_server_tools_when: [{ type: "has_tool_call", tool_name: "datetime" }] })
    expect(calls).toHaveLength(2)
  })

  test("stop_server_tools_when max_tokens_used and max_cost stop once reached", async () => {
    const tokens = await respond({ model: "test/many", input: "x", tools: DATETIME, stop_server_tools_when: [{ type: "max_tokens_used", max_tokens: 250 }] })
    // 101 tokens a turn: over 250 after the third.
    expect(tokens.calls).toHaveLength(4)
    const cost = await respond({ model: "test/many", input: "x", tools: DATETIME, stop_server_tools_when: [{ type: "max_cost", max_cost_in_dollars: turnCost(1) * 1.5 }] })
    expect(cost.calls).toHaveLength(3)
  })

  test("stop_server_tools_when finish_reason_is tool_calls stops after the first tool turn", async () => {
    const { calls } = await respond({ model: "test/many", input: "x", tools: DATETIME, stop_server_tools_when: [{ type: "finish_reason_is", reason: "tool_calls" }] })
    expect(calls).toHaveLength(2)
  })

  test("a malformed stop condition is a 400 naming it", async () => {
    const { res, text } = await respond({ model: "test/many", input: "x", tools: DATETIME, stop_server_tools_when: [{ type: "step_count_is" }] })
    expect(res.status).toBe(400)
    expect(text).toContain("stop_server_tools_when[0]")
  })

  test("server.max_upstream_calls bounds the model calls: the last of them is tool-less", async () => {
    const { text, calls } = await respond({ model: "test/many", input: "x", tools: DATETIME }, capped)
    expect(calls).toHaveLength(3)
    expect(toolChoiceOf(calls[2])).toBe("none")
    expect(resultOf(text).status).toBe("completed")
  })

  test("a model that calls fusion again and again: the tool's own calls leave the request's model its tool-less last turn", async () => {
    const fusion = [{ type: "openrouter:fusion", parameters: { analysis_models: ["test/chat"], model: "test/chat" } }]
    const { text, calls } = await respond({ model: "test/many", input: "x", tools: fusion }, capped)
    const result = resultOf(text)
    // The fusion call's panelist took one call; its judge found the cap's last call kept for the model.
    expect(calls).toHaveLength(3)
    expect(toolChoiceOf(calls[2])).toBe("none")
    expect([result.status, result.incomplete_details]).toEqual(["completed", null])
    expect(result.output.at(-1)?.type).toBe("message")
  })
})

describe("declaring server tools", () => {
  test("a server tool this gateway does not run is a 400 naming tools[i]", async () => {
    for (const type of ["openrouter:code_interpreter", "openrouter:image_generation", "service:code_interpreter"]) {
      const { res, text } = await respond({ model: "test/chat", input: "x", tools: [{ type: "function", name: "f" }, { type }] })
      expect(res.status).toBe(400)
      expect(text).toContain("tools[1]")
      expect(text).toContain(type)
    }
  })

  test("a server tool the workspace disabled is a 400 naming it", async () => {
    const other = await startTestGateway({ catalog: catalog() })
    try {
      const workspaceId = ((await (await other.fetch("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id
      const patched = await other.fetch(`/v1/workspaces/${workspaceId}`, { method: "PATCH", json: { disabled_server_tools: ["openrouter:datetime"] } })
      expect(patched.status).toBe(200)
      const res = await other.fetch("/v1/responses", { method: "POST", json: { model: "test/chat", input: "x", tools: [{ type: "gateway:datetime" }] } })
      expect(res.status).toBe(400)
      expect(await res.text()).toContain("disabled_server_tools")
    } finally {
      await other.stop()
    }
  })

  test("the three formats refuse an unknown server tool alike", async () => {
    const chat = await gw.fetch("/v1/chat/completions", { method: "POST", json: { model: "test/chat", messages: [{ role: "user", content: "x" }], tools: [{ type: "openrouter:code_interpreter" }] } })
    expect(chat.status).toBe(400)
    expect(await chat.text()).toContain("tools[0]")
    const messages = await gw.fetch("/v1/messages", {
      method: "POST",
      json: { model: "test/anth", max_tokens: 8, messages: [{ role: "user", content: "x" }], tools: [{ type: "openrouter:code_interpreter" }] },
    })
    expect(messages.status).toBe(400)
    expect(await messages.text()).toContain("tools[0]")
  })
})

describe("streams", () => {
  test("one response.created, output_index continuing across turns, the item's added and done", async () => {
    const { res, text } = await respond({ model: "test/many", input: "x", tools: DATETIME, max_tool_calls: 2, stream: true })
    expect(res.headers.get("content-type")).toContain("text/event-stream")
    const parsed = parseSse(text).events
    // The rules strict clients apply: one created first, sequence numbers in order, each item added then done.
    checkStreamRules(parsed)
    const events = parsed.filter((e) => e.data !== "[DONE]").map((e) => e.json as Record<string, unknown>)
    expect(events.filter((e) => e["type"] === "response.created")).toHaveLength(1)
    const added = events.filter((e) => e["type"] === "response.output_item.added")
    expect(added.map((e) => e["output_index"])).toEqual([0, 1, 2])
    expect(added.map((e) => (e["item"] as { type: string }).type)).toEqual(["openrouter:datetime", "openrouter:datetime", "message"])
    const seq = events.map((e) => e["sequence_number"])
    expect(seq).toEqual(seq.map((_, i) => i))
    const last = events[events.length - 1] as { type: string; response: Result }
    expect(last.type).toBe("response.completed")
    expect(last.response.output).toHaveLength(3)
  })

  test("a client that leaves mid-loop stops it; what was spent is settled and recorded cancelled", async () => {
    const controller = new AbortController()
    const before = mock.requests.length
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "test/slow", input: "x", tools: DATETIME, stream: true },
      signal: controller.signal,
    })
    const id = res.headers.get("x-generation-id")!
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let seen = ""
    while (!seen.includes("response.output_item.done")) {
      const { value, done } = await reader.read()
      if (done) break
      seen += new TextDecoder().decode(value)
    }
    controller.abort()
    const record = await generation(gw, id)
    expect(record["status"]).toBe("cancelled")
    expect(record["cancelled"]).toBe(true)
    // The first turn was charged; the loop did not run on to its 30 calls.
    expect(Number(record["total_cost"])).toBeGreaterThanOrEqual(turnCost(1) - 1e-12)
    await Bun.sleep(500)
    expect(mock.requests.length - before).toBeLessThanOrEqual(2)
  })
})

describe("shutdown", () => {
  test("a loop still running when the grace ends is cut with response.failed (server_shutting_down)", async () => {
    const leaving = await startTestGateway({ catalog: catalog() })
    try {
      const res = await leaving.fetch("/v1/responses", { method: "POST", json: { model: "test/slow", input: "x", tools: DATETIME, stream: true } })
      const reader = (res.body as ReadableStream<Uint8Array>).getReader()
      let text = ""
      let shutdown: Promise<unknown> | undefined
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
        if (shutdown === undefined && text.includes("response.output_item.done")) shutdown = leaving.server.shutdown(50)
      }
      await shutdown
      const events = parseSse(text).events.filter((e) => e.json !== undefined)
      const last = events[events.length - 1]?.json as { type: string; response: { error: { code: string } } }
      expect(last.type).toBe("response.failed")
      expect(last.response.error.code).toBe("server_shutting_down")
      expect(text.trimEnd()).toEndWith("data: [DONE]")
    } finally {
      await leaving.stop()
    }
  })
})

describe("the deadline covers the whole loop", () => {
  test("streamed: turns of 400 ms each, 30 tool calls, a deadline of 700 ms: the stream ends response.failed (timeout)", async () => {
    const { text, calls } = await respond({ model: "test/slow", input: "x", tools: DATETIME, stream: true }, hurried)
    const events = parseSse(text).events.filter((e) => e.json !== undefined)
    const last = events[events.length - 1]?.json as { type: string; response: { error: { code: string } } }
    expect(last.type).toBe("response.failed")
    expect(last.response.error.code).toBe("timeout")
    // Cut within the second turn (the first, on a machine slow enough): never the 31 turns of the loop.
    expect(calls.length).toBeLessThanOrEqual(2)
  })

  test("JSON: the same loop answers 408", async () => {
    const { res } = await respond({ model: "test/slow", input: "x", tools: DATETIME }, hurried)
    expect(res.status).toBe(408)
    const record = await generation(hurried, res.headers.get("x-generation-id")!)
    expect(record["status"]).toBe("failed")
  })
})

describe("money", () => {
  test("a key whose limit holds a turn's worst case twice over runs a loop of six turns: what a turn did not spend is left for the next", async () => {
    // A turn's worst case, as the 402 of a key with nothing left says it.
    const broke = ((await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "broke", limit: 0 } })).json()) as { key: string }).key
    const refused = await respond({ model: "test/many", input: "x", tools: DATETIME, max_tool_calls: 5 }, gw, broke)
    expect(refused.res.status).toBe(402)
    const worst = Number(/may cost up to \$([0-9.]+)/.exec(refused.text)?.[1])
    expect(worst).toBeGreaterThan(0)
    const made = await gw.fetch("/v1/keys", { method: "POST", json: { name: "twice-over", limit: worst * 2.5 } })
    const key = ((await made.json()) as { key: string }).key
    const { res, text, calls } = await respond({ model: "test/many", input: "x", tools: DATETIME, max_tool_calls: 5 }, gw, key)
    expect(res.status).toBe(200)
    const result = resultOf(text)
    // Each turn holding its own worst case on top of the last ones', the third was refused (max_cost).
    expect([result.status, result.incomplete_details]).toEqual(["completed", null])
    expect(calls).toHaveLength(6)
    const record = await generation(gw, res.headers.get("x-generation-id")!)
    const usage = ((await (await gw.fetch("/v1/key", { key })).json()) as { data: { usage: number } }).data.usage
    expect(usage).toBeCloseTo(record["total_cost"] as number, 9)
    expect(usage).toBeLessThan(worst * 2.5)
  })

  test("a key whose limit cannot hold the next turn: the answer ends incomplete with max_cost, the spent turn charged", async () => {
    const made = await gw.fetch("/v1/keys", { method: "POST", json: { name: "tight", limit: 0.000001 } })
    expect(made.status).toBe(201)
    const key = ((await made.json()) as { key: string }).key
    const { res, text, calls } = await respond({ model: "test/many", input: "x", tools: DATETIME }, gw, key)
    expect(res.status).toBe(200)
    const result = resultOf(text)
    expect(result.status).toBe("incomplete")
    expect(result.incomplete_details).toEqual({ reason: "max_cost" })
    expect(calls).toHaveLength(1)
    expect(result.output[0]?.type).toBe("openrouter:datetime")
    const record = await generation(gw, res.headers.get("x-generation-id")!)
    expect(record["total_cost"]).toBeCloseTo(turnCost(1), 12)
    const usage = ((await (await gw.fetch("/v1/key", { key })).json()) as { data: { usage: number } }).data.usage
    expect(usage).toBeCloseTo(turnCost(1), 9)
  })
})
