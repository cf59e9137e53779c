/**
 * GET /v1/models/{id} with the pinned `openai` and `@anthropic-ai/sdk` clients' `models.retrieve`:
 * the OpenAI shape, the Anthropic shape when the request carries `anthropic-version`, the id's
 * slash sent encoded (as both SDKs send it) or plain, and a 404 in each format's envelope.
 */
import { describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import OpenAI from "openai"
import { useGateway } from "../support/gateway.js"
import { anthropicAt, caught, openaiAt } from "../support/sdk.js"

const gw = useGateway()
const openai = (apiKey = gw().adminKey) => openaiAt(gw(), apiKey)
const anthropic = () => anthropicAt(gw())

describe("GET /v1/models/{id}, OpenAI shape", () => {
  test("the openai SDK's models.retrieve reads {id, object: model, created, owned_by}", async () => {
    const model = await openai().models.retrieve("demo/echo")
    expect(model).toEqual({ id: "demo/echo", object: "model", created: 1767225600, owned_by: "demo" })
  })

  test("the id's slash may be sent encoded or plain", async () => {
    for (const path of ["/v1/models/demo%2Fecho", "/v1/models/demo/echo", "/v1/models/demo%2fecho"]) {
      const res = await gw().fetch(path)
      expect(res.status).toBe(200)
      expect(((await res.json()) as { id: string }).id).toBe("demo/echo")
    }
  })

  test("an unknown id is a 404 the SDK reads as NotFoundError; no key is a 401", async () => {
    const e = await caught(openai().models.retrieve("demo/missing"))
    expect(e).toBeInstanceOf(OpenAI.NotFoundError)
    expect((e as Error).message).toContain('Model "demo/missing" does not exist')
    const plain = await gw().fetch("/v1/models/nobody")
    expect(plain.status).toBe(404)
    expect(await plain.json()).toMatchObject({ error: { code: 404 } })
    expect(await caught(openai("sk-gw-v1-nope").models.retrieve("demo/echo"))).toBeInstanceOf(OpenAI.AuthenticationError)
  })

  test("a method other than GET is a 405", async () => {
    const res = await gw().fetch("/v1/models/demo%2Fecho", { method: "POST", json: {} })
    expect(res.status).toBe(405)
    expect(res.headers.get("allow")).toBe("GET")
  })
})

describe("GET /v1/models/{id} with anthropic-version, Anthropic shape", () => {
  test("the Anthropic SDK's models.retrieve reads ModelInfo: type, id, display_name, created_at", async () => {
    const model = await anthropic().models.retrieve("demo/echo")
    expect(model).toMatchObject({
      type: "model",
      id: "demo/echo",
      display_name: "Demo echo (offline, scripted)",
      created_at: "2026-01-01T00:00:00.000Z",
      max_input_tokens: 128000,
      max_tokens: 4096,
      lifecycle: "active",
    })
  })

  test("an unknown id is a 404 in Anthropic's envelope, which the SDK reads as NotFoundError", async () => {
    const e = await caught(anthropic().models.retrieve("demo/missing"))
    expect(e).toBeInstanceOf(Anthropic.NotFoundError)
    const res = await gw().fetch("/v1/models/demo%2Fmissing", { headers: { "anthropic-version": "2023-06-01" } })
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } })
  })
})
