/**
 * The bedrock provider against the fake Bedrock (scripts/mock-bedrock.ts), whose SigV4 check is
 * its own: request shape, signature (AWS's published test vectors first), credentials, Converse
 * and ConverseStream answers (frames split at every byte), errors.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { AwsV4Signer } from "aws4fetch"
import { eventFrame, MOCK_ACCESS_KEY_ID, MOCK_BEDROCK_API_KEY, MOCK_SECRET_ACCESS_KEY, type MockBedrock, piecesOf, startMockBedrock } from "../../scripts/mock-bedrock"
import { bedrockProvider } from "../../src/providers/bedrock/adapter"
import { authHeaders, bedrockAuthFrom } from "../../src/providers/bedrock/credentials"
import { FrameSplitter } from "../../src/providers/bedrock/stream"
import { bedrockErrorFromStatus, modelPath } from "../../src/providers/bedrock/wire"
import { ProviderError, type ProviderConfig, type ProviderEvent } from "../../src/providers/types"
import { consumed, eventsOf, eventually, literalTexts, providerErrorOf, textRequest, weatherTool } from "./helpers"

/** AWS's SigV4 test suite (aws-sig-v4-test-suite): its credentials, date, region and service. */
const SUITE = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "us-east-1",
  service: "service",
  datetime: "20150830T123600Z",
}
const CREDENTIAL = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature="

