/**
 * The data plane is generic over a client format: a format mounted from the registry
 * answers every refusal of its route in its own envelope (before the body, on decode, on the
 * upstream's failure, when busy), answers through its own encoder, and takes the key from
 * `x-api-key` as Anthropic's clients send it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Either } from "effect"
import { BadRequest } from "../../src/domain/errors.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { formats } from "../../src/formats/index.js"
import { responsesFormat } from "../../src/formats/responses/index.js"
import type { ClientFormat, Encoder, FinishExtras } from "../../src/formats/format.js"
import { expectError, startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

/** A format of its own envelope (`{toy: {status, reason}}`) whose body carries the prompt as `say`. */
const toyFormat: ClientFormat = {
  name: "toy",
  decode: (body) => {
    const say = (body as { say?: unknown }).say
    if (typeof say !== "string") return Either.left(new BadRequest({ message: "Invalid request: say: must be a string" }))
    return decodeResponsesRequest({ model: "demo/echo", input: say, provider: { order: ["fake"] }, stream: (body as { stream?: unknown }).stream === true })
  },
  encoder: (request, options) => recording(responsesFormat.encoder(request, options)),
  errorBody: (e) => JSON.stringify({ toy: { status: e.status, reason: e.message } }),
}

/** What the route handed the toy encoder when its answers ended (the latest last). */
const extrasSeen: Array<FinishExtras | undefined> = []

/** The Responses encoder, recording the extras of `finish` and `fail`. */
const recording = (inner: Encoder): Encoder => ({
  start: () => inner.start(),
  push: (events, from, to) => inner.push(events, from, to),
  finish: (extras) => {
    extrasSeen.push(extras)
    return inner.finish(extras)
  },
  fail: (failure, extras) => {
    extrasSeen.push(extras)
    return inner.fail(failure, extras)
  },
  result: () => inner.result(),
  get status() {
    return inner.status
  },
  get ended() {
    return inner.ended
  },
  get usage() {
    return inner.usage
  },
  get finishReason() {
    return inner.finishReason
  },
  get completionText() {
    return inner.completionText
  },
  get reasoningText() {
    return inner.reasoningText
  },
})

let gw: InProcessGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  gw = await startInProcessGateway({}, { formats: [...formats, { path: "/v1/toy", format: toyFormat }] })
})
afterAll(() => gw?.stop())

const toy = (json: unknown, init: { key?: string | null; headers?: Record<string, string> } = {}) =>
  gw.fetch("/v1/toy", { method: "POST", json, ...init })

const toyError = async (res: Response, status: number): Promise<string> => {
  const body = (await res.json()) as { toy?: { status: number; reason: string } }
  expect({ status: res.status, body }).toMatchObject({ status, body: { toy: { status } } })
  return body.toy?.reason ?? ""
}

describe("the format registry", () => {
  test("/v1/responses is mounted with the Responses format", () => {
    expect(formats.find((f) => f.path === "/v1/responses")?.format).toBe(responsesFormat)
  })

  test("a mounted format decodes its own body and answers through its encoder", async () => {
    const res = await toy({ say: "hello there" })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-generation-id")).toMatch(/^gen-/)
    const body = (await res.json()) as { output: Array<{ content: Array<{ text: string }> }> }
    expect(body.output[0]?.content[0]?.text).toBe("Echo: hello there")
  })

  test("a mounted format streams through its encoder, and the stream ends with the encoder's last text", async () => {
    const text = await (await toy({ say: "hi", stream: true })).text()
    expect(text).toContain("event: response.completed")
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true)
  })
})

