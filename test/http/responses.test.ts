import { describe, expect, test } from "bun:test"
import { Either, ParseResult } from "effect"
import { ResponseResult } from "../../src/domain/responses.js"
import { FAKE_REASONING, fakeWords } from "../../src/providers/fake.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"
import { checkStreamRules, parseSse, textAnswerTypes, typesOf } from "../support/sse.js"

const gw = useInProcessGateway({ streamKeepAliveMs: 40 })

const decodeResult = ParseResult.decodeUnknownEither(ResponseResult, { onExcessProperty: "ignore" })

const post = (json: unknown, init: { key?: string | null; headers?: Record<string, string> } = {}) =>
  gw().fetch("/v1/responses", { method: "POST", json, key: init.key, headers: init.headers })

/** Pins demo/echo to its first endpoint ("fake"): the default spreads load by price. */
const PINNED = { provider: { order: ["fake"] } }

/** demo/echo prices: prompt $1/M, completion $2/M on "fake" (config/demo.json). */
const demoCost = (input: number, output: number) => Math.round((input * 1 + output * 2) * 1e6) / 1e12

const flush = () => gw().server.drain()

const generation = async (id: string) => {
  await flush()
  const res = await gw().fetch(`/v1/generation?id=${id}`)
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Record<string, unknown> }).data
}

describe("POST /responses, JSON answers", () => {
  test("answers a text request with every required key of the result", async () => {
    const res = await post({ model: "demo/echo", input: "hello there world", ...PINNED })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("application/json")
    const id = res.headers.get("x-generation-id")
    expect(id).toMatch(/^gen-/)
    const body = (await res.json()) as Record<string, any>
    expect(Either.isRight(decodeResult(body))).toBe(true)
    expect(body.object).toBe("response")
    expect(body.status).toBe("completed")
    expect(Number.isInteger(body.created_at)).toBe(true)
    expect(Number.isInteger(body.completed_at)).toBe(true)
    expect(body.model).toBe("demo/echo")
    expect(body.parallel_tool_calls).toBe(true)
    expect(body.tool_choice).toBe("auto")
    expect(body.error).toBeNull()
    expect(body.output).toHaveLength(1)
    const message = body.output[0]
    expect(message).toMatchObject({ type: "message", role: "assistant", status: "completed" })
    expect(message.content).toEqual([{ type: "output_text", text: "Echo: hello there world", annotations: [], logprobs: [] }])
    // The fake counts ceil(chars/4) input tokens and one token per output word.
    expect(body.usage).toMatchObject({
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 9,
      is_byok: false,
    })
    expect(body.usage.cost).toBeCloseTo(demoCost(5, 4), 12)
    expect(body.usage.prompt_tokens).toBeUndefined()
  })

  test("a function call is an output item with a JSON string of arguments", async () => {
    const res = await post({
      model: "demo/echo",
      input: "weather? [tool:get_weather]",
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object", properties: {} } }],
    })
    const body = (await res.json()) as Record<string, any>
    expect(body.output).toHaveLength(1)
    expect(body.output[0]).toMatchObject({ type: "function_call", name: "get_weather", status: "completed" })
    expect(JSON.parse(body.output[0].arguments)).toEqual({ input: "weather? [tool:get_weather]" })
    expect(body.output[0].call_id).toBeString()
    expect(body.tools[0]).toMatchObject({ type: "function", name: "get_weather" })
  })

  test("reasoning comes first as a reasoning item with its summary", async () => {
    const body = (await (await post({ model: "demo/echo", input: "think [reasoning]" })).json()) as Record<string, any>
    expect(body.output.map((o: { type: string }) => o.type)).toEqual(["reasoning", "message"])
    expect(body.output[0].summary[0]).toMatchObject({ type: "summary_text" })
    // One token per word of the fake's reasoning.
    expect(body.usage.output_tokens_details.reasoning_tokens).toBe(fakeWords(FAKE_REASONING).length)
  })

  test("X-Service-Metadata: enabled adds service_metadata (the legacy header too)", async () => {
    for (const header of ["x-service-metadata", "x-service-experimental-metadata"]) {
      const body = (await (await post({ model: "demo/echo", input: "hi", ...PINNED }, { headers: { [header]: "enabled" } })).json()) as Record<string, any>
      expect(body.service_metadata).toMatchObject({
        requested: "demo/echo",
        attempt: 0,
        is_byok: false,
        region: null,
        endpoints: { total: 2 },
      })
      expect(typeof body.service_metadata.strategy).toBe("string")
      expect(typeof body.service_metadata.summary).toBe("string")
      expect(body.service_metadata.endpoints.available[0]).toEqual({ model: "demo/echo", provider: "fake", selected: true })
    }
    const plain = (await (await post({ model: "demo/echo", input: "hi" })).json()) as Record<string, unknown>
    expect(plain.service_metadata).toBeUndefined()
  })

  test("the generation is recorded with usage and cost, and counts toward the key's usage", async () => {
    const created = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "spender" } })).json()) as {
      key: string
      data: { hash: string }
    }
    const res = await post({ model: "demo/echo", input: "count me in", session_id: "s-1", ...PINNED }, { key: created.key })
    const body = (await res.json()) as Record<string, any>
    const g = await generation(res.headers.get("x-generation-id")!)
    expect(g).toMatchObject({
      model: "demo/echo",
      provider_name: "fake",
      streamed: false,
      cancelled: false,
      session_id: "s-1",
      tokens_prompt: body.usage.input_tokens,
      tokens_completion: body.usage.output_tokens,
    })
    expect(g.total_cost).toBeCloseTo(body.usage.cost, 12)
    const key = (await (await gw().fetch(`/v1/keys/${created.data.hash}`)).json()) as { data: { usage: number; usage_daily: number } }
    expect(key.data.usage).toBeCloseTo(body.usage.cost, 12)
    expect(key.data.usage_daily).toBeCloseTo(body.usage.cost, 12)
  })
})

