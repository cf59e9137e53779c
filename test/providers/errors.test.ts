import { describe, expect, test } from "bun:test"
import { errorDetailOf, errorFromEvent, errorFromStatus, retryAfterSeconds } from "../../src/providers/errors"

const noHeaders = new Headers()

describe("upstream status → ProviderError kind", () => {
  test("request errors are bad_request with the provider's message", () => {
    for (const status of [400, 404, 409, 413, 422]) {
      const error = errorFromStatus(status, { message: "field x is wrong" }, noHeaders)
      expect([error.kind, error.message, error.upstreamStatus]).toEqual(["bad_request", "field x is wrong", status])
    }
  })

  test("a request error about the context length is context_length", () => {
    expect(errorFromStatus(400, { message: "This model's maximum context length is 8192 tokens" }, noHeaders).kind).toBe("context_length")
    expect(errorFromStatus(400, { message: "prompt is too long: 300000 tokens > 200000 maximum" }, noHeaders).kind).toBe("context_length")
    expect(errorFromStatus(413, { message: "Too many tokens in the request" }, noHeaders).kind).toBe("context_length")
    expect(errorFromStatus(400, { message: "bad", code: "context_length_exceeded" }, noHeaders).kind).toBe("context_length")
  })

  test("auth, rate limit, overload, timeout and server statuses", () => {
    expect(errorFromStatus(401, { message: "m" }, noHeaders).kind).toBe("auth")
    expect(errorFromStatus(403, { message: "m" }, noHeaders).kind).toBe("auth")
    expect(errorFromStatus(529, { message: "m" }, noHeaders).kind).toBe("overloaded")
    expect(errorFromStatus(500, { message: "m", code: "overloaded_error" }, noHeaders).kind).toBe("overloaded")
    expect(errorFromStatus(408, { message: "m" }, noHeaders).kind).toBe("timeout")
    expect(errorFromStatus(504, { message: "m" }, noHeaders).kind).toBe("timeout")
    expect(errorFromStatus(500, { message: "m" }, noHeaders).kind).toBe("server")
    expect(errorFromStatus(502, { message: "m" }, noHeaders).kind).toBe("server")
    const limited = errorFromStatus(429, { message: "slow down" }, new Headers({ "retry-after": "7" }))
    expect([limited.kind, limited.retryAfterSeconds]).toEqual(["rate_limited", 7])
  })

  test("Retry-After as an HTTP date or as retry-after-ms", () => {
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString()
    const seconds = retryAfterSeconds(new Headers({ "retry-after": inTenSeconds }))
    expect(seconds).toBeGreaterThanOrEqual(9)
    expect(seconds).toBeLessThanOrEqual(10)
    expect(retryAfterSeconds(new Headers({ "retry-after-ms": "1500" }))).toBe(2)
    expect(retryAfterSeconds(noHeaders)).toBeUndefined()
  })

  test("the error body's message and code are read from both providers' shapes", () => {
    expect(errorDetailOf('{"error":{"message":"m1","type":"invalid_request_error","code":"c1"}}', "f")).toEqual({ message: "m1", code: "c1" })
    expect(errorDetailOf('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', "f")).toEqual({
      message: "Overloaded",
      code: "overloaded_error",
    })
    expect(errorDetailOf('{"error":"plain"}', "f")).toEqual({ message: "plain" })
    // An HTML page (a proxy's): its title, never its markup.
    expect(errorDetailOf("<html>Bad Gateway</html>", "upstream answered 502")).toEqual({ message: "upstream answered 502" })
    expect(errorDetailOf("<!DOCTYPE html><html><head><title> 504 Gateway Time-out </title><style>body{}</style></head><body>…</body></html>", "upstream answered 504")).toEqual({
      message: "upstream answered 504: 504 Gateway Time-out",
    })
    expect(errorDetailOf("upstream connect error", "f")).toEqual({ message: "upstream connect error" })
    expect(errorDetailOf("", "fallback")).toEqual({ message: "fallback" })
  })
})

describe("in-stream error event → ProviderError kind", () => {
  test("codes map to kinds; unknown codes are server errors", () => {
    expect(errorFromEvent({ message: "m", code: "overloaded_error" }).kind).toBe("overloaded")
    expect(errorFromEvent({ message: "m", code: "rate_limit_exceeded" }).kind).toBe("rate_limited")
    expect(errorFromEvent({ message: "m", code: "invalid_request_error" }).kind).toBe("bad_request")
    expect(errorFromEvent({ message: "m", code: "something_new" }).kind).toBe("server")
    expect(errorFromEvent({ message: "m" }).kind).toBe("server")
  })

  test("a context-length message is context_length, but not on a rate limit", () => {
    expect(errorFromEvent({ message: "maximum context length exceeded", code: "invalid_request_error" }).kind).toBe("context_length")
    expect(errorFromEvent({ message: "too many tokens per minute", code: "rate_limit_exceeded" }).kind).toBe("rate_limited")
  })
})
