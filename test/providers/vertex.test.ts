/**
 * The vertex adapter against the fake Vertex AI and token endpoint (scripts/mock-clouds.ts): the
 * service account's JWT (RS256, a key made here) exchanged for a token that is cached until
 * shortly before it expires, refreshed after, shared by concurrent calls and dropped when
 * refused; the URLs of Google's and Anthropic's models; their answers and errors.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { type MockClouds, startMockClouds } from "../../scripts/mock-clouds"
import { GoogleTokenSource, REFRESH_MARGIN_MS, readServiceAccountKey } from "../../src/providers/vertex/credentials"
import { vertexBaseUrl, vertexProvider, vertexUrl } from "../../src/providers/vertex/adapter"
import type { NormalizedRequest, ProviderConfig, ProviderEvent } from "../../src/providers/types"
import { eventsOf, providerErrorOf, textRequest, usage } from "./helpers"
import { makeServiceAccount, newKeyPair, pemOf, SERVICE_ACCOUNT_EMAIL, type ServiceAccount } from "./service-account"

let clouds: MockClouds
let account: ServiceAccount
let privatePem: string
let keyFile: string
let strangerFile: string
let dir: string
const EMAIL = SERVICE_ACCOUNT_EMAIL

beforeAll(async () => {
  account = await makeServiceAccount()
  ;({ dir, privatePem, file: keyFile } = account)
  const stranger = await newKeyPair()
  strangerFile = join(dir, "stranger.json")
  writeFileSync(strangerFile, JSON.stringify({ type: "service_account", client_email: EMAIL, private_key: await pemOf(stranger.privateKey) }))
  clouds = await startMockClouds({ publicKey: account.publicKey })
  // Two RSA keys are made: slow on a loaded machine.
}, 30_000)
afterAll(async () => {
  await clouds.stop()
})
beforeEach(() => {
  clouds.reset()
  clouds.tokenLifetimeSeconds = 3600
})

let configs = 0
/** A config of its own per test: token sources are kept per provider id and key file. */
const configOf = (overrides: Partial<ProviderConfig> = {}, headers: Record<string, string> = {}): ProviderConfig => ({
  id: `vtx-${++configs}`,
  kind: "vertex",
  base_url: `${clouds.url}/v1`,
  project: "proj",
  location: "us-central1",
  credentials_file: keyFile,
  token_url: `${clouds.url}/token`,
  headers,
  ...overrides,
})

const open = (config: ProviderConfig, stream: boolean, request: NormalizedRequest = textRequest("hello", { model: "gemini-test" })) =>
  vertexProvider.open(request, config, { stream, signal: new AbortController().signal })

const tok = (n: number): Array<ProviderEvent> => Array.from({ length: n }, () => ({ type: "text", delta: "tok " }))

