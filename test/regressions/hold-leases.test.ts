/**
 * Regression: holds outlived a crash. After a SIGKILL with streams in flight, their
 * holds stayed (start-up released only holds older than the request deadline), so a key got 402
 * while `limit_remaining` showed room, until a restart long after. Holds now carry their owner
 * (instance id, boot id) and a lease the owner renews: a restarted instance releases its earlier
 * run's holds at start, and any process releases holds whose lease ran out.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Either, Layer, ManagedRuntime, Option } from "effect"
import { rmSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { ServicesLayer } from "../../src/app.js"
import { demoCatalog, GatewayConfig, testSettings } from "../../src/config/Config.js"
import { startServer } from "../../src/http/server.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Spend } from "../../src/services/Spend.js"
import { StoreLive } from "../../src/store/Store.js"
import { freshDatabase } from "../support/db.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { pennyCatalog } from "../support/catalog.js"

const PENNY = { model: "test/penny", input: "hi", max_output_tokens: 3 }

type Runtime = { readonly runPromise: <A, E>(effect: Effect.Effect<A, E, never>) => Promise<A> }
const run = <A, E>(rt: Runtime, effect: Effect.Effect<A, E, SqlClient.SqlClient | Spend | KeyStore>) =>
  rt.runPromise(effect as Effect.Effect<A, E, never>)

const makeKey = async (g: TestGateway, limit: number) =>
  (await (await g.fetch("/v1/keys", { method: "POST", json: { name: "leased", limit } })).json()) as { key: string; data: { hash: string } }

const ask = (url: string, key: string) =>
  fetch(`${url}/v1/responses`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify(PENNY) })

/** A hold as a process that is gone left it: `nano` held against the key, under the owner given. */
const leftHold = (hash: string, owner: { id: string; instance: string; boot: string; leaseUntil: number }, nano: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at, instance_id, boot_id, lease_until)
      SELECT ${owner.id}, hash, user_id, ${nano}, 0, ${new Date().toISOString()}, ${owner.instance}, ${owner.boot}, ${owner.leaseUntil}
      FROM api_keys WHERE hash = ${hash}`
    yield* sql`UPDATE api_keys SET reserved_nano = reserved_nano + ${nano} WHERE hash = ${hash}`
  })

const holdIds = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ id: string }>`SELECT id FROM reservations ORDER BY id`).pipe(
  Effect.map((rows) => rows.map((r) => r.id)),
)

const HOUR = 3_600_000

describe("a restarted instance", () => {
  test("releases at start the holds its crashed run left (lease still live), not another instance's; the key is admitted again", async () => {
    const db = await freshDatabase()
    const first = await startTestGateway({ databaseUrl: db.url, catalog: pennyCatalog, instanceId: "node-a" })
    let second: Awaited<ReturnType<typeof startServer>> | undefined
    try {
      const made = await makeKey(first, 0.05)
      await run(first.server.runtime, leftHold(made.data.hash, { id: "r-crashed-run", instance: "node-a", boot: "boot-before-crash", leaseUntil: Date.now() + HOUR }, 50_000_000))
      await run(first.server.runtime, leftHold(made.data.hash, { id: "r-other-instance", instance: "node-b", boot: "boot-b", leaseUntil: Date.now() + HOUR }, 0))
      const refused = await ask(first.url, made.key)
      await refused.text()
      expect(refused.status).toBe(402)
      await first.server.stop()
      // The same instance id again, a new run: no first key is created on this database.
      second = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, catalog: pennyCatalog, instanceId: "node-a" })))
      const admitted = await ask(second.url, made.key)
      await admitted.text()
      expect(admitted.status).toBe(200)
      await second.drain()
      expect(await run(second.runtime, holdIds)).toEqual(["r-other-instance"])
    } finally {
      await second?.stop()
      await db.drop()
    }
  }, 30_000)
})

describe("hold leases in a running process", () => {
  let gw: TestGateway & { stop: () => Promise<void> }
  beforeAll(async () => {
    // A 3 s lease: renewed and swept every second.
    gw = await startTestGateway({ catalog: pennyCatalog, instanceId: "node-c", holdLeaseMs: 3000 })
  }, 30_000)
  afterAll(async () => {
    await gw?.stop()
  })

  test("a hold whose owner stopped renewing its lease is released by the sweep; the request refused before is admitted", async () => {
    const made = await makeKey(gw, 0.05)
    await run(gw.server.runtime, leftHold(made.data.hash, { id: "r-dead-owner", instance: "node-dead", boot: "boot-dead", leaseUntil: Date.now() + HOUR }, 50_000_000))
    const refused = await ask(gw.url, made.key)
    await refused.text()
    expect(refused.status).toBe(402)
    // While its lease is live the hold stays; then its owner stops renewing: the lease runs out.
    expect(await run(gw.server.runtime, holdIds)).toContain("r-dead-owner")
    await run(gw.server.runtime, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE reservations SET lease_until = ${Date.now() - 1} WHERE id = 'r-dead-owner'`))
    let ids = await run(gw.server.runtime, holdIds)
    for (let i = 0; i < 300 && ids.includes("r-dead-owner"); i++) {
      await Bun.sleep(50)
      ids = await run(gw.server.runtime, holdIds)
    }
    expect(ids).not.toContain("r-dead-owner")
    const admitted = await ask(gw.url, made.key)
    await admitted.text()
    expect(admitted.status).toBe(200)
  }, 30_000)

  test("a live process renews all its holds at once (one lease) and another process's sweep leaves them", async () => {
    const made = await makeKey(gw, 1)
    const row = Option.getOrThrow(await run(gw.server.runtime, Effect.flatMap(KeyStore, (k) => k.cachedByHash(made.data.hash))))
    const reserve = () => run(gw.server.runtime, Effect.flatMap(Spend, (s) => s.reserve(row, 0.01, { isByok: false }))).then(Option.getOrThrow)
    const hold = await reserve()
    const sibling = await reserve()
    const leaseOf = () =>
      run(
        gw.server.runtime,
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ l: number }>`SELECT lease_until AS l FROM reservations WHERE id = ${hold.id}`),
      ).then((rows) => (rows[0] === undefined ? undefined : Number(rows[0].l)))
    // Its lease set back as if long ago: only the owner's renewal brings it forward again.
    await run(gw.server.runtime, Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE reservations SET lease_until = 1 WHERE ${sql.in("id", [hold.id, sibling.id])}`))
    let lease = await leaseOf()
    for (let i = 0; i < 300 && lease !== undefined && lease <= Date.now(); i++) {
      await Bun.sleep(20)
      lease = await leaseOf()
    }
    expect(lease).toBeGreaterThan(Date.now())
    // Renewed by one statement for all its holds: the same lease, to the millisecond.
    const both = await run(
      gw.server.runtime,
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ l: number }>`SELECT lease_until AS l FROM reservations WHERE ${sql.in("id", [hold.id, sibling.id])}`),
    )
    expect(new Set(both.map((r) => Number(r.l))).size).toBe(1)
    // Another process on the same database sweeps: the renewed hold is not its to release.
    const other = ManagedRuntime.make(
      ServicesLayer.pipe(
        Layer.provideMerge(StoreLive),
        Layer.provideMerge(GatewayConfig.layer(testSettings({ databaseUrl: gw.server.settings.databaseUrl, instanceId: "node-d", holdLeaseMs: 3000 }))),
      ),
    )
    try {
      const swept = await run(other, Effect.flatMap(Spend, (s) => s.sweepExpired))
      expect(swept).toBe(0)
      expect(await leaseOf()).toBeDefined()
    } finally {
      await other.dispose()
    }
    await run(gw.server.runtime, Effect.flatMap(Spend, (s) => Effect.zipRight(s.settle(hold, 0.01), s.settle(sibling, 0.01))))
    // Both held against the process's budget slice: its row goes once the slice, idle, is given back.
    let left = await leaseOf()
    for (let i = 0; i < 150 && left !== undefined; i++) {
      await Bun.sleep(20)
      left = await leaseOf()
    }
    expect(left).toBeUndefined()
  }, 30_000)
})

describe("configuration of hold leases", () => {
  const settingsFrom = async (env: Record<string, string>, file?: unknown) => {
    const vars = new Map(Object.entries(env))
    const path = join(tmpdir(), `gw-leases-${crypto.randomUUID()}.json`)
    if (file !== undefined) {
      await Bun.write(path, JSON.stringify(file))
      vars.set("GATEWAY_CONFIG", path)
    }
    try {
      return await Effect.runPromise(
        Effect.either(Effect.provide(GatewayConfig, GatewayConfig.fromEnv)).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(vars))),
      )
    } finally {
      rmSync(path, { force: true })
    }
  }
  const catalog = { providers: demoCatalog.providers, models: demoCatalog.models }

  test("the instance id is the host name by default, the file's instance_id, or GATEWAY_INSTANCE_ID over both; the lease 30 s or ledger.hold_lease_ms", async () => {
    const byDefault = Either.getOrThrow(await settingsFrom({}))
    expect([byDefault.instanceId, byDefault.holdLeaseMs]).toEqual([hostname(), 30_000])
    const fromFile = Either.getOrThrow(await settingsFrom({}, { ...catalog, instance_id: "edge-1", ledger: { hold_lease_ms: 9000 } }))
    expect([fromFile.instanceId, fromFile.holdLeaseMs]).toEqual(["edge-1", 9000])
    const fromEnv = Either.getOrThrow(await settingsFrom({ GATEWAY_INSTANCE_ID: "edge-2" }, { ...catalog, instance_id: "edge-1" }))
    expect(fromEnv.instanceId).toBe("edge-2")
  })

  test("a lease under 300 ms is refused at start, naming the key and the rule", async () => {
    const bad = await settingsFrom({}, { ...catalog, ledger: { hold_lease_ms: 10 } })
    expect(Either.isLeft(bad) ? String(bad.left.message) : "").toContain("ledger.hold_lease_ms")
    expect(Either.isLeft(bad) ? String(bad.left.message) : "").toContain("≥ 300")
  })
})
