/**
 * What reaches an anthropic upstream of a request's structured output (a `json_schema` format as
 * Anthropic's `output_config.format`; `json_object`, which it has no mode for, not at all), and
 * what it would refuse (a forced tool_choice while thinking) refused by the gateway first: a 400
 * naming the field in the client format's envelope, no upstream call (docs/providers.md); and
 * bad input refused the same way: a malformed data URL on POST /v1/responses, and Anthropic's
 * image rules of a Messages body. An in-process gateway over the mock upstream, whose log holds
 * the bodies it was sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile } from "../../src/config/file.js"
import { expectError, startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { sentDuring } from "../support/upstream-bodies.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }

const SUPPORTS = ["tools", "reasoning", "json_schema", "json_object"]

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startInProcessGateway({
    catalog: {
      providers: [
        { id: "claude", kind: "anthropic", base_url: mock.url },
        { id: "chatty", kind: "openai-chat", base_url: mock.url },
      ],
      models: [
        {
          id: "t/claude",
          context_length: 200_000,
          endpoints: [{ provider: "claude", upstream_model: "claude-x", pricing: { prompt: 1, completion: 2 }, supports: SUPPORTS }],
        },
        {
          id: "t/chat",
          context_length: 200_000,
          endpoints: [{ provider: "chatty", upstream_model: "gpt-x", pricing: { prompt: 1, completion: 2 }, supports: SUPPORTS }],
        },
      ],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const SCHEMA = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
const TOOL = { type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }

/** The bodies the mock upstream was sent while `call` ran. */
const bodiesDuring = (call: () => Promise<Response>) => sentDuring(mock, call)

const post = (path: string, json: unknown) => gw.fetch(path, { method: "POST", json })

describe("structured output to an anthropic upstream", () => {
  test("Responses text.format json_schema goes as output_config.format, with require_parameters", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/responses", {
        model: "t/claude",
        input: "where?",
        text: { format: { type: "json_schema", name: "place", schema: SCHEMA, strict: true } },
        provider: { require_parameters: true },
      }),
    )
    expect(res.status).toBe(200)
    await res.text()
    expect(sent.map((b) => b["output_config"])).toEqual([{ format: { type: "json_schema", schema: SCHEMA } }])
  })

  test("Chat response_format json_schema goes as output_config.format", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/chat/completions", {
        model: "t/claude",
        messages: [{ role: "user", content: "where?" }],
        response_format: { type: "json_schema", json_schema: { name: "place", schema: SCHEMA } },
      }),
    )
    expect(res.status).toBe(200)
    await res.text()
    expect(sent.map((b) => b["output_config"])).toEqual([{ format: { type: "json_schema", schema: SCHEMA } }])
  })

  test("Messages output_config.format goes on as it came", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/messages", {
        model: "t/claude",
        max_tokens: 256,
        messages: [{ role: "user", content: "where?" }],
        output_config: { format: { type: "json_schema", schema: SCHEMA } },
      }),
    )
    expect(res.status).toBe(200)
    await res.text()
    expect(sent.map((b) => b["output_config"])).toEqual([{ format: { type: "json_schema", schema: SCHEMA } }])
  })

  test("Responses text.format json_object is answered; no output_config goes (Anthropic has no JSON mode without a schema)", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/responses", { model: "t/claude", input: "where?", text: { format: { type: "json_object" } } }),
    )
    expect(res.status).toBe(200)
    await res.arrayBuffer()
    expect(sent.map((b) => "output_config" in b)).toEqual([false])
  })
})

describe("a forced tool_choice with reasoning on, to an anthropic upstream", () => {
  test("Messages thinking with tool_choice any is Anthropic's invalid_request_error naming tool_choice, no upstream call", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/messages", {
        model: "t/claude",
        max_tokens: 4096,
        thinking: { type: "enabled", budget_tokens: 1024 },
        tools: [{ name: "get_weather", input_schema: { type: "object", properties: {} } }],
        tool_choice: { type: "any" },
        messages: [{ role: "user", content: "weather?" }],
      }),
    )
    expect(res.status).toBe(400)
    const body = (await res.json()) as { type?: string; error?: { type?: string; message?: string } }
    expect(body.type).toBe("error")
    expect(body.error?.type).toBe("invalid_request_error")
    expect(body.error?.message).toContain("tool_choice: anthropic takes only auto or none while reasoning (thinking) is on")
    expect(sent).toEqual([])
  })

  test("Responses reasoning with a named tool_choice is a 400 naming tool_choice", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/responses", {
        model: "t/claude",
        input: "weather?",
        reasoning: { effort: "low" },
        tools: [TOOL],
        tool_choice: { type: "function", name: "get_weather" },
      }),
    )
    expect(await expectError(res, 400)).toContain("tool_choice: ")
    expect(sent).toEqual([])
  })
})

describe("POST /v1/responses: an image's data URL", () => {
  test("data:image/png;base64 without a comma or data is a 400 naming image_url, not sent upstream as a URL", async () => {
    for (const url of ["data:image/png;base64", "data:image/png;base64,", "data:;base64,AAAA", "data:image/png,AAAA"]) {
      const { res, sent } = await bodiesDuring(() =>
        post("/v1/responses", { model: "t/claude", input: [{ role: "user", content: [{ type: "input_image", image_url: url }] }] }),
      )
      expect(await expectError(res, 400)).toBe("Invalid request: input[0].content[0].image_url: a data URL must be data:<media type>;base64,<data>")
      expect(sent).toEqual([])
    }
  })

  test("a well-formed data URL goes to an anthropic upstream as a base64 source", async () => {
    const { res, sent } = await bodiesDuring(() =>
      post("/v1/responses", { model: "t/claude", input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,iVBORw==" }] }] }),
    )
    expect(res.status).toBe(200)
    await res.text()
    const messages = sent[0]?.["messages"] as ReadonlyArray<{ readonly content: ReadonlyArray<unknown> }>
    expect(messages[0].content[0]).toEqual({ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw==" } })
  })
})

describe("POST /v1/messages: Anthropic's rules in Anthropic's envelope", () => {
  const messagesError = async (res: Response) => {
    expect(res.status).toBe(400)
    const body = (await res.json()) as { type?: string; error?: { type?: string; message?: string } }
    expect(body.type).toBe("error")
    expect(body.error?.type).toBe("invalid_request_error")
    return body.error?.message
  }

  test("an image/bmp and data that is not base64 are 400s, no upstream call", async () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [[{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/bmp", data: "AAAA" } }] }], "messages[0].content[0].source.media_type: one of image/jpeg"],
      [[{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "%%%" } }] }], "messages[0].content[0].source.data: base64 data"],
    ]
    for (const [messages, rule] of cases) {
      const { res, sent } = await bodiesDuring(() => post("/v1/messages", { model: "t/claude", max_tokens: 64, messages }))
      expect(await messagesError(res)).toStartWith(`Invalid request: ${rule}`)
      expect(sent).toEqual([])
    }
  })
})