describe("vertex token exchange", () => {
  const sourceAt = (clock: { now: number }, file = keyFile) => new GoogleTokenSource(readServiceAccountKey(file, "vtx"), `${clouds.url}/token`, "vtx", { now: () => clock.now })

  test("the JWT is signed RS256 with the account's key and names the account, the scope and the token endpoint", async () => {
    const clock = { now: 1_700_000_000_000 }
    expect(await sourceAt(clock).authorization()).toBe("Bearer ya29.mock-1")
    const exchange = clouds.exchanges[0]
    expect(exchange?.header).toEqual({ alg: "RS256", typ: "JWT", kid: "kid-1" })
    expect(exchange?.claims).toEqual({
      iss: EMAIL,
      scope: "https://www.googleapis.com/auth/cloud-platform",
      aud: `${clouds.url}/token`,
      iat: 1_700_000_000,
      exp: 1_700_003_600,
    })
  })

  test("the token is kept until the margin before its expiry, then exchanged again", async () => {
    const clock = { now: 1_700_000_000_000 }
    const source = sourceAt(clock)
    expect(await source.authorization()).toBe("Bearer ya29.mock-1")
    clock.now += 3600_000 - REFRESH_MARGIN_MS - 1
    expect(await source.authorization()).toBe("Bearer ya29.mock-1")
    expect(clouds.exchanges).toHaveLength(1)
    clock.now += 1
    expect(await source.authorization()).toBe("Bearer ya29.mock-2")
    expect(clouds.exchanges).toHaveLength(2)
  })

  test("calls waiting for a token share one exchange", async () => {
    const source = sourceAt({ now: Date.now() })
    const tokens = await Promise.all([source.authorization(), source.authorization(), source.authorization()])
    expect(new Set(tokens).size).toBe(1)
    expect(clouds.exchanges).toHaveLength(1)
  })

  test("a dropped token is exchanged again on the next call", async () => {
    const source = sourceAt({ now: Date.now() })
    await source.authorization()
    source.invalidate()
    expect(await source.authorization()).toBe("Bearer ya29.mock-2")
  })

  test("a refused assertion is an auth failure that shows neither the key nor the assertion", async () => {
    const failure = await providerErrorOf(sourceAt({ now: Date.now() }, strangerFile).authorization())
    expect(failure.kind).toBe("auth")
    expect(failure.message).toBe("vertex provider vtx: the token endpoint answered 400 (invalid_grant: Invalid JWT Signature.)")
  })

  test("a token endpoint that cannot be reached is a connection failure (another endpoint may serve)", async () => {
    const source = new GoogleTokenSource(readServiceAccountKey(keyFile, "vtx"), "http://127.0.0.1:1/token", "vtx")
    expect((await providerErrorOf(source.authorization())).kind).toBe("connection")
  })

  test("a token that cannot be a bearer token (a line break, empty), or a 200 that is no token, is a failure of the endpoint, not kept: the next call exchanges again", async () => {
    const answers = ["ya29.BAD\r\nx-evil: 1", "", "<html>", "ya29.good-1"]
    const exchanges: Array<string> = []
    const server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => {
        const token = answers[exchanges.length] ?? "ya29.more"
        exchanges.push(token)
        // A proxy's page under a 200 is no token answer at all.
        if (token === "<html>") return new Response("<html>Sign in</html>", { headers: { "content-type": "text/html" } })
        return Response.json({ access_token: token, expires_in: 3600 })
      },
    })
    try {
      const source = new GoogleTokenSource(readServiceAccountKey(keyFile, "vtx"), `http://127.0.0.1:${server.port}/token`, "vtx")
      for (let i = 0; i < 2; i++) {
        const failure = await providerErrorOf(source.authorization())
        expect([failure.kind, failure.message]).toEqual(["connection", "vertex provider vtx: the token endpoint answered an access_token that is not a bearer token"])
      }
      expect((await providerErrorOf(source.authorization())).kind).toBe("connection")
      expect(await source.authorization()).toBe("Bearer ya29.good-1")
      expect(await source.authorization()).toBe("Bearer ya29.good-1")
      expect(exchanges).toHaveLength(4)
    } finally {
      await server.stop(true)
    }
  })

  test("a key file that is not a service-account key is named, its content is not", () => {
    const bad = join(dir, "bad.json")
    writeFileSync(bad, JSON.stringify({ client_email: EMAIL, secret: privatePem }))
    expect(() => readServiceAccountKey(bad, "vtx")).toThrow(`vertex provider vtx: the credentials file ${bad} is not a service-account key (private_key: is missing)`)
    const garbled = join(dir, "garbled.json")
    writeFileSync(garbled, `{${privatePem}`)
    expect(() => readServiceAccountKey(garbled, "vtx")).toThrow(`vertex provider vtx: the credentials file ${garbled} is not JSON`)
    expect(() => readServiceAccountKey(join(dir, "absent.json"), "vtx")).toThrow("(ENOENT)")
  })
})

describe("vertex URLs", () => {
  test("a region is in the host; location global has no region prefix", () => {
    expect(vertexBaseUrl({ id: "v", kind: "vertex", project: "p", location: "europe-west4" })).toBe("https://europe-west4-aiplatform.googleapis.com/v1")
    expect(vertexUrl({ id: "v", kind: "vertex", project: "p", location: "global" }, "google", "gemini-2.5-pro", "generateContent")).toBe(
      "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-pro:generateContent",
    )
  })
})

