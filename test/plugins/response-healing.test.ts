/**
 * The response-healing plugin: a non-streamed JSON answer that is not valid JSON is extracted
 * and repaired (validated against a json_schema), on all three client formats, against the mock
 * upstream; a cut answer is left as it was; streams and `enabled: false` are unchanged; a
 * client schema that is too large, does not compile or can backtrack is a 400 before any call.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { extractJson, heal, loadHealing, MAX_REPAIR_CHARS, unsafePattern, validatorOf } from "../../src/lib/json-healing.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway } from "../routing/helpers.js"

let mock: MockUpstream
let gw: Gateway

const FENCED = 'Sure! Here is the JSON:\n```json\n{"name": "Ada", "age": 36,}\n```\nAnything else?'
const REPAIRED = '{"name": "Ada", "age": 36}'
const VALID = '{"name":"Ada","age":36}'

const answerWith = (text: string, extra: Record<string, string> = {}) => ({ "x-mock-chunk-uri": encodeURIComponent(text), "x-mock-tokens": "1", ...extra })

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 1 })
  gw = await startGateway(
    catalogOf(
      [
        mockProvider(mock, "fenced", answerWith(FENCED)),
        mockProvider(mock, "valid", answerWith(VALID)),
        mockProvider(mock, "cut", answerWith('{"name": "Ada", "ag', { "x-mock-finish": "length" })),
        mockProvider(mock, "prose", answerWith("I cannot answer that.")),
      ],
      [
        model("t/fenced", endpoint("fenced", 1, 1)),
        model("t/valid", endpoint("valid", 1, 1)),
        model("t/cut", endpoint("cut", 1, 1)),
        model("t/prose", endpoint("prose", 1, 1)),
      ],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const HEAL = [{ id: "response-healing" }]
const PERSON = {
  type: "object",
  properties: { name: { type: "string" }, age: { type: "integer" } },
  required: ["name", "age"],
  additionalProperties: false,
}

interface Entry {
  readonly type: string
  readonly name: string
  readonly summary: string
  readonly data: { readonly mode: string; readonly changed: boolean; readonly valid: boolean; readonly truncated?: boolean }
}

const post = async (path: string, json: Record<string, unknown>) => {
  const res = await gw.fetch(path, { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
  const body = (await res.json()) as Record<string, unknown>
  const meta = body["service_metadata"] as { pipeline?: ReadonlyArray<Entry> } | undefined
  return { status: res.status, body, pipeline: meta?.pipeline }
}

const responsesText = (body: Record<string, unknown>) => {
  const output = body["output"] as ReadonlyArray<{ type: string; content?: ReadonlyArray<{ text: string }> }>
  return output.find((item) => item.type === "message")?.content?.[0]?.text
}

const healingEntry = (pipeline: ReadonlyArray<Entry> | undefined) => pipeline?.find((e) => e.name === "response-healing")

describe("response-healing: the text is extracted and repaired", () => {
  test("Responses json_object: a fenced answer with a trailing comma becomes the repaired JSON", async () => {
    const { status, body, pipeline } = await post("/v1/responses", {
      model: "t/fenced",
      input: "who?",
      text: { format: { type: "json_object" } },
      plugins: HEAL,
    })
    expect(status).toBe(200)
    expect(responsesText(body)).toBe(REPAIRED)
    expect(healingEntry(pipeline)).toMatchObject({ type: "plugin", name: "response-healing", data: { mode: "json_object", changed: true, valid: true } })
  })

  test("Responses json_schema: the repaired JSON is validated against the schema", async () => {
    const ok = await post("/v1/responses", {
      model: "t/fenced",
      input: "who?",
      text: { format: { type: "json_schema", name: "person", schema: PERSON } },
      plugins: HEAL,
    })
    expect(responsesText(ok.body)).toBe(REPAIRED)
    expect(healingEntry(ok.pipeline)?.data).toEqual({ mode: "json_schema", changed: true, valid: true })

    const strict = { ...PERSON, required: ["name", "age", "email"] }
    const invalid = await post("/v1/responses", {
      model: "t/fenced",
      input: "who?",
      text: { format: { type: "json_schema", name: "person", schema: strict } },
      plugins: HEAL,
    })
    expect(responsesText(invalid.body)).toBe(REPAIRED)
    expect(healingEntry(invalid.pipeline)?.data).toEqual({ mode: "json_schema", changed: true, valid: false })
  })

  test("Chat Completions response_format json_schema: the message content is healed", async () => {
    const { status, body, pipeline } = await post("/v1/chat/completions", {
      model: "t/fenced",
      messages: [{ role: "user", content: "who?" }],
      response_format: { type: "json_schema", json_schema: { name: "person", schema: PERSON } },
      plugins: HEAL,
    })
    expect(status).toBe(200)
    const choices = body["choices"] as ReadonlyArray<{ message: { content: string } }>
    expect(choices[0]?.message.content).toBe(REPAIRED)
    expect(healingEntry(pipeline)?.data).toEqual({ mode: "json_schema", changed: true, valid: true })
  })

  test("Messages output_config.format json_schema: the text block is healed", async () => {
    const { status, body } = await post("/v1/messages", {
      model: "t/fenced",
      max_tokens: 100,
      messages: [{ role: "user", content: "who?" }],
      output_config: { format: { type: "json_schema", schema: PERSON } },
      plugins: HEAL,
    })
    expect(status).toBe(200)
    const content = body["content"] as ReadonlyArray<{ type: string; text?: string }>
    expect(content.find((b) => b.type === "text")?.text).toBe(REPAIRED)
  })

  test("a valid answer is left alone and adds no pipeline entry", async () => {
    const { body, pipeline } = await post("/v1/responses", {
      model: "t/valid",
      input: "who?",
      text: { format: { type: "json_schema", name: "person", schema: PERSON } },
      plugins: HEAL,
    })
    expect(responsesText(body)).toBe(VALID)
    expect(healingEntry(pipeline)).toBeUndefined()
  })

  test("prose with no JSON in it stays as it was and the entry says it is not valid", async () => {
    const { body, pipeline } = await post("/v1/responses", {
      model: "t/prose",
      input: "who?",
      text: { format: { type: "json_object" } },
      plugins: HEAL,
    })
    expect(responsesText(body)).toBe("I cannot answer that.")
    expect(healingEntry(pipeline)?.data.valid).toBe(false)
  })
})

describe("response-healing: what it leaves alone", () => {
  test("an answer cut by the token limit is not healed, and the entry says so", async () => {
    const { body, pipeline } = await post("/v1/responses", {
      model: "t/cut",
      input: "who?",
      text: { format: { type: "json_object" } },
      plugins: HEAL,
    })
    expect(responsesText(body)).toBe('{"name": "Ada", "ag')
    expect(healingEntry(pipeline)?.data).toEqual({ mode: "json_object", changed: false, valid: false, truncated: true })
  })

  test("enabled: false leaves the answer as the upstream wrote it", async () => {
    const { body, pipeline } = await post("/v1/responses", {
      model: "t/fenced",
      input: "who?",
      text: { format: { type: "json_object" } },
      plugins: [{ id: "response-healing", enabled: false }],
    })
    expect(responsesText(body)).toBe(FENCED)
    expect(healingEntry(pipeline)).toBeUndefined()
  })

  test("a text format that is not JSON is not touched", async () => {
    const { body } = await post("/v1/responses", { model: "t/fenced", input: "who?", plugins: HEAL })
    expect(responsesText(body)).toBe(FENCED)
  })

  test("a stream passes through unchanged", async () => {
    const res = await gw.fetch("/v1/chat/completions", {
      method: "POST",
      json: {
        model: "t/fenced",
        stream: true,
        messages: [{ role: "user", content: "who?" }],
        response_format: { type: "json_object" },
        plugins: HEAL,
      },
    })
    expect(res.status).toBe(200)
    const text = await res.text()
    let content = ""
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: {")) continue
      const chunk = JSON.parse(line.slice(6)) as { choices: ReadonlyArray<{ delta: { content?: string } }> }
      content += chunk.choices[0]?.delta.content ?? ""
    }
    expect(content).toBe(FENCED)
  })
})

describe("response-healing: client schemas are untrusted", () => {
  const refused = async (schema: Record<string, unknown>) => {
    const before = mock.requests.length
    const { status, body } = await post("/v1/responses", {
      model: "t/fenced",
      input: "who?",
      text: { format: { type: "json_schema", name: "s", schema } },
      plugins: HEAL,
    })
    expect(mock.requests.length).toBe(before)
    const error = body["error"] as { code: number; message: string }
    expect(status).toBe(400)
    expect(error.code).toBe(400)
    return error.message
  }

  test("a pattern that can backtrack catastrophically is refused before any upstream call", async () => {
    const message = await refused({ type: "object", properties: { a: { type: "string", pattern: "^(a+)+$" } } })
    expect(message).toContain("text.format.schema.properties.a.pattern")
    expect(message).toContain("backtrack")
  })

  test("a schema that does not compile strictly is refused (unknown keyword)", async () => {
    const message = await refused({ type: "object", propertees: {} })
    expect(message).toContain("text.format.schema")
    expect(message).toContain("propertees")
  })

  test("a schema over the size cap is refused", async () => {
    const properties: Record<string, unknown> = {}
    for (let i = 0; i < 3000; i++) properties[`field_${i}`] = { type: "string", description: "x".repeat(20) }
    const message = await refused({ type: "object", properties })
    expect(message).toContain("at most 65536 bytes")
  })

  test("the same request streamed is not checked (nothing is healed)", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      json: { model: "t/valid", stream: true, input: "x", text: { format: { type: "json_schema", name: "s", schema: { type: "object", pattern: "(a+)+" } } }, plugins: HEAL },
    })
    expect(res.status).toBe(200)
    await res.text()
  })
})

describe("response-healing: the rules, as functions", () => {
  // ajv and jsonrepair are loaded by the first request that asks for healing; called alone, load them first.
  beforeAll(loadHealing)

  test("extractJson takes a fenced block, else the span from the first brace to the last", () => {
    expect(extractJson("text ```\n[1,2]\n``` more")).toBe("[1,2]")
    expect(extractJson('The answer is {"a": {"b": 1}} as asked.')).toBe('{"a": {"b": 1}}')
    expect(extractJson("no json")).toBe("no json")
  })

  test("heal repairs single quotes and unquoted keys, and json_object wants an object", () => {
    expect(heal("{a: 'x'}", "json_object", undefined)).toEqual({ text: '{"a": "x"}', changed: true, valid: true })
    expect(heal("[1, 2]", "json_object", undefined)).toEqual({ text: "[1, 2]", changed: false, valid: false })
  })

  test("prose that ends in a bare brace is left as it was, not replaced by an empty object", () => {
    const prose = "Here is a long explanation of the answer, which I will now give as JSON: {"
    expect(heal(prose, "json_object", undefined)).toEqual({ text: prose, changed: false, valid: false })
    // A JSON object the model did write, empty or not, is still taken from the prose around it.
    expect(heal("The answer: {} as asked", "json_object", undefined)).toEqual({ text: "{}", changed: true, valid: true })
  })

  test("a text past MAX_REPAIR_CHARS is judged as it is, not repaired on the request thread; one within it is", () => {
    const broken = (n: number) => `{items: [${Array.from({ length: n }, (_, i) => `'item ${i}'`).join(", ")}]}`
    const long = broken(60_000)
    expect(long.length).toBeGreaterThan(MAX_REPAIR_CHARS)
    expect(heal(long, "json_object", undefined)).toEqual({ text: long, changed: false, valid: false })
    expect(heal(broken(100), "json_object", undefined)).toMatchObject({ changed: true, valid: true })
    // Valid JSON of any length is still judged (it needs no repair).
    const valid = JSON.stringify({ items: Array.from({ length: 60_000 }, (_, i) => `item ${i}`) })
    expect(heal(valid, "json_object", undefined)).toEqual({ text: valid, changed: false, valid: true })
  })

  test("unsafePattern refuses shapes that backtrack super-linearly and backreferences, not plain ones", () => {
    expect(unsafePattern("^(a+)+$")).toContain("nests quantifiers")
    expect(unsafePattern("(a|aa)*")).toContain("quantifies a group with alternatives")
    expect(unsafePattern("(\\w*)*x")).toContain("nests quantifiers")
    expect(unsafePattern("(a)\\1")).toContain("uses a backreference")
    // No nesting, yet polynomial: each \w* can take the same letters (0.6 s over 80 characters, the fifth power).
    expect(unsafePattern("\\w*\\w*\\w*\\w*\\w*!")).toContain("can match the same characters one after the other")
    expect(unsafePattern("\\p{L}*\\p{L}*!")).toContain("can match the same characters")
    for (const plain of ["^[a-z]+@[a-z]+\\.[a-z]{2,}$", "^(ab)+$", "^-?\\d+(\\.\\d+)?([eE][+-]?\\d+)?$", "^\\p{L}+$", "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"]) {
      expect(unsafePattern(plain)).toBeUndefined()
    }
    for (const refused of ["^(a+)+$", "\\w*\\w*\\w*\\w*\\w*!"]) expect(unsafePattern(refused)).toStartWith("a pattern that cannot backtrack catastrophically")
  })

  test("a client's $schema draft URI and $id do not stop the schema from compiling", () => {
    const schema = { $schema: "https://json-schema.org/draft/2020-12/schema", $id: "urn:person", type: "object" }
    expect(typeof validatorOf(schema, "s")).toBe("function")
    expect(typeof validatorOf({ ...schema, required: ["a"] }, "s")).toBe("function")
  })

  test("a schema is compiled once: the same schema gives the same validator", () => {
    const a = validatorOf({ type: "object", properties: { x: { type: "number" } } }, "s")
    const b = validatorOf({ type: "object", properties: { x: { type: "number" } } }, "s")
    expect(typeof a).toBe("function")
    expect(a).toBe(b)
  })
})
