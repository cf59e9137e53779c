/**
 * Durable delivery: retries after a 500 and after a receiver that is down, a dead
 * row after the last attempt (and redelivery), rows written before a restart delivered after it,
 * two gateways on one database delivering every row, the cap per destination, retention, and
 * the safe fetcher refusing a loopback destination unless private addresses are allowed.
 */
import { describe, expect, test as bunTest } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Broadcast } from "../../src/broadcast/Broadcast.js"
import { type DeliveryPayload, packJson, unpackJson } from "../../src/broadcast/payload.js"
import { type BroadcastSettings, TEST_BROADCAST, GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { Notifications } from "../../src/services/Notifications.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { startTestGateway, type TestGateway, TEST_METRICS_TOKEN } from "../support/gateway.js"
import { deliveryPayload } from "../support/generations.js"
import { ask, attr, createDestination, rootsBy, setBroadcast, spansIn, startReceiver, TIMEOUT_MS, test, useCleanups, waitFor } from "./support.js"

const fast = (over: Partial<BroadcastSettings> = {}): BroadcastSettings => ({
  ...TEST_BROADCAST,
  pollMs: 50,
  retryBaseMs: 100,
  timeoutMs: 2_000,
  ...over,
})

/** A request through a second gateway process (`startServer`, no test client) with `key`: its generation id. */
const askThrough = (server: RunningServer, key: string, input: string) =>
  fetch(`${server.url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "demo/free", input }),
  }).then(async (res) => {
    await res.text()
    return res.headers.get("x-generation-id") as string
  })

const cleanups = useCleanups()

const gateway = async (overrides: Partial<Settings>) => {
  const gw = await startTestGateway({ allowPrivateAddresses: true, broadcast: fast(), ...overrides })
  cleanups.push(() => gw.stop())
  await setBroadcast(gw, true)
  return gw
}

/**
 * A port nothing listens on, below the ephemeral range (Linux: from 32768) that a server asking for
 * port 0 is given: a gateway or receiver started later in the test cannot take it meanwhile.
 */
const closedPort = (): number => {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    try {
      startReceiver(port).stop()
      return port
    } catch {
      // Taken: another.
    }
  }
}

type Delivery = { pending: number; dead: number; last_error: string | null; last_success_at: string | null }
/**
 * An outbox batch of whole `payloads` for one destination, named after the first, written with its
 * delivery row as the commit writes them; `store` gives the items' text (plain JSON, or packed).
 */
const writeBatch = (gw: TestGateway, destinationId: string, payloads: ReadonlyArray<DeliveryPayload>, store: (json: string) => string) => {
  const batchId = payloads[0]?.id ?? ""
  const items = store(JSON.stringify({ destinations: [destinationId], generations: payloads.map((payload) => ({ payload, to: [0] })) }))
  return gw.server.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all([
        sql`INSERT INTO broadcast_batches (id, created_at, items) VALUES (${batchId}, ${Date.now()}, ${items})`,
        sql`INSERT INTO broadcast_deliveries (batch_id, destination_id, generations, created_at, next_attempt_at)
          VALUES (${batchId}, ${destinationId}, ${payloads.length}, ${Date.now()}, ${Date.now()})`,
      ]),
    ),
  )
}

const deliveryOf = async (gw: TestGateway, id: string): Promise<Delivery> =>
  ((await (await gw.fetch(`/v1/observability/destinations/${id}`)).json()) as { data: { delivery: Delivery } }).data.delivery

const rowCount = (gw: TestGateway, state: string) =>
  gw.server.runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ n: number }>`SELECT COUNT(*) AS n FROM broadcast_deliveries WHERE state = ${state}`.pipe(Effect.map((r) => Number(r[0]?.n ?? 0))),
    ),
  )

describe("retries", () => {
  test("after a 500 (with Retry-After) the same trace is sent again and delivered", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({})
    receiver.respond(500, "0")
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const generation = await ask(gw, { input: "retry me" })
    await waitFor(() => rootsBy(receiver.received).has(generation))
    await waitFor(async () => (await deliveryOf(gw, id)).last_error !== null)
    expect((await deliveryOf(gw, id)).last_error).toContain("HTTP 500")
    receiver.respond(200)
    await waitFor(async () => (await deliveryOf(gw, id)).last_success_at !== null, 10_000, "the retry's success")
    const traces = receiver.received.flatMap((r) => spansIn(r.body)).filter((s) => attr(s, "gen_ai.response.id") === generation && attr(s, "gateway.attempt.index") === undefined)
    expect(traces.length).toBeGreaterThanOrEqual(2)
    expect(new Set(traces.map((s) => `${s.traceId}/${s.spanId}`)).size).toBe(1)
    expect((await deliveryOf(gw, id)).pending).toBe(0)
  })

  test("a receiver that is down gets the row once it is up", async () => {
    const port = closedPort()
    const gw = await gateway({})
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: `http://127.0.0.1:${port}` } })
    const generation = await ask(gw, { input: "wait for me" })
    await waitFor(async () => (await deliveryOf(gw, id)).last_error !== null)
    expect((await deliveryOf(gw, id)).last_error).toContain("connection failed")
    const receiver = startReceiver(port)
    cleanups.push(receiver.stop)
    await waitFor(() => rootsBy(receiver.received).has(generation), 15_000, "delivery once the receiver is up")
  })

  test("dead after the last attempt, with the last error; redeliver sends it again", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    receiver.respond(503)
    const gw = await gateway({ broadcast: fast({ maxAttempts: 2, retryBaseMs: 50 }) })
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const generation = await ask(gw, { input: "doomed" })
    await waitFor(async () => (await deliveryOf(gw, id)).dead === 1, 10_000, "a dead row")
    const status = await deliveryOf(gw, id)
    expect(status.pending).toBe(0)
    expect(status.last_error).toContain("HTTP 503")
    expect(receiver.received.length).toBe(2)
    const metrics = await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="otel-collector",outcome="dead"\} 1/)
    receiver.respond(200)
    const res = await gw.fetch(`/v1/observability/destinations/${id}/redeliver`, { method: "POST" })
    expect(await res.json()).toEqual({ data: { requeued: 1 } })
    await waitFor(async () => (await deliveryOf(gw, id)).last_success_at !== null, 10_000, "the redelivery")
    expect((await deliveryOf(gw, id)).dead).toBe(0)
    expect(rootsBy(receiver.received.slice(2)).has(generation)).toBe(true)
  })

  test("a kind without delivery: its rows are dead with the reason", async () => {
    const gw = await gateway({})
    const id = await createDestination(gw, { name: "r", type: "ramp", config: { apiKey: "ramp-key-0123456789" } })
    await ask(gw, { input: "nowhere" })
    await waitFor(async () => (await deliveryOf(gw, id)).dead === 1)
    const rows = await gw.server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ last_error: string }>`SELECT last_error FROM broadcast_deliveries WHERE destination_id = ${id}`),
    )
    expect(rows[0]?.last_error).toContain("ramp delivery is not supported")
  })
})

