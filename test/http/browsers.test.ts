/**
 * Browsers and proxies (docs/operations.md#browsers-cors, #compression): CORS on the data plane
 * and the read endpoints, the management endpoints only for origins listed by name, no credentials;
 * request bodies in gzip, br or zstd under the body limit counted decompressed; JSON answers
 * compressed for clients that accept it, never a stream.
 */
import { describe, expect, test } from "bun:test"
import { brotliCompressSync, gunzipSync, gzipSync, zstdCompressSync } from "node:zlib"
import { chooseCoding, MIN_COMPRESSED_BYTES } from "../../src/http/compress.js"
import { expectError, startTestGateway, useGateway } from "../support/gateway.js"

/** Room for a test that starts a gateway of its own (seconds on Postgres on a busy machine). */
const GATEWAY_START_MS = 30_000

const APP = "https://app.example.com"
const gw = useGateway()

const preflight = (url: string, path: string, method: string, origin = APP, headers = "authorization, content-type") =>
  fetch(`${url}${path}`, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers },
  })

describe("CORS with the default cors.allowed_origins (*)", () => {
  test("a preflight of POST /v1/responses is answered 204 with the origin, the method and the headers asked for", async () => {
    const res = await preflight(gw().url, "/v1/responses", "POST", APP, "authorization, content-type, x-stainless-os")
    expect(res.status).toBe(204)
    expect(res.headers.get("access-control-allow-origin")).toBe("*")
    expect(res.headers.get("access-control-allow-methods")).toContain("POST")
    expect(res.headers.get("access-control-allow-headers")).toBe("authorization, content-type, x-stainless-os")
    expect(res.headers.get("access-control-allow-credentials")).toBeNull()
  })

  test("every data-plane format and the read endpoints answer preflights", async () => {
    for (const [path, method] of [
      ["/v1/chat/completions", "POST"],
      ["/v1/messages", "POST"],
      ["/v1/models", "GET"],
      ["/v1/key", "GET"],
      ["/v1/generation", "GET"],
    ] as const) {
      const res = await preflight(gw().url, path, method)
      expect({ path, status: res.status, origin: res.headers.get("access-control-allow-origin") }).toEqual({ path, status: 204, origin: "*" })
    }
  })

  test("a browser's model request gets Access-Control-Allow-Origin and may read X-Generation-Id; never credentials", async () => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "from a browser" }, headers: { origin: APP } })
    expect(res.status).toBe(200)
    await res.text()
    expect(res.headers.get("access-control-allow-origin")).toBe("*")
    expect(res.headers.get("access-control-expose-headers")).toContain("x-generation-id")
    expect(res.headers.get("access-control-allow-credentials")).toBeNull()
    const stream = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "a stream", stream: true },
      headers: { origin: APP },
    })
    expect(stream.headers.get("access-control-allow-origin")).toBe("*")
    expect(await stream.text()).toEndWith("data: [DONE]\n\n")
    // Errors too, so a browser app can read the message.
    const refused = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo" }, headers: { origin: APP } })
    expect(refused.status).toBe(400)
    expect(refused.headers.get("access-control-allow-origin")).toBe("*")
  })

  test("the management endpoints are not open to any origin: preflight 403 naming the rule, no header on answers", async () => {
    const res = await preflight(gw().url, "/v1/keys", "POST")
    expect(await expectError(res, 403)).toContain("cors.allowed_origins")
    const list = await gw().fetch("/v1/keys", { headers: { origin: APP } })
    expect(list.status).toBe(200)
    expect(list.headers.get("access-control-allow-origin")).toBeNull()
  })

  test("a request without Origin gets no CORS header", async () => {
    const res = await gw().fetch("/v1/models")
    expect(res.headers.get("access-control-allow-origin")).toBeNull()
  })
})

describe("CORS with listed origins", () => {
  test("only listed origins are answered, by name (Vary: Origin), the management endpoints included", async () => {
    const g = await startTestGateway({ corsOrigins: [APP] })
    try {
      const open = await preflight(g.url, "/v1/responses", "POST")
      expect(open.headers.get("access-control-allow-origin")).toBe(APP)
      const keys = await preflight(g.url, "/v1/keys", "POST")
      expect(keys.status).toBe(204)
      expect(keys.headers.get("access-control-allow-origin")).toBe(APP)
      const answer = await g.fetch("/v1/keys", { headers: { origin: APP } })
      expect(answer.headers.get("access-control-allow-origin")).toBe(APP)
      expect(answer.headers.get("vary")).toContain("Origin")
      const other = await preflight(g.url, "/v1/responses", "POST", "https://evil.example")
      expect(await expectError(other, 403)).toContain("https://evil.example")
      const otherAnswer = await g.fetch("/v1/models", { headers: { origin: "https://evil.example" } })
      expect(otherAnswer.headers.get("access-control-allow-origin")).toBeNull()
    } finally {
      await g.stop()
    }
  }, GATEWAY_START_MS)
})

const BODY = JSON.stringify({ model: "demo/echo", input: "compressed hello" })

const postEncoded = (url: string, key: string, body: Uint8Array<ArrayBuffer>, encoding: string, path = "/v1/responses") =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-encoding": encoding },
    body,
  })

