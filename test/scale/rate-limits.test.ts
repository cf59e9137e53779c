/**
 * Request rate limits per key: set through the API, shown by GET /v1/key, enforced before the
 * body is read (429 in the format's envelope with Retry-After and X-RateLimit-*, no upstream call),
 * GCRA's arithmetic, and the workspace default from the config.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { demoCatalog } from "../../src/config/Config.js"
import { blockSizeOf, gcra, LocalRateLimiter } from "../../src/routing/rate-limits.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { expectError, startTestGateway, type TestGateway } from "../support/gateway.js"

type Gateway = TestGateway & { stop: () => Promise<void> }

const createKey = async (gw: TestGateway, body: Record<string, unknown>) => {
  const res = await gw.fetch("/v1/keys", { method: "POST", json: { name: "rl", ...body } })
  const json = (await res.json()) as { key: string; data: { hash: string; rate_limit: unknown } }
  return { status: res.status, ...json }
}

const ask = (gw: TestGateway, key: string, path = "/v1/responses", body: unknown = { model: "demo/echo", input: "hi" }) =>
  gw.fetch(path, { method: "POST", key, json: body })

describe("GCRA: a burst of `requests`, then one per interval / requests", () => {
  test("ten of a burst of twenty pass, the eleventh after a tenth of the interval", () => {
    const rule = { requests: 10, intervalMs: 10_000 }
    const limiter = new LocalRateLimiter()
    const verdicts = Array.from({ length: 20 }, () => limiter.check("k", rule, 1_000_000))
    expect(verdicts.filter((v) => v.admitted).length).toBe(10)
    expect(verdicts[9]?.remaining).toBe(0)
    expect(verdicts[0]?.remaining).toBe(9)
    const refused = verdicts[10]!
    expect(refused.admitted).toBe(false)
    expect(refused.retryAfterMs).toBe(1_000)
    expect(limiter.check("k", rule, 1_000_999).admitted).toBe(false)
    expect(limiter.check("k", rule, 1_001_000).admitted).toBe(true)
  })

  test("an idle key regains its whole burst after the interval", () => {
    const rule = { requests: 3, intervalMs: 3_000 }
    let tat = 0
    for (let i = 0; i < 3; i++) tat = gcra(rule, tat, 0).nextTat
    expect(gcra(rule, tat, 0).admitted).toBe(false)
    const later = gcra(rule, tat, 3_000)
    expect(later.admitted).toBe(true)
    expect(later.remaining).toBe(2)
  })
})

describe("blocks taken from Redis at once", () => {
  test("a small limit is one request a call; a large one what its pace allows in the block's time, at most a quarter of it per process", () => {
    expect(blockSizeOf({ requests: 10, intervalMs: 10_000 }, 2, 1_000)).toBe(1)
    expect(blockSizeOf({ requests: 100, intervalMs: 1_000 }, 2, 1_000)).toBe(12)
    expect(blockSizeOf({ requests: 1_000_000, intervalMs: 3_600_000 }, 1, 1_000)).toBe(277)
    expect(blockSizeOf({ requests: 3, intervalMs: 1_000 }, 1, 1_000)).toBe(1)
  })
})

describe("rate_limit on keys", () => {
  let gw: Gateway
  beforeAll(async () => {
    gw = await startTestGateway()
  })
  afterAll(async () => {
    await gw.stop()
  })

  test("is stored at creation and shown by the key's views", async () => {
    const created = await createKey(gw, { rate_limit: { requests: 5, interval: "1m" } })
    expect(created.status).toBe(201)
    expect(created.data.rate_limit).toEqual({ requests: 5, interval: "1m" })
    const current = (await (await gw.fetch("/v1/key", { key: created.key })).json()) as { data: { rate_limit: unknown } }
    expect(current.data.rate_limit).toEqual({ requests: 5, interval: "1m", note: "The key's own rate limit." })
  })

  test("a key without one shows requests -1 (the shape the SDK requires)", async () => {
    const created = await createKey(gw, {})
    expect(created.data.rate_limit).toBeNull()
    const current = (await (await gw.fetch("/v1/key", { key: created.key })).json()) as { data: { rate_limit: { requests: number } } }
    expect(current.data.rate_limit.requests).toBe(-1)
  })

  test("PATCH sets and clears it", async () => {
    const created = await createKey(gw, {})
    const set = await gw.fetch(`/v1/keys/${created.data.hash}`, { method: "PATCH", json: { rate_limit: { requests: 2, interval: "10s" } } })
    expect(((await set.json()) as { data: { rate_limit: unknown } }).data.rate_limit).toEqual({ requests: 2, interval: "10s" })
    const cleared = await gw.fetch(`/v1/keys/${created.data.hash}`, { method: "PATCH", json: { rate_limit: null } })
    expect(((await cleared.json()) as { data: { rate_limit: unknown } }).data.rate_limit).toBeNull()
  })

  test("a bad interval is a 400 naming the field and the rule", async () => {
    const res = await gw.fetch("/v1/keys", { method: "POST", json: { name: "x", rate_limit: { requests: 5, interval: "5 minutes" } } })
    const message = await expectError(res, 400)
    expect(message).toContain("rate_limit")
    expect(message).toContain("interval")
    expect(message).toContain("from 1s to 1d")
  })

  test("requests of 0 is a 400", async () => {
    const res = await gw.fetch("/v1/keys", { method: "POST", json: { name: "x", rate_limit: { requests: 0, interval: "10s" } } })
    expect(await expectError(res, 400)).toContain("requests")
  })

  test("over the limit: 429 with Retry-After and X-RateLimit headers, in each format's envelope, no record", async () => {
    const created = await createKey(gw, { rate_limit: { requests: 3, interval: "1h" } })
    const answers = await Promise.all(Array.from({ length: 3 }, () => ask(gw, created.key)))
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200])
    const refused = await ask(gw, created.key)
    expect(refused.status).toBe(429)
    expect(refused.headers.get("x-ratelimit-limit")).toBe("3")
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1199)
    expect(Number(refused.headers.get("x-ratelimit-reset"))).toBeGreaterThan(Date.now())
    expect(await expectError(refused, 429)).toContain("3 requests per 1h")
    // The Messages format's own envelope.
    const messages = await gw.fetch("/v1/messages", {
      method: "POST",
      key: created.key,
      headers: { "anthropic-version": "2023-06-01" },
      json: { model: "demo/echo", max_tokens: 16, messages: [{ role: "user", content: "hi" }] },
    })
    expect(messages.status).toBe(429)
    expect(((await messages.json()) as { type: string; error: { type: string } }).error.type).toBe("rate_limit_error")
    // Refused requests made no generation: the key's three answers are all it has.
    const list = (await (await gw.fetch(`/v1/generations?api_key_hash=${created.data.hash}`)).json()) as { data?: Array<unknown> }
    if (Array.isArray(list.data)) expect(list.data.length).toBe(3)
  })
})

describe("a workspace's default rate limit from the config", () => {
  let gw: Gateway
  let db: TestDatabase
  beforeAll(async () => {
    // The workspace id is made at first start: read it, then start again on the same database with the default.
    db = await freshDatabase()
    const managementKey = Option.some(Redacted.make(`rl-admin-${crypto.randomUUID()}`))
    const first = await startTestGateway({ databaseUrl: db.url, managementKey })
    const current = (await (await first.fetch("/v1/key")).json()) as { data: { workspace_id: string } }
    await first.stop()
    gw = await startTestGateway({
      databaseUrl: db.url,
      managementKey,
      catalog: { ...demoCatalog, rate_limits: { workspaces: { [current.data.workspace_id]: { requests: 2, interval: "1h" } } } },
    })
  })
  afterAll(async () => {
    await gw.stop()
    await db.drop()
  })

  test("applies to keys of that workspace that set none of their own, and GET /v1/key says so", async () => {
    const created = await createKey(gw, {})
    const current = (await (await gw.fetch("/v1/key", { key: created.key })).json()) as { data: { rate_limit: unknown } }
    expect(current.data.rate_limit).toEqual({ requests: 2, interval: "1h", note: "The workspace's default rate limit (rate_limits in the config)." })
    const statuses = []
    for (let i = 0; i < 3; i++) statuses.push((await ask(gw, created.key)).status)
    expect(statuses).toEqual([200, 200, 429])
  })

  test("a key's own limit wins over the workspace's", async () => {
    const created = await createKey(gw, { rate_limit: { requests: 4, interval: "1h" } })
    const statuses = []
    for (let i = 0; i < 5; i++) statuses.push((await ask(gw, created.key)).status)
    expect(statuses).toEqual([200, 200, 200, 200, 429])
  })
})

describe("the CLI", () => {
  const root = `${import.meta.dir}/../..`
  const run = (db: string, ...args: Array<string>) =>
    Bun.spawnSync([process.execPath, `${root}/src/main.ts`, ...args], { env: { ...process.env, DATABASE_URL: db, GATEWAY_DATA_DIR: `${db}.d` } })

  test("keys create --rate-limit sets the key's limit; a bad one is refused naming the option", async () => {
    const db = await freshDatabase()
    try {
      const made = run(db.url, "keys", "create", "--name", "cli", "--rate-limit", "10/10s")
      expect(made.exitCode).toBe(0)
      expect(made.stdout.toString()).toContain("rate 10/10s")
      const bad = run(db.url, "keys", "create", "--name", "cli", "--rate-limit", "10/forever")
      expect(bad.exitCode).toBe(1)
      expect(bad.stderr.toString()).toContain("--rate-limit: must be REQUESTS/INTERVAL")
    } finally {
      await db.drop()
    }
  })
})


describe("blocks taken from Redis, kept per key", () => {
  test("a key that stopped sending holds no block: spent, expired blocks are swept as new ones are made", async () => {
    const { Effect, Layer } = await import("effect")
    const { RateLimits } = await import("../../src/services/RateLimits.js")
    const { SharedState } = await import("../../src/services/SharedState.js")
    const { GatewayConfig, testSettings } = await import("../../src/config/Config.js")
    // Redis as the script answers: every block asked for is granted (a large limit: blocks of many requests).
    const link = {
      connected: true,
      preload: () => undefined,
      evalScript: async (_script: string, _keys: Array<string>, args: Array<string>) => [Number(args[2]), Date.now(), Date.now()],
    }
    const shared = Layer.succeed(
      SharedState,
      SharedState.make({ link: link as never, subscriber: undefined, self: "test", peers: () => 1, status: () => ({ redis: "ok", outages: 0, lastError: undefined }) }),
    )
    const limits = await Effect.runPromise(
      RateLimits.pipe(Effect.provide(RateLimits.DefaultWithoutDependencies.pipe(Layer.provide(shared), Layer.provide(GatewayConfig.layer(testSettings({})))))),
    )
    const rule = { requests: 100_000, intervalMs: 60_000 }
    for (let i = 0; i < 1_000; i++) expect((await limits.check(`key-${i}`, rule)).admitted).toBe(true)
    expect(limits.blockCount()).toBe(1_000)
    // Their blocks expire (a block is admitted from for a second); the keys send nothing more.
    await Bun.sleep(1_100)
    for (let i = 1_000; i < 1_100; i++) await limits.check(`key-${i}`, rule)
    // The sweep ran when the 1,024th block was made: only blocks that can still answer are kept.
    expect(limits.blockCount()).toBe(100)
  })
})
