/**
 * Two gateways on one database sharing Redis: a session's requests alternating between them go to
 * one endpoint; an endpoint cooled down through one is tried last by the other; a key revoked
 * through one is refused by the other through a Redis notice (Postgres LISTEN is not opened when
 * Redis carries the notices; on SQLite there is no other way). The key cache's TTL is stretched to
 * ten minutes so only the notice can make the other refuse the key within the bound.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Layer, Option, Redacted } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { KeyCacheOptions } from "../../src/services/KeyStore.js"
import { endpointOf, fakeProviders, modelOf } from "../support/catalog.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { hasRedisServer, type OwnRedis, startOwnRedis } from "../support/redis.js"

const BOUND_MS = 1_000

const catalog: ConfigFile = {
  providers: fakeProviders("left", "right", "down", "up"),
  models: [
    modelOf("t/pair", endpointOf("left"), endpointOf("right")),
    // Cheaper, so tried first while it is well.
    modelOf("t/flaky", endpointOf("down", { upstream_model: "echo[fail:503]", pricing: { prompt: 0.1, completion: 0.1 } }), endpointOf("up")),
  ],
}

describe.skipIf(!hasRedisServer)("routing state and notices shared through Redis", () => {
  let redis: OwnRedis
  let db: TestDatabase
  let a: RunningServer
  let b: RunningServer
  const admin = `routing-admin-${crypto.randomUUID()}`

  const start = (url: string) =>
    startServer(
      Layer.merge(
        GatewayConfig.layer(
          testSettings({
            databaseUrl: url,
            catalog,
            managementKey: Option.some(Redacted.make(admin)),
            redis: { url: Redacted.make(redis.url), timeoutMs: 500 },
          }),
        ),
        Layer.succeed(KeyCacheOptions, { ttlMs: 600_000 }),
      ) as Layer.Layer<GatewayConfig>,
    )

  beforeAll(async () => {
    redis = await startOwnRedis()
    db = await freshDatabase()
    a = await start(db.url)
    b = await start(db.url)
  })
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await db?.drop()
    await redis?.stop()
  })

  const call = (server: RunningServer, path: string, init: { key?: string; method?: string; json?: unknown } = {}) =>
    fetch(`${server.url}${path}`, {
      method: init.method ?? "POST",
      headers: { authorization: `Bearer ${init.key ?? admin}`, "content-type": "application/json", "x-service-metadata": "enabled", connection: "close" },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    })
  const servedBy = async (server: RunningServer, json: Record<string, unknown>) => {
    const res = await call(server, "/v1/responses", { json: { input: "hello", ...json } })
    expect(res.status).toBe(200)
    const meta = ((await res.json()) as { service_metadata: { attempts: Array<{ provider: string }>; endpoints: { available: Array<{ provider: string; selected: boolean }> } } })
      .service_metadata
    return { provider: meta.endpoints.available.find((e) => e.selected)?.provider, first: meta.attempts[0]?.provider }
  }

  test("a session's requests alternating between the processes all go to one endpoint", async () => {
    // Six sessions: were the processes to choose alone, all six would agree by chance 1 time in 64.
    for (let s = 0; s < 6; s++) {
      const session = `chat-${s}-${crypto.randomUUID()}`
      const seen = new Set<string | undefined>()
      for (let i = 0; i < 6; i++) seen.add((await servedBy(i % 2 === 0 ? a : b, { model: "t/pair", session_id: session })).provider)
      expect(seen.size).toBe(1)
    }
  })

  // By price, not the default draw by 1/price² (which tries the dearer endpoint first once in ~100):
  // the order is then decided only by the cooldown this test is about.
  const FLAKY = { model: "t/flaky", provider: { sort: "price" } }

  test("an endpoint cooled down through one process is tried last by the other", async () => {
    // Before: the other process tries the cheap endpoint first.
    expect((await servedBy(b, FLAKY)).first).toBe("down")
    for (let i = 0; i < 3; i++) expect((await servedBy(a, FLAKY)).first).toBe("down")
    // Tripped in A (three failures): A tries "up" first now; B learns it without a failure of its own.
    expect((await servedBy(a, FLAKY)).first).toBe("up")
    const coolingIn = async (server: RunningServer) => {
      const res = await call(server, "/v1/models/t/flaky/endpoints", { method: "GET" })
      const body = (await res.json()) as { data: { endpoints: Array<{ provider_name: string; status: number }> } }
      return body.data.endpoints.find((e) => e.provider_name === "down")?.status === -2
    }
    expect(await coolingIn(a)).toBe(true)
    const started = performance.now()
    while (!(await coolingIn(b))) {
      if (performance.now() - started > BOUND_MS) throw new Error("the other process did not hear of the cooldown")
      await Bun.sleep(10)
    }
    expect((await servedBy(b, FLAKY)).first).toBe("up")
  })

  test("a key revoked through one process is refused by the other (a notice through Redis)", async () => {
    const created = (await (await call(a, "/v1/keys", { json: { name: "revoked" } })).json()) as { key: string; data: { hash: string } }
    const infer = () => call(b, "/v1/responses", { key: created.key, json: { model: "t/pair", input: "hi" } })
    expect((await infer()).status).toBe(200)
    const patched = await call(a, `/v1/keys/${created.data.hash}`, { method: "PATCH", json: { disabled: true } })
    expect(patched.status).toBe(200)
    const started = performance.now()
    for (;;) {
      const res = await infer()
      await res.arrayBuffer()
      if (res.status === 401) break
      expect(res.status).toBe(200)
      if (performance.now() - started > BOUND_MS) throw new Error(`still accepted after ${BOUND_MS} ms`)
      await Bun.sleep(5)
    }
  })
})
