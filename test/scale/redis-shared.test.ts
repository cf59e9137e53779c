/**
 * Two gateways on one database sharing Redis: a key's rate limit holds across both (at most the
 * limit plus one per process), and when Redis goes away mid-load no request fails: each process
 * falls back to its share, /v1/ready says "degraded", and sharing resumes once Redis is back.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { hasRedisServer, type OwnRedis, startOwnRedis } from "../support/redis.js"

/** Polls `ok` every 25 ms until it holds, or fails after `maxMs`. */
const poll = async (ok: () => Promise<boolean>, maxMs: number) => {
  const until = Date.now() + maxMs
  while (Date.now() < until) {
    if (await ok()) return
    await Bun.sleep(25)
  }
  throw new Error(`not within ${maxMs} ms`)
}

type Gateway = TestGateway & { stop: () => Promise<void> }

const ask = (gw: TestGateway, key: string) => gw.fetch("/v1/responses", { method: "POST", key, json: { model: "demo/echo", input: "hi" } })

describe.skipIf(!hasRedisServer)("shared state in Redis, two gateways", () => {
  let redis: OwnRedis
  let db: TestDatabase
  let a: Gateway
  let b: Gateway
  beforeAll(async () => {
    redis = await startOwnRedis()
    db = await freshDatabase()
    // A generous deadline: these tests are about the shared count; a loaded CI machine may take tens of ms a call.
    const shared = { url: Redacted.make(redis.url), timeoutMs: 500 }
    const managementKey = Option.some(Redacted.make(`shared-admin-${crypto.randomUUID()}`))
    a = await startTestGateway({ databaseUrl: db.url, redis: shared, managementKey })
    b = await startTestGateway({ databaseUrl: db.url, redis: shared, managementKey })
  })
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await db?.drop()
    await redis?.stop()
  })

  const keyWith = async (requests: number, interval: string) => {
    const res = await a.fetch("/v1/keys", { method: "POST", json: { name: "shared", rate_limit: { requests, interval } } })
    return ((await res.json()) as { key: string }).key
  }

  test("/v1/ready says the shared state is ok", async () => {
    const ready = (await (await a.fetch("/v1/ready")).json()) as { redis?: string }
    expect(ready.redis).toBe("ok")
  })

  test("10 requests per 10 s: of 20 sent across both at once, 10 to 12 are answered and the rest are 429", async () => {
    const key = await keyWith(10, "10s")
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(i % 2 === 0 ? a : b, key)))
    const ok = answers.filter((r) => r.status === 200).length
    const limited = answers.filter((r) => r.status === 429)
    expect(ok).toBeGreaterThanOrEqual(10)
    expect(ok).toBeLessThanOrEqual(12)
    expect(ok + limited.length).toBe(20)
    for (const r of limited) {
      expect(r.headers.get("x-ratelimit-limit")).toBe("10")
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    }
  })

  test("a high limit is taken from Redis in blocks: far fewer scripts than requests, never more answers than the limit", async () => {
    const scripts = async () => {
      const { RedisClient } = await import("bun")
      const client = new RedisClient(redis.url)
      await client.connect()
      const info = String(await client.send("INFO", ["commandstats"]))
      client.close()
      return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0)
    }
    // 40 per 10 s: blocks of min(4 a second's pace, 40 / (4 × 2 processes)) = 4.
    const key = await keyWith(40, "10s")
    const before = await scripts()
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => ask(i % 2 === 0 ? a : b, key)))
    const ok = answers.filter((r) => r.status === 200).length
    expect(ok).toBeGreaterThanOrEqual(4)
    // The burst is 40 (one more per process is the bound): requests taken and not used are lost to the key, never added.
    expect(ok).toBeLessThanOrEqual(42)
    expect(answers.filter((r) => r.status !== 200 && r.status !== 429)).toEqual([])
    const calls = (await scripts()) - before
    expect(calls).toBeLessThan(answers.length / 4)
  })

  test("Redis stopped mid-load: no request fails, /v1/ready is degraded; back, the count is shared again", async () => {
    const key = await keyWith(100_000, "1h")
    const load = async (until: () => boolean) => {
      const statuses: Array<number> = []
      while (!until()) {
        const batch = await Promise.all([ask(a, key), ask(b, key)])
        statuses.push(...batch.map((r) => r.status))
      }
      return statuses
    }
    let stop = false
    const running = load(() => stop)
    await Bun.sleep(100)
    await redis.stop()
    await poll(async () => ((await (await a.fetch("/v1/ready")).json()) as { redis?: string }).redis === "degraded", 5_000)
    await Bun.sleep(200)
    await redis.start()
    await poll(async () => ((await (await b.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
    await poll(async () => ((await (await a.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
    stop = true
    const statuses = await running
    expect(statuses.length).toBeGreaterThan(0)
    expect(statuses.filter((s) => s !== 200)).toEqual([])
    // Shared again: a fresh key's limit holds across both processes.
    const after = await keyWith(4, "1h")
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(i % 2 === 0 ? a : b, after)))
    const ok = answers.filter((r) => r.status === 200).length
    expect(ok).toBeGreaterThanOrEqual(4)
    expect(ok).toBeLessThanOrEqual(6)
  }, 30_000)

  test("a Redis that stops answering (frozen) costs each call its deadline, never an answer; it reads as degraded, and ok again once it answers", async () => {
    const key = await keyWith(1_000, "1h")
    redis.pause()
    try {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i % 2 === 0 ? a : b, key)))
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200))
      // Late answers in a row are an outage, as a closed connection is (it read "ok" throughout).
      for (const gw of [a, b]) expect(((await (await gw.fetch("/v1/ready")).json()) as { redis?: string }).redis).toBe("degraded")
    } finally {
      redis.resume()
    }
    await poll(async () => ((await (await a.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
    await poll(async () => ((await (await b.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
  }, 30_000)

  // Engine-independent and 40 s long: run once, on the SQLite pass of the suite.
  // The link reconnects on its own timer (Bun's client has autoReconnect off), its backoff doubling
  // from 100 ms to the 2 s cap within about 5 s (src/services/redis-link.ts): an 8 s outage has the
  // link retrying at the cap, as any longer one would.
  test.skipIf(engine === "postgres")("after an outage past the backoff's cap the link comes back by itself and the count is shared again", async () => {
    await redis.stop()
    const key = await keyWith(1_000, "1h")
    const until = Date.now() + 8_000
    const statuses: Array<number> = []
    while (Date.now() < until) {
      statuses.push(...(await Promise.all([ask(a, key), ask(b, key)])).map((r) => r.status))
      await Bun.sleep(500)
    }
    expect(statuses.filter((s) => s !== 200)).toEqual([])
    expect(((await (await a.fetch("/v1/ready")).json()) as { redis?: string }).redis).toBe("degraded")
    await redis.start()
    await poll(async () => ((await (await a.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
    await poll(async () => ((await (await b.fetch("/v1/ready")).json()) as { redis?: string }).redis === "ok", 10_000)
    const after = await keyWith(4, "1h")
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(i % 2 === 0 ? a : b, after)))
    const ok = answers.filter((r) => r.status === 200).length
    expect(ok).toBeGreaterThanOrEqual(4)
    expect(ok).toBeLessThanOrEqual(6)
  }, 60_000)
})