describe("compressed request bodies", () => {
  for (const [encoding, pack] of [
    ["gzip", (b: string) => gzipSync(b)],
    ["br", (b: string) => brotliCompressSync(b)],
    ["zstd", (b: string) => zstdCompressSync(b)],
  ] as const) {
    test(`Content-Encoding: ${encoding} is decompressed, not "Malformed JSON"`, async () => {
      const res = await postEncoded(gw().url, gw().adminKey, new Uint8Array(pack(BODY)), encoding)
      const body = (await res.json()) as { output?: Array<{ content?: Array<{ text?: string }> }> }
      expect(res.status).toBe(200)
      expect(body.output?.[0]?.content?.[0]?.text).toBe("Echo: compressed hello")
    })
  }

  test("the control plane takes a compressed body too", async () => {
    const res = await postEncoded(gw().url, gw().adminKey, new Uint8Array(gzipSync(JSON.stringify({ name: "zipped key" }))), "gzip", "/v1/keys")
    expect(res.status).toBe(201)
  })

  test("an unknown Content-Encoding is 415 naming the encoding", async () => {
    const message = await expectError(await postEncoded(gw().url, gw().adminKey, new TextEncoder().encode(BODY), "compress"), 415)
    expect(message).toContain("compress")
    expect(message).toContain("gzip")
  })

  test("a body that is not what its Content-Encoding says is 400, not 500", async () => {
    const message = await expectError(await postEncoded(gw().url, gw().adminKey, new TextEncoder().encode(BODY), "gzip"), 400)
    expect(message).toContain("gzip")
  })

  test("the body limit applies to the decompressed size: a 64 KB bomb of 64 MB is 413", async () => {
    const g = await startTestGateway({ maxBodyBytes: 1024 * 1024 })
    try {
      const bomb = gzipSync(new Uint8Array(64 * 1024 * 1024), { level: 9 })
      expect(bomb.byteLength).toBeLessThan(1024 * 1024)
      const message = await expectError(await postEncoded(g.url, g.adminKey, new Uint8Array(bomb), "gzip"), 413)
      expect(message).toContain("1048576")
      // The same bomb on the control plane.
      await expectError(await postEncoded(g.url, g.adminKey, new Uint8Array(bomb), "gzip", "/v1/keys"), 413)
    } finally {
      await g.stop()
    }
  }, GATEWAY_START_MS)
})

describe("compressed answers", () => {
  test("a JSON answer over 1 KB is compressed in the accepted coding, with Vary: Accept-Encoding", async () => {
    const res = await fetch(`${gw().url}/v1/models`, {
      headers: { authorization: `Bearer ${gw().adminKey}`, "accept-encoding": "gzip" },
      decompress: false,
    } as RequestInit)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-encoding")).toBe("gzip")
    expect(res.headers.get("vary")).toContain("Accept-Encoding")
    const raw = new Uint8Array(await res.arrayBuffer())
    const models = JSON.parse(new TextDecoder().decode(gunzipSync(raw))) as { data: Array<unknown> }
    expect(models.data.length).toBeGreaterThan(0)
    expect(raw.byteLength).toBeLessThan(JSON.stringify(models).length)
  })

  test("a model answer is compressed for an SDK that accepts it and reads back the same", async () => {
    const input = "long answer ".repeat(200)
    type Answer = { output: Array<{ content?: Array<{ text?: string }> }> }
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input }, headers: { "accept-encoding": "br, zstd" } })
    expect(res.headers.get("content-encoding")).toBe("zstd")
    // fetch decodes it: the whole answer.
    expect(((await res.json()) as Answer).output[0]?.content?.[0]?.text).toBe(`Echo: ${input}`)
  })

  test("a small answer, a client without Accept-Encoding and a stream are sent as they are", async () => {
    const small = await fetch(`${gw().url}/v1/health`, { headers: { "accept-encoding": "gzip" } })
    expect(small.headers.get("content-encoding")).toBeNull()
    const plain = await fetch(`${gw().url}/v1/models`, { headers: { authorization: `Bearer ${gw().adminKey}`, "accept-encoding": "identity" } })
    expect(plain.headers.get("content-encoding")).toBeNull()
    await plain.text()
    const stream = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "stream ".repeat(400), stream: true },
      headers: { "accept-encoding": "gzip" },
    })
    expect(stream.headers.get("content-type")).toContain("text/event-stream")
    expect(stream.headers.get("content-encoding")).toBeNull()
    expect(await stream.text()).toEndWith("data: [DONE]\n\n")
  })

  test("Accept-Encoding is read with its quality values", () => {
    expect(chooseCoding("gzip, deflate")).toBe("gzip")
    expect(chooseCoding("gzip, deflate, br, zstd")).toBe("zstd")
    expect(chooseCoding("gzip;q=1.0, br;q=0.5")).toBe("gzip")
    expect(chooseCoding("zstd;q=0, gzip")).toBe("gzip")
    expect(chooseCoding("identity")).toBeUndefined()
    expect(chooseCoding("*")).toBe("gzip")
    expect(MIN_COMPRESSED_BYTES).toBe(1024)
  })
})