describe("durability", () => {
  test("rows written before a restart are delivered after it", async () => {
    const db: TestDatabase = await freshDatabase()
    cleanups.push(db.drop)
    const port = closedPort()
    const first = await startTestGateway({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast({ retryBaseMs: 60_000 }) })
    await setBroadcast(first, true)
    await createDestination(first, { name: "c", type: "otel-collector", config: { endpoint: `http://127.0.0.1:${port}` } })
    const generations = [await ask(first, { input: "before restart 1" }), await ask(first, { input: "before restart 2" })]
    await first.server.drain()
    await first.server.stop()
    const receiver = startReceiver(port)
    cleanups.push(receiver.stop)
    // The second start's retries are not delayed: the rows' next attempt (a minute away) is made due.
    const second = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast() })))
    cleanups.push(() => second.stop())
    await second.runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE broadcast_deliveries SET next_attempt_at = 0`))
    await waitFor(() => generations.every((g) => rootsBy(receiver.received).has(g)), 15_000, "delivery after the restart")
  })

  test("two gateways on one database deliver every row (at least once, a repeat with the same trace)", async () => {
    const db: TestDatabase = await freshDatabase()
    cleanups.push(db.drop)
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const a = await startTestGateway({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast({ batchSize: 3 }) })
    cleanups.push(() => a.stop())
    const b = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast({ batchSize: 3 }) })))
    cleanups.push(() => b.stop())
    await setBroadcast(a, true)
    await createDestination(a, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const viaB = (input: string) => askThrough(b, a.adminKey, input)
    const ids: Array<string> = []
    for (let i = 0; i < 15; i++) ids.push(await ask(a, { input: `a${i}` }), await viaB(`b${i}`))
    await waitFor(() => ids.every((g) => rootsBy(receiver.received).has(g)), 20_000, "every generation")
    const roots = receiver.received.flatMap((r) => spansIn(r.body)).filter((s) => attr(s, "gateway.attempt.index") === undefined)
    const traceOf = new Map<string, string>()
    for (const s of roots) {
      const g = attr(s, "gen_ai.response.id") as string
      const seen = traceOf.get(g)
      if (seen !== undefined) expect(s.traceId).toBe(seen)
      traceOf.set(g, s.traceId)
    }
    expect(traceOf.size).toBe(ids.length)
  })
})

/**
 * Two gateways on one Postgres database: `before` runs through A; B serves a request and commits it
 * (its outbox now caches the workspace's targets); `change` runs through A; once B has heard the
 * notice, B's next generation reaches the receiver: at once, not at the end of B's cache's lifetime.
 */
const seenAtOnceByAnother = async (
  before: (a: TestGateway, receiverUrl: string) => Promise<unknown>,
  change: (a: TestGateway, receiverUrl: string) => Promise<unknown>,
) => {
  const db: TestDatabase = await freshDatabase()
  cleanups.push(db.drop)
  const receiver = startReceiver()
  cleanups.push(receiver.stop)
  const a = await startTestGateway({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast() })
  cleanups.push(() => a.stop())
  const b = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast() })))
  cleanups.push(() => b.stop())
  await before(a, receiver.url)
  const viaB = (input: string) => askThrough(b, a.adminKey, input)
  await viaB("before the change")
  await b.runtime.runPromise(Effect.flatMap(GenerationStore, (g) => g.flush))
  const heard = () => b.runtime.runPromise(Effect.map(Notifications, (n) => n.stats().received))
  const heardBefore = await heard()
  await change(a, receiver.url)
  await waitFor(async () => (await heard()) > heardBefore, 5_000, "B hearing the change")
  const generation = await viaB("after the change")
  // Read from stale targets, the generation would have no row for the destination and never arrive;
  // the wait only allows for B's delivery Worker starting (lazily, on the notice) on a loaded machine.
  await waitFor(() => rootsBy(receiver.received).has(generation), 25_000, "B's generation delivered")
}

describe("changes across processes (Postgres)", () => {
  bunTest.skipIf(engine !== "postgres")(
    "a destination created through one gateway is used by another at once: a notice, not the end of its cache's lifetime",
    () =>
      seenAtOnceByAnother(
        (a) => setBroadcast(a, true),
        (a, url) => createDestination(a, { name: "c", type: "otel-collector", config: { endpoint: url } }),
      ),
    2 * TIMEOUT_MS,
  )

  bunTest.skipIf(engine !== "postgres")(
    "broadcast switched on through one gateway is used by another at once: a notice, not the end of its cache's lifetime",
    () =>
      seenAtOnceByAnother(
        // A destination exists, but the workspace's broadcast is off.
        async (a, url) => {
          await createDestination(a, { name: "c", type: "otel-collector", config: { endpoint: url } })
          await setBroadcast(a, false)
        },
        (a) => setBroadcast(a, true),
      ),
    2 * TIMEOUT_MS,
  )
})

describe("cap and retention", () => {
  test("beyond max_pending_per_destination the oldest rows are dropped and counted", async () => {
    // A receiver of this test's own that refuses with a 503, not a closed port: with test files
    // running side by side, another file's server may take a freed port and answer.
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    receiver.respond(503)
    const gw = await gateway({ broadcast: fast({ maxPendingPerDestination: 3, retryBaseMs: 60_000 }) })
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    for (let i = 0; i < 6; i++) await ask(gw, { input: `queued ${i}` })
    await gw.server.drain()
    // Every row has had its first attempt (none is claimed while the cap applies), or was dropped.
    const tried = () =>
      gw.server.runtime.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ n: number | null }>`SELECT SUM(generations) AS n FROM broadcast_deliveries WHERE attempts >= 1 AND claimed_until = 0`.pipe(
            Effect.map((r) => Number(r[0]?.n ?? 0)),
          ),
        ),
      )
    // When the rows came in more than one pass, five failed sends open the breaker (5 s) before the
    // sixth row is tried, and the worker's own maintenance (every 5 s) may drop rows meanwhile.
    const droppedSoFar = async () =>
      Number(/outcome="dropped"\} (\d+)/.exec(await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text())?.[1] ?? 0)
    await waitFor(async () => (await tried()) + (await droppedSoFar()) >= 6, 15_000, "every row's first attempt, or its drop")
    await gw.server.runtime.runPromise(Effect.flatMap(Broadcast, (b) => b.maintainNow))
    expect((await deliveryOf(gw, id)).pending).toBe(3)
    const metrics = await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="otel-collector",outcome="dropped"\} 3/)
  })

  test("beyond max_pending_bytes the oldest batches are dropped for every destination and counted; a batch keeps its size", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    receiver.respond(503)
    const gw = await gateway({ broadcast: fast({ maxPendingBytes: 1, retryBaseMs: 60_000 }) })
    const ids = [
      await createDestination(gw, { name: "a", type: "otel-collector", config: { endpoint: receiver.url } }),
      await createDestination(gw, { name: "b", type: "webhook", config: { url: receiver.url } }),
    ]
    for (let i = 0; i < 4; i++) await ask(gw, { input: `held ${i}` })
    await gw.server.drain()
    const sql = <A,>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) => gw.server.runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, f).pipe(Effect.orDie))
    // Each batch's size is its items' and sealed content's length, written with it.
    const sizes = await sql((q) =>
      q<{ bytes: number; items: number; content: number | null }>`SELECT b.bytes, length(b.items) AS items, length(c.content) AS content
        FROM broadcast_batches b LEFT JOIN broadcast_contents c ON c.batch_id = b.id`,
    )
    expect(sizes.length).toBeGreaterThan(0)
    for (const r of sizes) expect(Number(r.bytes)).toBe(Number(r.items) + Number(r.content ?? 0))
    // Every row has had its first attempt (not claimed while the cap applies), or was dropped already.
    const dropped = async () =>
      [...(await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()).matchAll(/outcome="dropped"\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0)
    const tried = () =>
      sql((q) =>
        q<{ n: number | null }>`SELECT SUM(generations) AS n FROM broadcast_deliveries WHERE attempts >= 1 AND claimed_until = 0`.pipe(
          Effect.map((r) => Number(r[0]?.n ?? 0)),
        ),
      )
    await waitFor(async () => (await tried()) + (await dropped()) >= 8, 15_000, "every row's first attempt, or its drop")
    await gw.server.runtime.runPromise(Effect.flatMap(Broadcast, (b) => b.maintainNow))
    // One byte allowed: nothing pending is kept, for either destination, and both kinds count what went.
    for (const id of ids) expect((await deliveryOf(gw, id)).pending).toBe(0)
    expect(await dropped()).toBe(8)
    const metrics = await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="otel-collector",outcome="dropped"\} 4/)
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="webhook",outcome="dropped"\} 4/)
    const left = await sql((q) => q<{ n: number }>`SELECT COUNT(*) AS n FROM broadcast_batches`)
    expect(Number(left[0]?.n)).toBe(0)
  })

  test("delivered rows are deleted after the retention; their content is cleared on delivery", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({ broadcast: fast({ retentionMs: 1 }) })
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const generation = await ask(gw, { input: "keep briefly" })
    await waitFor(async () => (await deliveryOf(gw, id)).last_success_at !== null)
    // The batch is named after its first generation; this one was committed alone.
    const content = await gw.server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT COUNT(*) AS n FROM broadcast_contents WHERE batch_id = ${generation}`),
    )
    expect(Number(content[0]?.n)).toBe(0)
    await Bun.sleep(5)
    await gw.server.runtime.runPromise(Effect.flatMap(Broadcast, (b) => b.maintainNow))
    expect(await rowCount(gw, "delivered")).toBe(0)
    const batches = await gw.server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT COUNT(*) AS n FROM broadcast_batches WHERE id = ${generation}`),
    )
    expect(Number(batches[0]?.n)).toBe(0)
  })
})

describe("the outbox batch", () => {
  const batchItems = async (gw: TestGateway, batchId: string) => {
    const rows = await gw.server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ items: string }>`SELECT items FROM broadcast_batches WHERE id = ${batchId}`),
    )
    const stored = rows[0]?.items ?? "null"
    // Packed (zstd, base64), not the JSON itself.
    expect(stored.startsWith("{")).toBe(false)
    return JSON.parse(unpackJson(stored)) as { generations: Array<{ payload: Record<string, unknown> }> }
  }

  test("items and content are stored packed: a batch's repeated JSON in a fraction of its bytes, read back as written", () => {
    const json = JSON.stringify(
      Array.from({ length: 200 }, (_, i) => ({ payload: { id: `gen-${i}`, user: "ünïcode ✓ 𝄞", attempts: [{ model: "demo/free", status: 200 }] }, to: [0, 1, 2] })),
    )
    const packed = packJson(json)
    expect(packed.length).toBeLessThan(json.length / 5)
    expect(unpackJson(packed)).toBe(json)
    // Rows written before packing hold the JSON itself, which is read as it is.
    expect(unpackJson(json)).toBe(json)
  })

  test("keeps only what the generation's record lacks; the trace carries the record's fields", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({})
    await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const generation = await ask(gw, { input: "from the record", user: "end-user-7" })
    await waitFor(() => rootsBy(receiver.received).has(generation))
    // The batch is named after its first generation; this one was committed alone.
    const stored = (await batchItems(gw, generation)).generations[0]?.payload
    expect(Object.keys(stored ?? {}).sort()).toEqual(["attempts", "id", "params", "plugins", "pricing", "strategy", "trace", "user"])
    const root = rootsBy(receiver.received).get(generation)
    if (root === undefined) throw new Error("no root span")
    expect(attr(root, "gen_ai.request.model")).toBe("demo/free")
    expect(attr(root, "user.id")).toBe("end-user-7")
    expect(attr(root, "gen_ai.usage.output_tokens")).toBeGreaterThan(0)
    expect(attr(root, "gateway.generation.status")).toBe("completed")
  })

  test("a batch written with whole payloads (before the extras) is delivered as it was written", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({})
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const payload = deliveryPayload({
      id: "gen-1700000000-wholepayload00000001",
      keyHash: "0".repeat(64),
      ownerId: "user_admin",
      workspaceId: "ws",
      model: "legacy/model",
      provider: "legacy",
      upstreamModel: "legacy-upstream",
      createdAt: new Date().toISOString(),
      inputTokens: 3,
      outputTokens: 4,
      totalCost: 0,
    })
    // No generations row: a whole payload is taken as it is; written before packing, as plain JSON.
    await writeBatch(gw, id, [payload], (json) => json)
    await waitFor(() => rootsBy(receiver.received).has(payload.id))
    const root = rootsBy(receiver.received).get(payload.id)
    if (root === undefined) throw new Error("no root span")
    expect(attr(root, "gen_ai.request.model")).toBe("legacy/model")
    expect(attr(root, "gen_ai.response.model")).toBe("legacy-upstream")
    expect(attr(root, "gen_ai.usage.output_tokens")).toBe(4)
  })
})

describe("the size of a send", () => {
  test("a commit batch of more generations than batch_size goes in several requests, each generation once", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({ broadcast: fast({ batchSize: 3 }) })
    const id = await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    // One outbox batch of 7 (a ledger commit holds up to 1,000 generations), as the commit writes it, packed.
    const payloads = Array.from({ length: 7 }, (_, i) =>
      deliveryPayload({ id: `gen-1700000000-bigbatch${String(i).padStart(11, "0")}`, keyHash: "0".repeat(64), workspaceId: "ws", createdAt: new Date().toISOString() }),
    )
    await writeBatch(gw, id, payloads, packJson)
    await waitFor(() => payloads.every((p) => rootsBy(receiver.received).has(p.id)), 10_000, "every generation of the batch")
    const perRequest = receiver.received.map((r) => [...rootsBy([r]).keys()])
    expect(perRequest.map((roots) => roots.length).sort()).toEqual([1, 3, 3])
    expect(perRequest.flat().sort()).toEqual(payloads.map((p) => p.id).sort())
  })

  test("generations with long content go in more sends, each under broadcast.batch_max_bytes; short ones share one", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    // One pass a second: the requests below are committed before the worker claims them, together.
    const gw = await gateway({ broadcast: fast({ pollMs: 1_000, batchMaxBytes: 30_000 }) })
    await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: receiver.url } })
    const long = "a long prompt ".repeat(300)
    const ids = await Promise.all([0, 1, 2, 3].map((i) => ask(gw, { input: `${i} ${long}` })))
    await waitFor(() => ids.every((id) => rootsBy(receiver.received).has(id)), 10_000, "every long generation")
    const sends = receiver.received.map((r) => ({ bytes: r.body.length, roots: [...rootsBy([r]).keys()] }))
    // Each is ~12 KB sent (estimated ~21 KB: the estimate errs high): one fits under the cap, two do not.
    for (const send of sends) expect(send.roots).toHaveLength(1)
    expect(sends.map((s) => s.roots[0]).sort()).toEqual([...ids].sort())
    for (const send of sends) expect(send.bytes).toBeLessThan(30_000)

    const from = receiver.received.length
    const short = await Promise.all([0, 1, 2, 3].map((i) => ask(gw, { input: `short ${i}` })))
    await waitFor(() => short.every((id) => rootsBy(receiver.received.slice(from)).has(id)), 10_000, "every short generation")
    // Short ones stay together (the same pass claimed them).
    expect(receiver.received.length - from).toBe(1)
  })
})

describe("the safe outbound fetcher", () => {
  test("a loopback destination is refused at creation unless outbound.allow_private_addresses; nothing is delivered", async () => {
    const receiver = startReceiver()
    cleanups.push(receiver.stop)
    const gw = await gateway({ allowPrivateAddresses: false })
    const res = await gw.fetch("/v1/observability/destinations", {
      method: "POST",
      json: { name: "c", type: "otel-collector", config: { endpoint: receiver.url } },
    })
    expect(res.status).toBe(400)
    const body = (await res.json()) as { error: { message: string } }
    expect(body.error.message).toContain("config.endpoint: the host 127.0.0.1 resolves to a private or reserved address")
    expect(body.error.message).toContain("outbound.allow_private_addresses")
    await ask(gw, { input: "to loopback" })
    const listed = (await (await gw.fetch("/v1/observability/destinations")).json()) as { data: ReadonlyArray<unknown> }
    expect(listed.data).toHaveLength(0)
    expect(receiver.received.length).toBe(0)
  })
})

describe("gateway destinations redeliver (CLI)", () => {
  test("queues a destination's dead rows again; an unknown id is refused", async () => {
    const db: TestDatabase = await freshDatabase()
    cleanups.push(db.drop)
    const gw = await startTestGateway({ databaseUrl: db.url, allowPrivateAddresses: true, broadcast: fast() })
    await setBroadcast(gw, true)
    const id = await createDestination(gw, { name: "r", type: "ramp", config: { apiKey: "ramp-key-0123456789" } })
    await ask(gw, { input: "to be redelivered" })
    await waitFor(async () => (await deliveryOf(gw, id)).dead === 1)
    await gw.server.stop()
    const run = (args: Array<string>) => {
      const proc = Bun.spawnSync([process.execPath, "src/main.ts", ...args], {
        cwd: `${import.meta.dir}/../..`,
        env: { ...process.env, DATABASE_URL: db.url, GATEWAY_LOG_LEVEL: "none", GATEWAY_DATA_DIR: gw.server.settings.dataDir },
      })
      return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() }
    }
    const ok = run(["destinations", "redeliver", id])
    expect(ok.err).toBe("")
    expect(ok.out).toContain(`Queued 1 dead deliveries of ${id}`)
    const unknown = run(["destinations", "redeliver", "no-such-destination"])
    expect(unknown.code).toBe(1)
    expect(unknown.err).toContain("no observability destination no-such-destination")
  }, 60_000)
})