describe("every refusal of a format's route is in its envelope", () => {
  test("a missing key, before the body is read", async () => {
    expect(await toyError(await toy({ say: "x" }, { key: null }), 401)).toContain("Missing credentials")
  })

  test("an unknown key", async () => {
    expect(await toyError(await toy({ say: "x" }, { key: `sk-gw-v1-${"0".repeat(64)}` }), 401)).toContain("Invalid API key")
  })

  test("a body that is not JSON, and one the format's decoder refuses", async () => {
    await toyError(await gw.fetch("/v1/toy", { method: "POST", body: "{nope", headers: { "content-type": "application/json" } }), 400)
    expect(await toyError(await toy({ say: 7 }), 400)).toBe("Invalid request: say: must be a string")
  })

  test("a content type that is not JSON", async () => {
    await toyError(await gw.fetch("/v1/toy", { method: "POST", body: "x", headers: { "content-type": "text/plain" } }), 415)
  })

  test("an upstream failure", async () => {
    expect(await toyError(await toy({ say: "hi [fail:400]" }), 400)).toContain("Provider fake")
  })

  test("a method the path does not serve: 405 with Allow", async () => {
    const res = await gw.fetch("/v1/toy", { method: "GET" })
    expect(res.headers.get("allow")).toBe("POST")
    await toyError(res, 405)
  })

  test("the Responses format keeps the contract's envelope", async () => {
    await expectError(await gw.fetch("/v1/responses", { method: "POST", json: { input: "x" }, key: null }), 401)
    await expectError(await gw.fetch("/v1/responses", { method: "GET" }), 405)
  })
})

describe("data-plane auth: Anthropic clients' headers", () => {
  test("the key is taken from x-api-key when Authorization is absent", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      key: null,
      json: { model: "demo/echo", input: "hi" },
      headers: { "x-api-key": gw.adminKey, "anthropic-version": "2023-06-01", "anthropic-beta": "tools-2024-04-04" },
    })
    expect(res.status).toBe(200)
  })

  test("a bad x-api-key is refused with 401", async () => {
    const res = await gw.fetch("/v1/responses", { method: "POST", key: null, json: { input: "hi" }, headers: { "x-api-key": "sk-nope" } })
    expect(res.status).toBe(401)
  })

  test("Authorization wins over x-api-key", async () => {
    const res = await gw.fetch("/v1/responses", {
      method: "POST",
      key: `sk-gw-v1-${"0".repeat(64)}`,
      json: { model: "demo/echo", input: "hi" },
      headers: { "x-api-key": gw.adminKey },
    })
    expect(res.status).toBe(401)
  })
})

describe("routing metadata reaches every format's encoder (FinishExtras)", () => {
  for (const stream of [false, true]) {
    test(`${stream ? "stream" : "JSON"}: with X-Service-Metadata, the encoder gets service_metadata, usage and cost`, async () => {
      await (await toy({ say: "hello", stream }, { headers: { "x-service-metadata": "enabled" } })).text()
      const extras = extrasSeen.at(-1)
      expect(extras?.serviceMetadata).toMatchObject({ requested: "demo/echo", attempts: [{ provider: "fake", status: 200 }] })
      expect(extras?.metadataAlias).toBeUndefined()
      expect(extras?.cost).toBeGreaterThan(0)
      expect(extras?.isByok).toBe(false)
    })

    test(`${stream ? "stream" : "JSON"}: with the SDK's header, the alias is asked for too`, async () => {
      await (await toy({ say: "hello", stream }, { headers: { "x-openrouter-metadata": "enabled" } })).text()
      expect(extrasSeen.at(-1)).toMatchObject({ serviceMetadata: { requested: "demo/echo" }, metadataAlias: true })
    })

    test(`${stream ? "stream" : "JSON"}: without either header, no metadata`, async () => {
      await (await toy({ say: "hello", stream })).text()
      expect(extrasSeen.at(-1)?.serviceMetadata).toBeUndefined()
    })
  }

  test("a failure after the first byte hands the metadata to the format's failure too", async () => {
    await (await toy({ say: "one two three [fail-mid]", stream: true }, { headers: { "x-service-metadata": "enabled" } })).text()
    expect(extrasSeen.at(-1)?.serviceMetadata).toMatchObject({ requested: "demo/echo" })
  })
})