describe("vertex: Google's models", () => {
  test("a JSON call: the model's generateContent under the project and location, with the exchanged bearer token", async () => {
    expect(await eventsOf(await open(configOf(), false))).toEqual([{ type: "text", delta: "tok tok tok tok tok " }, usage(10, 5), { type: "finish", reason: "stop", native: "STOP" }])
    const sent = clouds.requests[0]
    expect(sent?.path).toBe("/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-test:generateContent")
    expect(sent?.headers["authorization"]).toBe("Bearer ya29.mock-1")
  })

  test("a stream: streamGenerateContent?alt=sse, one delta per chunk", async () => {
    expect(await eventsOf(await open(configOf(), true))).toEqual([...tok(5), usage(10, 5), { type: "finish", reason: "stop", native: "STOP" }])
    expect(clouds.requests[0]?.path).toBe("/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-test:streamGenerateContent?alt=sse")
  })

  test("calls reuse the token; one that lives less than the margin is exchanged for each call", async () => {
    const config = configOf()
    await eventsOf(await open(config, false))
    await eventsOf(await open(config, true))
    expect(clouds.exchanges).toHaveLength(1)
    const shortLived = configOf()
    clouds.tokenLifetimeSeconds = REFRESH_MARGIN_MS / 1000 - 1
    await eventsOf(await open(shortLived, false))
    await eventsOf(await open(shortLived, false))
    expect(clouds.exchanges).toHaveLength(3)
    expect(clouds.requests.map((r) => r.headers["authorization"])).toEqual(["Bearer ya29.mock-1", "Bearer ya29.mock-1", "Bearer ya29.mock-2", "Bearer ya29.mock-3"])
  })

  test("a token Vertex refuses (401) is an auth failure, and the next call exchanges a new one", async () => {
    const config = configOf()
    await eventsOf(await open(config, false))
    clouds.tokens.clear()
    expect((await providerErrorOf(open(config, false))).kind).toBe("auth")
    expect(await eventsOf(await open(config, false))).toHaveLength(3)
    expect(clouds.exchanges).toHaveLength(2)
  })

  test("a caller gone while its token was exchanged makes no call (the token is kept for the next)", async () => {
    const config = configOf()
    const controller = new AbortController()
    const opening = vertexProvider.open(textRequest("hello", { model: "gemini-test" }), config, { stream: false, signal: controller.signal })
    controller.abort()
    expect((await providerErrorOf(opening)).kind).toBe("connection")
    expect(clouds.requests).toHaveLength(0)
    await eventsOf(await open(config, false))
    expect(clouds.exchanges).toHaveLength(1)
  })

  test("without credentials_file the key file is GOOGLE_APPLICATION_CREDENTIALS's", async () => {
    const before = process.env["GOOGLE_APPLICATION_CREDENTIALS"]
    process.env["GOOGLE_APPLICATION_CREDENTIALS"] = keyFile
    try {
      const { credentials_file: _file, ...config } = configOf()
      expect(await eventsOf(await open(config, false))).toHaveLength(3)
    } finally {
      if (before === undefined) delete process.env["GOOGLE_APPLICATION_CREDENTIALS"]
      else process.env["GOOGLE_APPLICATION_CREDENTIALS"] = before
    }
  })

  test("no credentials at all: an auth failure naming both ways to give them", async () => {
    const before = process.env["GOOGLE_APPLICATION_CREDENTIALS"]
    delete process.env["GOOGLE_APPLICATION_CREDENTIALS"]
    try {
      const { credentials_file: _file, ...config } = configOf()
      const failure = await providerErrorOf(open(config, false))
      expect(failure.kind).toBe("auth")
      expect(failure.message).toContain("set credentials_file, or GOOGLE_APPLICATION_CREDENTIALS")
    } finally {
      if (before !== undefined) process.env["GOOGLE_APPLICATION_CREDENTIALS"] = before
    }
  })

  test("errors: quota (429, the wait from RetryInfo), overloaded (503), bad request (400)", async () => {
    const config = configOf()
    const rate = await providerErrorOf(open(configOf({}, { "x-mock-error": "429" }), false))
    expect([rate.kind, rate.retryAfterSeconds]).toEqual(["rate_limited", 7])
    expect((await providerErrorOf(open({ ...config, headers: { "x-mock-error": "503" } }, true))).kind).toBe("overloaded")
    expect((await providerErrorOf(open({ ...config, headers: { "x-mock-error": "400" } }, false))).kind).toBe("bad_request")
  })
})

describe("vertex: Anthropic's models (publisher anthropic)", () => {
  const claude = () => configOf({ publisher: "anthropic" })
  const request = textRequest("hello", { model: "claude-sonnet-4@20250514" })

  test("a JSON call: rawPredict, the version in the body and the model only in the URL", async () => {
    expect(await eventsOf(await open(claude(), false, request))).toEqual([{ type: "text", delta: "tok tok tok tok tok " }, usage(10, 5), { type: "finish", reason: "stop", native: "end_turn" }])
    const sent = clouds.requests[0]
    expect(sent?.path).toBe("/v1/projects/proj/locations/us-central1/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict")
    expect(sent?.body).toMatchObject({ anthropic_version: "vertex-2023-10-16", stream: false, messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }] })
    expect(sent?.body).not.toHaveProperty("model")
  })

  test("a stream: streamRawPredict, Anthropic's events", async () => {
    expect(await eventsOf(await open(claude(), true, request))).toEqual([...tok(5), usage(10, 5), { type: "finish", reason: "stop", native: "end_turn" }])
    expect(clouds.requests[0]?.path).toEndWith(":streamRawPredict")
  })

  test("Anthropic's errors through Vertex keep their kinds", async () => {
    const config = configOf({ publisher: "anthropic" }, { "x-mock-error": "overloaded" })
    expect((await providerErrorOf(open(config, false, request))).kind).toBe("overloaded")
    const limited = await providerErrorOf(open({ ...config, headers: { "x-mock-error": "429" } }, true, request))
    expect([limited.kind, limited.retryAfterSeconds]).toEqual(["rate_limited", 1])
  })
})