describe("POST /responses, validation", () => {
  test("each rule is a 400 naming the field, and nothing is recorded", async () => {
    for (const [json, field] of [
      [{ model: "demo/echo", input: "x", store: true }, "store"],
      [{ model: "demo/echo", input: "x", previous_response_id: "resp_1" }, "previous_response_id"],
      [{ model: "demo/echo", input: "x", metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
      [{ model: "demo/echo", input: "x", session_id: "s".repeat(257) }, "session_id"],
      [{ model: "demo/echo", input: "x", user: "u".repeat(257) }, "user"],
      [{ model: "demo/echo", input: "x", service_tier: "turbo" }, "service_tier"],
      [{ model: "demo/echo", input: "x", plugins: [{ id: "nope" }] }, "plugins"],
      [{ input: "x" }, "model"],
    ] as const) {
      const message = await expectError(await post(json), 400)
      expect(message).toContain(field)
    }
  })

  test("an unknown model is 404 naming it", async () => {
    expect(await expectError(await post({ model: "nobody/nothing", input: "x" }), 404)).toContain("nobody/nothing")
    expect(await expectError(await post({ model: "demo/echo", models: ["x/y"], input: "x" }), 404)).toContain("models[0]")
  })

  test("malformed JSON is 400; no key is 401 before anything else", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", body: "{", headers: { "content-type": "application/json" } })
    expect(await expectError(res, 400)).toContain("JSON")
    await expectError(await post({ store: true }, { key: null }), 401)
  })

  test("session_id: the body wins over x-session-id; the header alone is used too", async () => {
    const both = await post({ model: "demo/echo", input: "s", session_id: "body" }, { headers: { "x-session-id": "header" } })
    expect((await generation(both.headers.get("x-generation-id")!)).session_id).toBe("body")
    const header = await post({ model: "demo/echo", input: "s" }, { headers: { "x-session-id": "header" } })
    expect((await generation(header.headers.get("x-generation-id")!)).session_id).toBe("header")
    await expectError(await post({ model: "demo/echo", input: "s" }, { headers: { "x-session-id": "h".repeat(257) } }), 400)
  })

  test("debug.echo_upstream_body is ignored in JSON mode", async () => {
    const res = await post({ model: "demo/echo", input: "dbg", debug: { echo_upstream_body: true } })
    expect(res.status).toBe(200)
    expect(((await res.json()) as Record<string, unknown>).object).toBe("response")
  })
})

describe("POST /responses, upstream failures before the first byte", () => {
  test("each failure kind maps to the contract's status (every endpoint failing)", async () => {
    for (const [marker, status] of [
      ["[fail:429]", 429],
      ["[fail:500]", 502],
      ["[fail:503]", 502],
      ["[fail:529]", 529],
      ["[fail:timeout]", 524],
      ["[fail:auth]", 502],
      ["[fail:400]", 400],
    ] as const) {
      const res = await post({ model: "demo/echo", input: `x ${marker}` })
      if (status === 429) expect(res.headers.get("retry-after")).toBe("1")
      await expectError(res, status)
    }
  })

  test("a retryable failure tries the next endpoint and says so in the attempts", async () => {
    const res = await post({ model: "demo/echo", input: "x [fail:529]" }, { headers: { "x-service-metadata": "enabled" } })
    // Both demo endpoints are scripted alike, so both fail; the attempts list shows the fallback.
    expect(res.status).toBe(529)
    const ok = await post({ model: "demo/echo", models: ["demo/free"], input: "fine" }, { headers: { "x-service-metadata": "enabled" } })
    const body = (await ok.json()) as Record<string, any>
    expect(body.service_metadata.endpoints.total).toBe(3)
  })

  test("a non-retryable failure does not fall back", async () => {
    const res = await post({ model: "demo/echo", input: "x [fail:400]" })
    expect(await expectError(res, 400)).toContain("fake")
  })

  test("our own deadline is 408", async () => {
    const { startInProcessGateway } = await import("../support/gateway.js")
    const quick = await startInProcessGateway({ requestTimeoutMs: 100 })
    try {
      const res = await quick.fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "a b c d [slow:100]" } })
      await expectError(res, 408)
    } finally {
      await quick.stop()
    }
  })
})