describe("SigV4: AWS's published test vectors", () => {
  const vectors = [
    ["get-vanilla", "GET", "https://example.amazonaws.com/", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"],
    ["get-vanilla-query-order-key-case", "GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"],
    ["post-vanilla", "POST", "https://example.amazonaws.com/", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"],
    ["post-vanilla-query", "POST", "https://example.amazonaws.com/?Param1=value1", "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"],
  ] as const
  for (const [name, method, url, signature] of vectors) {
    test(`${name} signs to the suite's signature`, async () => {
      const signed = await new AwsV4Signer({ method, url, ...SUITE }).sign()
      expect(signed.headers.get("authorization")).toBe(CREDENTIAL + signature)
    })
  }
})

describe("SigV4: the provider's own signer signs as aws4fetch's AwsV4Signer does", () => {
  const urls = [
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream",
    "https://bedrock-runtime.eu-west-3.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse",
    "http://127.0.0.1:4567/model/amazon.titan-embed-text-v2%3A0/invoke",
    "https://proxy.example.com:8443/base//path/model/x%20y(1)!/invoke?b=2&a=1&a=0&c=%20*",
  ]
  const bodies = ["", '{"messages":[{"role":"user","content":[{"text":"Hello ✓ 日本"}]}]}', "x".repeat(70000)]
  const datetimes = ["20150830T123600Z", "20261129T235959Z"]
  for (const [i, url] of urls.entries()) {
    for (const token of [undefined, "FQoGZXIvYXdzE+token/with=chars"]) {
      test(`url ${i}, ${token === undefined ? "no session token" : "a session token"}: the same headers on every body and day`, async () => {
        for (const body of bodies) {
          for (const datetime of datetimes) {
            const auth = bedrockAuthFrom(
              { id: "br", kind: "bedrock", region: "eu-west-3", access_key_id_env: "K", secret_access_key_env: "S", ...(token === undefined ? {} : { session_token_env: "T" }) },
              undefined,
              { K: "AKIDEXAMPLE", S: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", T: token },
            )
            if (auth instanceof ProviderError) throw auth
            const expected: Record<string, string> = {}
            const signed = await new AwsV4Signer({
              method: "POST",
              url,
              body,
              accessKeyId: "AKIDEXAMPLE",
              secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
              ...(token === undefined ? {} : { sessionToken: token }),
              service: "bedrock",
              region: "eu-west-3",
              datetime,
            }).sign()
            signed.headers.forEach((value, name) => {
              expected[name] = value
            })
            // Twice: the second with the day's signing key from the cache.
            expect(authHeaders(auth, url, body, datetime)).toEqual(expected)
            expect(authHeaders(auth, url, body, datetime)).toEqual(expected)
          }
        }
      })
    }
  }
})

describe("the model path: ids with ':' and ARNs with '/' are one percent-encoded segment", () => {
  test("a model id's ':' is sent as %3A", () => {
    expect(modelPath("anthropic.claude-3-5-haiku-20241022-v1:0", "converse")).toBe("/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse")
  })
  test("an inference profile ARN's ':' and '/' are sent encoded", () => {
    expect(modelPath("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0", "converse-stream")).toBe(
      "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse-stream",
    )
  })
})

describe("credentials: the config's key pair, else the API key, else the AWS_* variables", () => {
  const base: ProviderConfig = { id: "br", kind: "bedrock", region: "eu-west-3" }
  test("the config's key pair and session token sign with SigV4", () => {
    const auth = bedrockAuthFrom({ ...base, access_key_id_env: "K", secret_access_key_env: "S", session_token_env: "T" }, "api-key", { K: "ak", S: "sk", T: "tok", AWS_ACCESS_KEY_ID: "other" })
    expect(auth).toMatchObject({ kind: "sigv4", accessKeyId: "ak", secretAccessKey: "sk", sessionToken: "tok", region: "eu-west-3" })
  })
  test("without a key pair, the API key is a bearer token", () => {
    expect(bedrockAuthFrom(base, "api-key", { AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" })).toEqual({ kind: "bearer", token: "api-key" })
  })
  test("without either, the standard AWS variables", () => {
    expect(bedrockAuthFrom(base, undefined, { AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b", AWS_SESSION_TOKEN: "c" })).toMatchObject({ kind: "sigv4", accessKeyId: "a", sessionToken: "c" })
  })
  test("none at all is an auth error naming what to set, with no value in it", () => {
    const auth = bedrockAuthFrom({ ...base, access_key_id_env: "K", secret_access_key_env: "S" }, undefined, { K: "ak-secret-value" })
    expect(auth).toBeInstanceOf(ProviderError)
    expect((auth as ProviderError).kind).toBe("auth")
    expect((auth as ProviderError).message).toContain("K and S must both be set")
    expect((auth as ProviderError).message).not.toContain("ak-secret-value")
  })
})

describe("event-stream frames split by their length prefix", () => {
  const frames = [
    eventFrame("messageStart", { role: "assistant" }),
    eventFrame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "héllo" } }),
    eventFrame("messageStop", { stopReason: "end_turn" }),
  ]
  const whole = piecesOf(frames, 0)[0] as Uint8Array
  test("cut at every byte position into two reads, the same frames come out", () => {
    for (let cut = 0; cut <= whole.length; cut++) {
      const got: Array<string> = []
      const splitter = new FrameSplitter(1 << 20, (bytes, start, end) => got.push(Buffer.from(bytes.subarray(start, end)).toString("hex")))
      splitter.feed(whole, 0, cut)
      splitter.feed(whole, cut, whole.length)
      expect(got).toEqual(frames.map((f) => Buffer.from(f).toString("hex")))
      expect(splitter.holding).toBe(false)
    }
  })
  test("fed one byte at a time, the same frames come out", () => {
    const got: Array<string> = []
    const splitter = new FrameSplitter(1 << 20, (bytes, start, end) => got.push(Buffer.from(bytes.subarray(start, end)).toString("hex")))
    for (let i = 0; i < whole.length; i++) splitter.feed(whole, i, i + 1)
    expect(got).toEqual(frames.map((f) => Buffer.from(f).toString("hex")))
  })
  test("a frame longer than the event bound is refused", () => {
    const splitter = new FrameSplitter(32, () => undefined)
    expect(() => splitter.feed(whole, 0, whole.length)).toThrow("larger than 32 bytes")
  })
})

let mock: MockBedrock
const KEYS = { BR_TEST_KEY: MOCK_ACCESS_KEY_ID, BR_TEST_SECRET: MOCK_SECRET_ACCESS_KEY }
beforeAll(async () => {
  Object.assign(process.env, KEYS)
  mock = await startMockBedrock()
})
afterAll(async () => {
  await mock.stop()
})

let configs = 0
/** A fresh config object each time (credentials are read once per provider config). */
const sigv4 = (headers: Record<string, string> = {}): ProviderConfig => ({
  id: `bedrock-${configs++}`,
  kind: "bedrock",
  base_url: mock.url,
  region: "us-west-2",
  access_key_id_env: "BR_TEST_KEY",
  secret_access_key_env: "BR_TEST_SECRET",
  headers,
})
const options = (stream: boolean, apiKey?: string) => ({ stream, signal: new AbortController().signal, ...(apiKey === undefined ? {} : { apiKey }) })
/** The body of the fake's last request. */
const lastBody = (): Record<string, unknown> => (mock.requests.at(-1)?.body ?? {}) as Record<string, unknown>
const ARN = "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0"

describe("bedrock adapter against the fake Bedrock", () => {
  test("Converse: the path, the SigV4 signature over the encoded ARN, and the body", async () => {
    const request = textRequest("hello", { model: ARN, instructions: "Be brief.", maxOutputTokens: 64, temperature: 0.2, tools: [weatherTool], toolChoice: "required" })
    const events = await eventsOf(await bedrockProvider.open(request, sigv4(), options(false)))
    const seen = mock.requests.at(-1)
    expect(seen?.path).toBe(`/model/${encodeURIComponent(ARN)}/converse`)
    expect(seen?.auth).toBe("sigv4")
    expect(seen?.headers["authorization"]).toContain(`Credential=${MOCK_ACCESS_KEY_ID}/`)
    expect(seen?.headers["authorization"]).toContain("/us-west-2/bedrock/aws4_request")
    expect(seen?.body).toEqual({
      messages: [{ role: "user", content: [{ text: "hello" }] }],
      system: [{ text: "Be brief." }],
      inferenceConfig: { maxTokens: 64, temperature: 0.2 },
      toolConfig: { tools: [{ toolSpec: { name: "get_weather", description: "Weather of a city", inputSchema: { json: weatherTool.parameters } } }], toolChoice: { any: {} } },
    })
    expect(events).toEqual([
      { type: "text", delta: "Echo: hello" },
      { type: "usage", usage: { inputTokens: 13, cachedTokens: 2, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 0 } },
      { type: "finish", reason: "stop", native: "end_turn" },
    ])
  })

  test("a model id with ':' is signed as sent (the fake checks the signature itself)", async () => {
    await eventsOf(await bedrockProvider.open(textRequest("x", { model: "amazon.nova-pro-v1:0" }), sigv4(), options(true)))
    expect(mock.requests.at(-1)?.path).toBe("/model/amazon.nova-pro-v1%3A0/converse-stream")
    expect(mock.requests.at(-1)?.auth).toBe("sigv4")
  })

  test("a session token is sent as x-amz-security-token and signed with the rest", async () => {
    process.env.BR_TEST_TOKEN = "session-token-value"
    await eventsOf(await bedrockProvider.open(textRequest("x"), { ...sigv4(), session_token_env: "BR_TEST_TOKEN" }, options(false)))
    const seen = mock.requests.at(-1)
    expect(seen?.headers["x-amz-security-token"]).toBe("session-token-value")
    expect(seen?.headers["authorization"]).toContain("SignedHeaders=host;x-amz-date;x-amz-security-token")
    expect(seen?.auth).toBe("sigv4")
  })

  test("a Bedrock API key is sent as a bearer token, with no signature", async () => {
    const config: ProviderConfig = { id: "bedrock-key", kind: "bedrock", base_url: mock.url, region: "us-east-1" }
    await eventsOf(await bedrockProvider.open(textRequest("x"), config, options(false, MOCK_BEDROCK_API_KEY)))
    expect(mock.requests.at(-1)?.auth).toBe("bearer")
    expect(mock.requests.at(-1)?.headers["x-amz-date"]).toBeUndefined()
  })

  test("a wrong secret fails the signature check: an auth error", async () => {
    process.env.BR_BAD_SECRET = "not-the-secret"
    const error = await providerErrorOf(bedrockProvider.open(textRequest("x"), { ...sigv4(), secret_access_key_env: "BR_BAD_SECRET" }, options(false)))
    expect(error.kind).toBe("auth")
  })

  test("ConverseStream: text deltas, then usage, then finish", async () => {
    const events = await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-tokens": "3" }), options(true)))
    expect(events.filter((e) => e.type === "text")).toEqual([
      { type: "text", delta: "tok " },
      { type: "text", delta: "tok " },
      { type: "text", delta: "tok " },
    ])
    expect(events.slice(-2)).toEqual([
      { type: "usage", usage: { inputTokens: 13, cachedTokens: 2, cacheWriteTokens: 0, outputTokens: 7, reasoningTokens: 0 } },
      { type: "finish", reason: "stop", native: "end_turn" },
    ])
  })

  test("ConverseStream: ASCII text deltas go on as the upstream's literals, in place in its read (no text event each)", async () => {
    const call = await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-tokens": "3" }), options(true))
    const types: Array<string> = []
    for await (const batch of call.events) for (const e of batch) types.push(e.type)
    expect(types).toContain("text_literals")
    expect(types).not.toContain("text")
  })

  test("ConverseStream written 7 bytes at a time: the same events", async () => {
    const whole = await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-tokens": "4", "x-mock-chunk": encodeURIComponent("日本 ") }), options(true)))
    const split = await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-tokens": "4", "x-mock-chunk": encodeURIComponent("日本 "), "x-mock-split": "7" }), options(true)))
    expect(split).toEqual(whole)
    expect(split.filter((e) => e.type === "text").map((e) => (e as { delta: string }).delta).join("")).toBe("日本 日本 日本 日本 ")
  })

  test("a streamed tool call: its start, its input in deltas, finish tool_calls", async () => {
    const events = await eventsOf(await bedrockProvider.open(textRequest("x", { tools: [weatherTool] }), sigv4({ "x-mock-scenario": "tool_call" }), options(true)))
    expect(events.slice(0, 3)).toEqual([
      { type: "tool_call_start", index: 0, callId: "tooluse_0", name: "get_weather" },
      { type: "tool_call_delta", index: 0, delta: '{"cit' },
      { type: "tool_call_delta", index: 0, delta: 'y":"Paris"}' },
    ])
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls", native: "tool_use" })
  })

  test("reasoning comes as reasoning deltas, JSON and streamed", async () => {
    const streamed = await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-scenario": "reasoning", "x-mock-tokens": "1" }), options(true)))
    expect(streamed.slice(0, 2)).toEqual([
      { type: "reasoning", delta: "Thinking " },
      { type: "reasoning", delta: "it over." },
    ])
    const json = await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-scenario": "reasoning" }), options(false)))
    expect(json[0]).toEqual({ type: "reasoning", delta: "Thinking it over." })
  })

  test("Claude's thinking budget goes in additionalModelRequestFields, on top of the answer's maximum", async () => {
    const request = textRequest("x", { model: "anthropic.claude-sonnet-4-20250514-v1:0", maxOutputTokens: 100, reasoning: { effort: "low" } })
    await eventsOf(await bedrockProvider.open(request, sigv4(), options(false)))
    const body = lastBody()
    expect(body["additionalModelRequestFields"]).toEqual({ thinking: { type: "enabled", budget_tokens: 1024 } })
    expect(body["inferenceConfig"]).toEqual({ maxTokens: 1124 })
  })

  test("structured output is a forced answer tool whose input is the answer's text", async () => {
    const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] }
    const request = textRequest("x", { responseFormat: { type: "json_schema", name: "a", schema } })
    for (const stream of [false, true]) {
      const events = await eventsOf(await bedrockProvider.open(request, sigv4(), options(stream)))
      expect(lastBody()["toolConfig"]).toMatchObject({ tools: [{ toolSpec: { name: "json_response", inputSchema: { json: schema } } }], toolChoice: { tool: { name: "json_response" } } })
      expect(events.filter((e) => e.type === "text").map((e) => (e as { delta: string }).delta).join("")).toBe('{"answer":"yes"}')
      expect(events.some((e) => e.type === "tool_call_start")).toBe(false)
      expect(events.at(-1)).toEqual({ type: "finish", reason: "stop", native: "tool_use" })
    }
  })

  test("images go as bytes with their format; a link is refused before the call", async () => {
    const image = { type: "image" as const, url: "data:image/png;base64,iVBORw0KGgo=" }
    const request = textRequest("x", { input: [{ type: "message", role: "user", content: [{ type: "text", text: "what is it" }, image] }] })
    await eventsOf(await bedrockProvider.open(request, sigv4(), options(false)))
    expect(lastBody()["messages"]).toEqual([
      { role: "user", content: [{ text: "what is it" }, { image: { format: "png", source: { bytes: "iVBORw0KGgo=" } } }] },
    ])
    const linked = textRequest("x", { input: [{ type: "message", role: "user", content: [{ type: "image", url: "https://example.com/a.png" }] }] })
    const before = mock.requests.length
    const error = await providerErrorOf(bedrockProvider.open(linked, sigv4(), options(false)))
    expect(error.kind).toBe("bad_request")
    expect(mock.requests.length).toBe(before)
  })

  test("a tool round trip: the call and its result go back as toolUse and toolResult", async () => {
    const request = textRequest("x", {
      tools: [weatherTool],
      input: [
        { type: "message", role: "user", content: [{ type: "text", text: "weather?" }] },
        { type: "function_call", callId: "tooluse_1", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call_output", callId: "tooluse_1", output: "sunny" },
      ],
    })
    const events = await eventsOf(await bedrockProvider.open(request, sigv4({ "x-mock-scenario": "tool_call" }), options(false)))
    expect(lastBody()["messages"]).toEqual([
      { role: "user", content: [{ text: "weather?" }] },
      { role: "assistant", content: [{ toolUse: { toolUseId: "tooluse_1", name: "get_weather", input: { city: "Paris" } } }] },
      { role: "user", content: [{ toolResult: { toolUseId: "tooluse_1", content: [{ text: "sunny" }] } }] },
    ])
    expect(events[0]).toEqual({ type: "text", delta: "Echo: sunny" })
  })
})

describe("bedrock errors map to the contract's kinds", () => {
  const cases = [
    ["throttling", "rate_limited"],
    ["validation", "bad_request"],
    ["context", "context_length"],
    ["denied", "auth"],
    ["unavailable", "overloaded"],
    ["internal", "server"],
  ] as const
  for (const [error, kind] of cases) {
    test(`${error} → ${kind}`, async () => {
      const failure = await providerErrorOf(bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-error": error }), options(false)))
      expect(failure.kind).toBe(kind)
      if (kind === "rate_limited") expect(failure.retryAfterSeconds).toBe(3)
    })
  }
  test("a status without AWS's error type is read as every kind reads it: 504 a timeout, 529 overloaded, 424 the model's failure", () => {
    const kinds = [400, 413, 424, 429, 500, 503, 504, 529].map((status) => [status, bedrockErrorFromStatus(status, "<html>Gateway Timeout</html>", new Headers()).kind])
    expect(kinds).toEqual([
      [400, "bad_request"],
      [413, "bad_request"],
      [424, "server"],
      [429, "rate_limited"],
      [500, "server"],
      [503, "overloaded"],
      [504, "timeout"],
      [529, "overloaded"],
    ])
    // AWS's error type still decides over the status.
    expect(bedrockErrorFromStatus(400, "{}", new Headers({ "x-amzn-errortype": "ThrottlingException:http://internal" })).kind).toBe("rate_limited")
  })

  test("a stream answered with a JSON body (a proxy's error under a 200) is that error, not frames of a huge length", async () => {
    const proxy = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) =>
        Response.json(
          { message: "Rate exceeded" },
          { headers: req.headers.get("x-throttled") === "1" ? { "x-amzn-errortype": "ThrottlingException" } : {} },
        ),
    })
    try {
      const at = (headers: Record<string, string>) => ({ ...sigv4(headers), base_url: `http://127.0.0.1:${proxy.port}` })
      const plain = await providerErrorOf(bedrockProvider.open(textRequest("x"), at({}), options(true)))
      expect([plain.kind, plain.message]).toEqual(["server", "Rate exceeded"])
      expect((await providerErrorOf(bedrockProvider.open(textRequest("x"), at({ "x-throttled": "1" }), options(true)))).kind).toBe("rate_limited")
    } finally {
      await proxy.stop(true)
    }
  })

  test("an exception frame before anything of the answer fails open with its kind (before the first byte: failover)", async () => {
    const failure = await providerErrorOf(bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-error": "stream-first" }), options(true)))
    expect(failure.kind).toBe("overloaded")
  })
  test("an exception frame mid-stream fails the stream with its kind, after the deltas before it", async () => {
    const call = await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-error": "mid-stream", "x-mock-tokens": "5" }), options(true))
    const seen: Array<string> = []
    const failure = await providerErrorOf(
      (async () => {
        for await (const batch of call.events) for (const e of batch.flatMap(literalTexts)) seen.push(e.type)
      })(),
    )
    expect(failure.kind).toBe("rate_limited")
    expect(seen).toEqual(["text", "text"])
  })
})

/** A text event without its JSON literal (iteration's helper and the relay's read the literals apart). */
const withoutJson = (e: ProviderEvent): ProviderEvent => (e.type === "text" ? { type: "text", delta: e.delta } : e)

describe("a ConverseStream answer pushed from the read callback (no promise per batch, as the SSE formats)", () => {
  test("the call offers subscribe; its batches are the events iteration yields, then one end", async () => {
    const headers = { "x-mock-tokens": "6", "x-mock-split": "40" }
    const iterated = (await eventsOf(await bedrockProvider.open(textRequest("x"), sigv4(headers), options(true)))).flatMap(literalTexts).map(withoutJson)
    const call = await bedrockProvider.open(textRequest("x"), sigv4(headers), options(true))
    expect(call.subscribe).toBeDefined()
    const seen = consumed(call)
    await seen.settled
    expect(seen.events.map(withoutJson)).toEqual(iterated)
    expect(seen.events.filter((e) => e.type === "text")).toHaveLength(6)
    expect(seen.events.at(-1)).toEqual({ type: "finish", reason: "stop", native: "end_turn" })
    expect(seen.batches).toBeGreaterThan(1)
    expect(seen.ends).toBe(1)
    expect(seen.errors).toEqual([])
  })

  test("an exception frame mid-stream reaches error with its kind, after the deltas before it, and never end", async () => {
    const call = await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-error": "mid-stream", "x-mock-tokens": "5" }), options(true))
    const seen = consumed(call)
    await seen.settled
    expect(seen.events.map((e) => e.type)).toEqual(["text", "text"])
    expect(seen.ends).toBe(0)
    expect(seen.errors).toHaveLength(1)
    expect((seen.errors[0] as ProviderError).kind).toBe("rate_limited")
  })

  test("paused, no batch comes until resumed; resumed, the answer completes", async () => {
    // Pieces of 50 bytes a millisecond apart (~250 writes): the pause is taken between reads.
    const call = await bedrockProvider.open(textRequest("x"), sigv4({ "x-mock-tokens": "60", "x-mock-split": "50" }), options(true))
    const seen = consumed(call)
    expect(await eventually(() => seen.batches > 0, 2000)).toBe(true)
    seen.pause()
    // A read already under way may still be translated; after it, nothing.
    await Bun.sleep(30)
    const atPause = seen.batches
    await Bun.sleep(100)
    expect(seen.batches).toBe(atPause)
    expect(seen.ends).toBe(0)
    seen.resume()
    await seen.settled
    expect(seen.ends).toBe(1)
    expect(seen.events.filter((e) => e.type === "text")).toHaveLength(60)
  })
})
