import { describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import {
  type ApiError,
  BadGateway,
  BadRequest,
  Forbidden,
  InternalError,
  NotFound,
  Overloaded,
  PayloadTooLarge,
  PaymentRequired,
  RateLimited,
  RequestTimeout,
  ServiceUnavailable,
  Unauthorized,
  UpstreamTimeout,
} from "../../../src/domain/errors.js"
import { messagesFormat } from "../../../src/formats/messages/index.js"

const bodyOf = (e: ApiError) => JSON.parse(messagesFormat.errorBody(e)) as { type: string; error: Record<string, unknown> } & Record<string, unknown>

describe("Messages errors: Anthropic's envelope {type: error, error: {type, message}}", () => {
  const cases: Array<[ApiError, string]> = [
    [new BadRequest({ message: "m" }), "invalid_request_error"],
    [new Unauthorized({ message: "m" }), "authentication_error"],
    [new PaymentRequired({ message: "m" }), "billing_error"],
    [new Forbidden({ message: "m" }), "permission_error"],
    [new NotFound({ message: "m" }), "not_found_error"],
    [new RequestTimeout({ message: "m" }), "timeout_error"],
    [new UpstreamTimeout({ message: "m" }), "timeout_error"],
    [new PayloadTooLarge({ message: "m" }), "request_too_large"],
    [new RateLimited({ message: "m" }), "rate_limit_error"],
    [new InternalError({ message: "m" }), "api_error"],
    [new BadGateway({ message: "m" }), "api_error"],
    [new ServiceUnavailable({ message: "m" }), "api_error"],
    [new Overloaded({ message: "m" }), "overloaded_error"],
  ]
  for (const [error, type] of cases) {
    test(`${error.status} is ${type}`, () => {
      expect(bodyOf(error)).toEqual({ type: "error", error: { type, message: "m" } })
    })
  }

  test("the contract's error.metadata rides along inside error, routing metadata beside it", () => {
    const blocked = new Forbidden({
      message: "Blocked by guardrail",
      metadata: { patterns: ["secret"] },
      service_metadata: { attempt: 0 },
      openrouter_metadata: { attempt: 0 },
    })
    expect(bodyOf(blocked)).toEqual({
      type: "error",
      error: { type: "permission_error", message: "Blocked by guardrail", metadata: { patterns: ["secret"] } },
      service_metadata: { attempt: 0 },
      openrouter_metadata: { attempt: 0 },
    })
  })

  test("the SDK reads the envelope: its error class, type and message", async () => {
    const answer = (e: ApiError) =>
      new Anthropic({
        apiKey: "sk-test",
        baseURL: "http://gateway.test",
        maxRetries: 0,
        fetch: (async () => new Response(messagesFormat.errorBody(e), { status: e.status, headers: { "content-type": "application/json" } })) as unknown as typeof fetch,
      }).messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
    const caught = async (e: ApiError) => {
      try {
        await answer(e)
      } catch (thrown) {
        return thrown as InstanceType<typeof Anthropic.APIError>
      }
      throw new Error("no error")
    }
    const auth = await caught(new Unauthorized({ message: "Invalid API key" }))
    expect(auth).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(auth.type).toBe("authentication_error")
    // The SDK's own wording of any envelope: the status and the body (as against Anthropic's API).
    expect(auth.message).toBe(`401 ${JSON.stringify({ type: "error", error: { type: "authentication_error", message: "Invalid API key" } })}`)
    expect(auth.error).toEqual({ type: "error", error: { type: "authentication_error", message: "Invalid API key" } })
    const bad = await caught(new BadRequest({ message: "Invalid request: max_tokens: is missing" }))
    expect(bad).toBeInstanceOf(Anthropic.BadRequestError)
    expect(bad.type).toBe("invalid_request_error")
    const billing = await caught(new PaymentRequired({ message: "Insufficient credits" }))
    expect(billing.status).toBe(402)
    expect(billing.type).toBe("billing_error")
  })
})