describe("POST /responses, streaming", () => {
  const stream = async (json: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const res = await post({ ...json, stream: true }, { headers })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/event-stream")
    expect(res.headers.get("x-generation-id")).toMatch(/^gen-/)
    return { res, ...parseSse(await res.text()) }
  }

  test("a text answer is the exact event sequence of wire-compat", async () => {
    const { events } = await stream({ model: "demo/echo", input: "one two", ...PINNED })
    checkStreamRules(events)
    expect(typesOf(events)).toEqual([...textAnswerTypes(3), "[DONE]"])
    const deltas = events.filter((e) => e.json?.type === "response.output_text.delta").map((e) => e.json!.delta)
    expect(deltas.join("")).toBe("Echo: one two")
    const created = events[0]!.json!.response as Record<string, unknown>
    expect(created.status).toBe("in_progress")
    expect(created.output).toEqual([])
    const completed = events.find((e) => e.json?.type === "response.completed")!.json!.response as Record<string, any>
    expect(Either.isRight(decodeResult(completed))).toBe(true)
    expect(completed.status).toBe("completed")
    expect(completed.usage.cost).toBeCloseTo(demoCost(2, 3), 12)
  })

  test("function calls and reasoning stream their own events", async () => {
    const call = await stream({
      model: "demo/echo",
      input: "[tool:lookup]",
      tools: [{ type: "function", name: "lookup" }],
    })
    checkStreamRules(call.events)
    const types = typesOf(call.events)
    expect(types).toContain("response.function_call_arguments.delta")
    expect(types).toContain("response.function_call_arguments.done")
    const reasoning = await stream({ model: "demo/echo", input: "hmm [reasoning]" })
    checkStreamRules(reasoning.events)
    const r = typesOf(reasoning.events)
    expect(r.indexOf("response.reasoning_summary_text.delta")).toBeLessThan(r.indexOf("response.output_text.delta"))
  })

  test("the debug chunk comes first when asked, with the upstream body", async () => {
    const { events } = await stream({ model: "demo/echo", input: "dbg", debug: { echo_upstream_body: true } })
    expect(events[0]!.json).toMatchObject({ type: "debug", debug: { echo_upstream_body: { fake: true, model: "echo" } } })
    checkStreamRules(events)
  })

  test("service_metadata rides on response.completed when enabled", async () => {
    const { events } = await stream({ model: "demo/echo", input: "meta" }, { "x-service-metadata": "enabled" })
    const completed = events.find((e) => e.json?.type === "response.completed")!.json!.response as Record<string, any>
    expect(completed.service_metadata.requested).toBe("demo/echo")
  })

  test("a failure after the first byte is response.failed, then [DONE]", async () => {
    const { events } = await stream({ model: "demo/echo", input: "a b c d e [fail-mid]" })
    const types = typesOf(events)
    expect(types.slice(-2)).toEqual(["response.failed", "[DONE]"])
    const failed = events[events.length - 2]!.json!.response as Record<string, any>
    expect(failed.status).toBe("failed")
    expect(failed.error).toMatchObject({ code: "server_error" })
    expect(failed.error.message).toContain("fake")
  })

  test("a keep-alive comment is sent while the first token is slow", async () => {
    const { events, comments } = await stream({ model: "demo/echo", input: "wait [ttft:200]" })
    expect(comments).toContain("keep-alive")
    checkStreamRules(events)
  })

  test("a client that disconnects mid-stream aborts the upstream and is charged for what was produced", async () => {
    const controller = new AbortController()
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: `${"word ".repeat(40)}[slow:30]`, stream: true },
      signal: controller.signal,
    })
    const id = res.headers.get("x-generation-id")!
    const reader = res.body!.getReader()
    let text = ""
    while (!text.includes("response.output_text.delta")) text += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    await reader.cancel().catch(() => {})
    // The upstream stops at once: the record says cancelled, with fewer output tokens than the full answer.
    let g: Record<string, any> | undefined
    for (let i = 0; i < 50 && g === undefined; i++) {
      await Bun.sleep(20)
      await flush()
      const r = await gw().fetch(`/v1/generation?id=${id}`)
      if (r.status === 200) g = ((await r.json()) as { data: Record<string, any> }).data
    }
    expect(g).toBeDefined()
    expect(g!.cancelled).toBe(true)
    expect(g!.streamed).toBe(true)
    expect(g!.tokens_completion).toBeGreaterThan(0)
    expect(g!.tokens_completion).toBeLessThan(41)
    expect(g!.total_cost).toBeGreaterThan(0)
  })
})
