/**
 * The connection and upstream limits (docs/operations.md) from the config file's `server` object and
 * from env (env wins), with their defaults; and GATEWAY_MANAGEMENT_KEY must be a key's shape, since
 * a key of another shape is refused without a store lookup.
 */
import { describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import { DEFAULT_LIMITS, demoCatalog, GatewayConfig, parseConfigFile, type Settings } from "../../src/config/Config.js"
import { keyShaped } from "../../src/domain/keys.js"

const load = (env: Record<string, string>): Promise<Either.Either<Settings, unknown>> =>
  Effect.runPromise(
    Effect.either(
      Effect.provide(GatewayConfig, GatewayConfig.fromEnv).pipe(
        Effect.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
      ),
    ),
  )

describe("connection and upstream limits", () => {
  test("default to idle 30 s, body 10 s, 10,000 in flight, 1,000 per address, 32 MB bodies, 1 MB events", async () => {
    const settings = Either.getOrThrow(await load({}))
    expect({
      idle: settings.idleTimeoutS,
      body: settings.bodyTimeoutMs,
      inFlight: settings.maxInFlight,
      perIp: settings.maxInFlightPerIp,
      upstreamBody: settings.maxUpstreamBodyBytes,
      upstreamEvent: settings.maxUpstreamEventBytes,
    }).toEqual({ idle: 30, body: 10_000, inFlight: 10_000, perIp: 1_000, upstreamBody: 32 * 1024 * 1024, upstreamEvent: 1024 * 1024 })
    expect(DEFAULT_LIMITS.idleTimeoutS).toBe(30)
  })

  test("come from the config file's server object, and env overrides it", async () => {
    const file = {
      ...demoCatalog,
      server: { idle_timeout_s: 5, body_timeout_ms: 2000, max_in_flight: 50, max_in_flight_per_ip: 5, max_upstream_body_bytes: 1000, max_upstream_event_bytes: 100 },
    }
    const path = `${process.env.TMPDIR ?? "/tmp"}/gw-limits-${crypto.randomUUID()}.json`
    await Bun.write(path, JSON.stringify(file))
    const fromFile = Either.getOrThrow(await load({ GATEWAY_CONFIG: path }))
    expect([fromFile.idleTimeoutS, fromFile.bodyTimeoutMs, fromFile.maxInFlight, fromFile.maxInFlightPerIp]).toEqual([5, 2000, 50, 5])
    expect([fromFile.maxUpstreamBodyBytes, fromFile.maxUpstreamEventBytes]).toEqual([1000, 100])
    const fromEnv = Either.getOrThrow(
      await load({
        GATEWAY_CONFIG: path,
        GATEWAY_IDLE_TIMEOUT_S: "0",
        GATEWAY_BODY_TIMEOUT_MS: "3000",
        GATEWAY_MAX_IN_FLIGHT: "60",
        GATEWAY_MAX_IN_FLIGHT_PER_IP: "6",
      }),
    )
    expect([fromEnv.idleTimeoutS, fromEnv.bodyTimeoutMs, fromEnv.maxInFlight, fromEnv.maxInFlightPerIp]).toEqual([0, 3000, 60, 6])
  })

  test("out of range values are refused, naming the field and the rule", async () => {
    expect(String((await load({ GATEWAY_IDLE_TIMEOUT_S: "256" })).pipe(Either.flip, Either.getOrThrow))).toContain("GATEWAY_IDLE_TIMEOUT_S")
    expect(String((await load({ GATEWAY_MAX_IN_FLIGHT: "0" })).pipe(Either.flip, Either.getOrThrow))).toContain("must be a positive integer")
    const bad = parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], server: { idle_timeout_s: 300 } }))
    expect(Either.isLeft(bad) && bad.left.message).toContain("server.idle_timeout_s")
  })
})

describe("prices", () => {
  test("a price past 100,000 USD (or not finite: 1e309 parses to Infinity) is refused, naming it; the dearest real ones pass", () => {
    const withPricing = (pricing: Record<string, number>) =>
      JSON.stringify({ providers: [{ id: "p", kind: "openai-chat", base_url: "http://127.0.0.1:1/v1" }], models: [{ id: "v/m", context_length: 1000, endpoints: [{ provider: "p", upstream_model: "m", pricing }] }] })
    const problem = (text: string) => {
      const parsed = parseConfigFile("c.json", text)
      return Either.isLeft(parsed) ? parsed.left.message : undefined
    }
    expect(problem(withPricing({ prompt: 1e308, completion: 1 }))).toContain("models[0].endpoints[0].pricing.prompt: must be at most 100000 (USD)")
    expect(problem(withPricing({ prompt: 1, completion: 1, request: 1e15 }))).toContain("pricing.request: must be at most 100000 (USD)")
    expect(problem(withPricing({ prompt: 1, completion: 1 }).replace('"completion":1', '"completion":1e309'))).toContain("pricing.completion")
    expect(problem(withPricing({ prompt: 150, completion: 600, request: 0.01 }))).toBeUndefined()
  })
})

describe("key shape", () => {
  test("generated secrets and custom ones of visible ASCII fit; anything else does not", () => {
    expect(keyShaped(`sk-gw-v1-${"ab".repeat(32)}`)).toBe(true)
    expect(keyShaped("sk-test-binary-0123456789abcdef")).toBe(true)
    expect(keyShaped(`sk-gw-v1-${"ab".repeat(31)}`)).toBe(false)
    expect(keyShaped(`sk-gw-v1-${"AB".repeat(32)}`)).toBe(false)
    expect(keyShaped("x".repeat(257))).toBe(false)
    expect(keyShaped("clé")).toBe(false)
  })

  test("GATEWAY_MANAGEMENT_KEY of another shape stops start-up with the rule", async () => {
    const result = await load({ GATEWAY_MANAGEMENT_KEY: "sk-gw-v1-short" })
    expect(Either.isLeft(result)).toBe(true)
    expect(String(Either.isLeft(result) ? result.left : "")).toContain("GATEWAY_MANAGEMENT_KEY")
    expect(Either.isRight(await load({ GATEWAY_MANAGEMENT_KEY: "my-admin-secret" }))).toBe(true)
  })
})

describe("the size of a broadcast send", () => {
  test("broadcast.batch_max_bytes: 1,000,000 by default, set in the file, refused out of range naming the key", async () => {
    expect(Either.getOrThrow(await load({})).broadcast.batchMaxBytes).toBe(1_000_000)
    const path = `${process.env.TMPDIR ?? "/tmp"}/gw-broadcast-${crypto.randomUUID()}.json`
    await Bun.write(path, JSON.stringify({ ...demoCatalog, broadcast: { batch_max_bytes: 50_000 } }))
    expect(Either.getOrThrow(await load({ GATEWAY_CONFIG: path })).broadcast.batchMaxBytes).toBe(50_000)
    const bad = parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], broadcast: { batch_max_bytes: 100 } }))
    expect(Either.isLeft(bad) && bad.left.message).toContain("broadcast.batch_max_bytes")
    expect(Either.isLeft(bad) && bad.left.message).toContain("from 10000 to 100000000")
  })
})
