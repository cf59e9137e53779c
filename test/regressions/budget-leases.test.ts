/**
 * Budget leases (docs/operations.md). A limited key's requests are admitted in memory against the process's
 * slice of the key's budget, taken with one conditional UPDATE; near the limit requests hold one
 * at a time. Across processes sharing a database the limit still holds to one reservation; slices
 * go back when idle, at shutdown and when the key changes (at once on the process that served the
 * change, through the notice on the others); a killed process's slice comes back when its lease
 * runs out. On SQLite and, with GATEWAY_TEST_PG_URL, Postgres (two processes on one SQLite file
 * are run here too: the leases do not depend on the engine).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Either, Layer, Option } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { sliceSize } from "../../src/store/budget-slices.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { KeyCacheOptions } from "../../src/services/KeyStore.js"
import { Notifications } from "../../src/services/Notifications.js"
import { Spend } from "../../src/services/Spend.js"
import { pennyCatalog } from "../support/catalog.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { untilListening } from "../support/spawned.js"

const PENNY = { model: "test/penny", input: "hi", max_output_tokens: 3 }

const start = (url: string, overrides: Partial<Settings> = {}) =>
  startServer(
    Layer.merge(
      GatewayConfig.layer(testSettings({ databaseUrl: url, catalog: pennyCatalog, ...overrides })),
      // Only a notice (or this process's own write) can make a process see a key's change here.
      Layer.succeed(KeyCacheOptions, { ttlMs: 600_000 }),
    ) as Layer.Layer<GatewayConfig>,
  )

const ask = (server: RunningServer | string, key: string) =>
  fetch(`${typeof server === "string" ? server : server.url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(PENNY),
  }).then(async (res) => {
    await res.arrayBuffer()
    return res.status
  })

const makeKey = async (server: RunningServer, admin: string, limit: number) => {
  const res = await fetch(`${server.url}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "leased", limit }),
  })
  expect(res.status).toBe(201)
  const body = (await res.json()) as { key: string; data: { hash: string } }
  return { secret: body.key, hash: body.data.hash }
}

const patchLimit = async (server: RunningServer, admin: string, hash: string, limit: number) => {
  const res = await fetch(`${server.url}/v1/keys/${hash}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
    body: JSON.stringify({ limit }),
  })
  await res.arrayBuffer()
  expect(res.status).toBe(200)
}

/** The key's holds as the database has them: reserved, counted spend, slice rows and request holds. */
const heldIn = (server: RunningServer, hash: string) =>
  server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const key = (yield* sql<{ r: number; s: number }>`SELECT reserved_nano AS r, window_spend_nano AS s FROM api_keys WHERE hash = ${hash}`)[0]
      const rows = yield* sql<{ is_slice: number; amount_nano: number }>`SELECT is_slice, amount_nano FROM reservations WHERE key_hash = ${hash}`
      return {
        reserved: Number(key?.r ?? 0) / 1e9,
        spent: Number(key?.s ?? 0) / 1e9,
        slices: rows.filter((r) => Number(r.is_slice) === 1).length,
        holds: rows.filter((r) => Number(r.is_slice) === 0).length,
      }
    }) as Effect.Effect<{ reserved: number; spent: number; slices: number; holds: number }, never, never>,
  )

const slicesOf = (server: RunningServer) => server.runtime.runSync(Effect.map(Spend, (s) => s.slices()))

const until = async (what: string, check: () => Promise<boolean> | boolean, ms = 5_000) => {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await Bun.sleep(5)
  }
}

describe(`two processes on one database (${engine})`, () => {
  let db: TestDatabase
  let a: RunningServer
  let b: RunningServer
  let admin: string
  beforeAll(async () => {
    db = await freshDatabase()
    a = await start(db.url, { budgetSliceIdleMs: 600_000 })
    b = await start(db.url, { budgetSliceIdleMs: 600_000 })
    admin = Option.getOrThrow(a.createdSecret)
    if (engine === "postgres") {
      const listening = (s: RunningServer) => s.runtime.runSync(Effect.map(Notifications, (n) => n.stats().listening))
      await until("both listeners up", () => listening(a) && listening(b))
    }
  }, 30_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await db?.drop()
  })

  test("a $0.05 limit at $0.01 a request admits exactly 5 of 200 concurrent requests, 100 through each process", async () => {
    const k = await makeKey(a, admin, 0.05)
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, i) => ask(i % 2 === 0 ? a : b, k.secret)))
    expect(statuses.filter((s) => s === 200).length).toBe(5)
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([])
    await a.drain()
    await b.drain()
    expect(await heldIn(a, k.hash)).toEqual({ reserved: 0, spent: 0.05, slices: 0, holds: 0 })
  }, 60_000)

  test("with slices in play ($1 at $0.01): 300 concurrent requests across both never pass the limit by more than one reservation", async () => {
    const k = await makeKey(a, admin, 1)
    // Warm both processes: each takes a slice of the key's budget and admits against it in memory.
    expect(await ask(a, k.secret)).toBe(200)
    expect(await ask(b, k.secret)).toBe(200)
    expect(slicesOf(a).filter((s) => s.keyHash === k.hash).length).toBe(1)
    expect(slicesOf(b).filter((s) => s.keyHash === k.hash).length).toBe(1)
    expect((await heldIn(a, k.hash)).slices).toBe(2)
    const statuses = await Promise.all(Array.from({ length: 300 }, (_, i) => ask(i % 2 === 0 ? a : b, k.secret)))
    const ok = statuses.filter((s) => s === 200).length + 2
    await a.drain()
    await b.drain()
    const after = await heldIn(a, k.hash)
    // Never past the limit by more than one request's reservation ($0.01), and the spend is exactly what was admitted.
    expect(after.spent).toBeLessThanOrEqual(1.01 + 1e-9)
    expect(after.spent).toBeCloseTo(ok * 0.01, 9)
    // What the slices still hold unused is all the key holds: no request's hold is left.
    expect(after.holds).toBe(0)
    // And the budget is used: what sits unused in the other process's slice is at most a few requests' worth.
    expect(ok).toBeGreaterThanOrEqual(95)
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([])
  }, 60_000)

  test("a PATCH lowering the limit below what is leased takes effect at once on the serving process, and on the other as soon as it hears the notice", async () => {
    // On SQLite, one process: the other hears no notices there (SQLite is run as one process).
    const other = engine === "postgres" ? b : a
    const k = await makeKey(a, admin, 1)
    expect(await ask(a, k.secret)).toBe(200)
    expect(await ask(other, k.secret)).toBe(200)
    await a.drain()
    await b.drain()
    // Each holds a slice of several requests' worth: without its revocation either would admit many more.
    const leftOf = (s: RunningServer) => slicesOf(s).find((l) => l.keyHash === k.hash)?.keyLeftNano ?? 0
    expect(leftOf(a)).toBeGreaterThanOrEqual(4 * 10_000_000)
    expect(leftOf(other)).toBeGreaterThanOrEqual(4 * 10_000_000)
    const heard = b.runtime.runSync(Effect.map(Notifications, (n) => n.stats().received))
    const patchedAt = performance.now()
    await patchLimit(a, admin, k.hash, 0.03)
    // At once on A: its slice is gone and given back before the PATCH answered.
    expect(slicesOf(a).filter((l) => l.keyHash === k.hash)).toEqual([])
    if (engine === "postgres") {
      // On B through the notice (the key cache's TTL is ten minutes here, the idle give-back too).
      await until("B's slice revoked", () => slicesOf(b).every((l) => l.keyHash !== k.hash), 1_000)
      const revokedMs = performance.now() - patchedAt
      expect(b.runtime.runSync(Effect.map(Notifications, (n) => n.stats().received))).toBeGreaterThan(heard)
      console.error(`[budget-leases] B revoked its slice ${revokedMs.toFixed(1)} ms after A's PATCH answered`)
    }
    // Spent $0.02 of the new $0.03: exactly one more request, through either process.
    const after = [await ask(a, k.secret), await ask(other, k.secret), await ask(a, k.secret), await ask(other, k.secret)]
    expect(after).toEqual([200, 402, 402, 402])
    await a.drain()
    await b.drain()
    expect((await heldIn(a, k.hash)).spent).toBeCloseTo(0.03, 9)
  }, 30_000)
})

describe(`slices go back (${engine})`, () => {
  test("when the key has had no request for budget_slice_idle_ms", async () => {
    const db = await freshDatabase()
    const g = await start(db.url, { budgetSliceIdleMs: 300 })
    try {
      const k = await makeKey(g, Option.getOrThrow(g.createdSecret), 10)
      expect(await ask(g, k.secret)).toBe(200)
      await g.drain()
      const held = await heldIn(g, k.hash)
      expect(held.slices).toBe(1)
      expect(held.reserved).toBeGreaterThan(0)
      await until("the idle slice given back", async () => (await heldIn(g, k.hash)).slices === 0)
      expect(await heldIn(g, k.hash)).toEqual({ reserved: 0, spent: 0.01, slices: 0, holds: 0 })
      // The next request takes a new slice.
      expect(await ask(g, k.secret)).toBe(200)
    } finally {
      await g.stop()
      await db.drop()
    }
  }, 30_000)

  test("at shutdown", async () => {
    const db = await freshDatabase()
    const g = await start(db.url, { budgetSliceIdleMs: 600_000 })
    const k = await makeKey(g, Option.getOrThrow(g.createdSecret), 10)
    try {
      expect(await Promise.all(Array.from({ length: 8 }, () => ask(g, k.secret)))).toEqual(Array(8).fill(200))
      expect((await heldIn(g, k.hash)).slices).toBe(1)
    } finally {
      await g.stop()
    }
    const again = await start(db.url)
    try {
      expect(await heldIn(again, k.hash)).toEqual({ reserved: 0, spent: 0.08, slices: 0, holds: 0 })
    } finally {
      await again.stop()
      await db.drop()
    }
  }, 30_000)

  test("a disable or a delete gives the slice back before it answers; budget_slice_requests 0 turns slices off", async () => {
    const db = await freshDatabase()
    const g = await start(db.url, { budgetSliceIdleMs: 600_000 })
    const off = await start(db.url, { budgetSliceRequests: 0 })
    try {
      const admin = Option.getOrThrow(g.createdSecret)
      const k = await makeKey(g, admin, 10)
      expect(await ask(g, k.secret)).toBe(200)
      await g.drain()
      expect((await heldIn(g, k.hash)).slices).toBe(1)
      const res = await fetch(`${g.url}/v1/keys/${k.hash}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: JSON.stringify({ disabled: true }),
      })
      expect(res.status).toBe(200)
      expect(await heldIn(g, k.hash)).toEqual({ reserved: 0, spent: 0.01, slices: 0, holds: 0 })
      // Without slices every request holds its own.
      const plain = await makeKey(g, admin, 10)
      expect(await ask(off, plain.secret)).toBe(200)
      await off.drain()
      expect(await heldIn(off, plain.hash)).toEqual({ reserved: 0, spent: 0.01, slices: 0, holds: 0 })
      expect(slicesOf(off)).toEqual([])
    } finally {
      await g.stop()
      await off.stop()
      await db.drop()
    }
  }, 30_000)
})

describe(`a killed process's slice (${engine})`, () => {
  let dir: string
  let db: TestDatabase
  let proc: ReturnType<typeof Bun.spawn> | undefined
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gw-leases-"))
    db = await freshDatabase()
  })
  afterAll(async () => {
    proc?.kill("SIGKILL")
    await proc?.exited
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  test("comes back once its lease runs out: the key's budget is whole again for the processes still running", async () => {
    const LEASE_MS = 600
    const survivor = await start(db.url, { holdLeaseMs: LEASE_MS, budgetSliceIdleMs: 600_000 })
    try {
      const admin = Option.getOrThrow(survivor.createdSecret)
      const k = await makeKey(survivor, admin, 1)
      const config = join(dir, "config.json")
      writeFileSync(config, JSON.stringify({ ...pennyCatalog, instance_id: "doomed", ledger: { hold_lease_ms: LEASE_MS, budget_slice_idle_ms: 600_000 } }))
      proc = Bun.spawn([process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts"), "serve"], {
        cwd: dir,
        env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: db.url, GATEWAY_CONFIG: config, GATEWAY_LOG_LEVEL: "none" },
        stdout: "pipe",
        stderr: "inherit",
      })
      const url = await untilListening(proc)
      expect(await ask(url, k.secret)).toBe(200)
      // Its slice is in the database; it dies without giving it back.
      await until("the doomed process's spend committed", async () => (await heldIn(survivor, k.hash)).spent === 0.01)
      const before = await heldIn(survivor, k.hash)
      expect(before.slices).toBe(1)
      expect(before.reserved).toBeGreaterThan(0.03)
      proc.kill("SIGKILL")
      await proc.exited
      // The survivor's sweep (every third of the lease) releases it once the lease has run out.
      await until("the dead process's slice released", async () => (await heldIn(survivor, k.hash)).slices === 0, 10_000)
      expect(await heldIn(survivor, k.hash)).toEqual({ reserved: 0, spent: 0.01, slices: 0, holds: 0 })
    } finally {
      await survivor.stop()
    }
  }, 30_000)
})

describe("the size of a slice", () => {
  test("at most budget_slice_requests worst cases and an eighth of what is left; none under four worst cases (near the limit)", () => {
    const cent = 10_000_000
    expect(sliceSize(1_000 * cent, 100 * cent, cent)).toBe(100 * cent)
    expect(sliceSize(100 * cent, 100 * cent, cent)).toBe(Math.floor((100 * cent) / 8))
    expect(sliceSize(32 * cent, 100 * cent, cent)).toBe(4 * cent)
    expect(sliceSize(31 * cent, 100 * cent, cent)).toBe(0)
    expect(sliceSize(5 * cent, 100 * cent, cent)).toBe(0)
    expect(sliceSize(-cent, 100 * cent, cent)).toBe(0)
  })
})

describe(`credits through slices (${engine})`, () => {
  test("enforced credits of $1 at $0.01 a request: 150 concurrent requests spend at most one request past them", async () => {
    const db = await freshDatabase()
    const g = await start(db.url, { creditsEnforced: true, catalog: { ...pennyCatalog, credits: { enforce: true } } })
    try {
      const admin = Option.getOrThrow(g.createdSecret)
      const me = (await (await fetch(`${g.url}/v1/key`, { headers: { authorization: `Bearer ${admin}` } })).json()) as { data: { creator_user_id: string } }
      const user = me.data.creator_user_id
      await g.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.addCredits(user, 1)))
      // The first request takes a slice of the credits (the key has no limit): the rest are admitted in memory.
      expect(await ask(g, admin)).toBe(200)
      expect(slicesOf(g).length).toBe(1)
      const statuses = await Promise.all(Array.from({ length: 150 }, () => ask(g, admin)))
      const ok = statuses.filter((s) => s === 200).length + 1
      await g.drain()
      const credits = await g.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.credits(user)))
      expect(credits.total_usage).toBeLessThanOrEqual(1.01 + 1e-9)
      expect(credits.total_usage).toBeCloseTo(ok * 0.01, 9)
      expect(ok).toBeGreaterThanOrEqual(95)
      expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([])
    } finally {
      await g.stop()
      await db.drop()
    }
  }, 30_000)
})

describe("configuration of budget leases", () => {
  const settingsFrom = async (ledger: unknown) => {
    const path = join(tmpdir(), `gw-slices-${crypto.randomUUID()}.json`)
    await Bun.write(path, JSON.stringify({ ...pennyCatalog, ledger }))
    try {
      return await Effect.runPromise(
        Effect.either(Effect.provide(GatewayConfig, GatewayConfig.fromEnv)).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["GATEWAY_CONFIG", path]]))),
        ),
      )
    } finally {
      rmSync(path, { force: true })
    }
  }

  test("defaults: slices of up to 1,000 worst cases, given back after 1 s idle; both set in the file", async () => {
    const byDefault = Either.getOrThrow(await settingsFrom({}))
    expect([byDefault.budgetSliceRequests, byDefault.budgetSliceIdleMs]).toEqual([1_000, 1_000])
    const set = Either.getOrThrow(await settingsFrom({ budget_slice_requests: 0, budget_slice_idle_ms: 250 }))
    expect([set.budgetSliceRequests, set.budgetSliceIdleMs]).toEqual([0, 250])
  })

  test("out of range is refused at start, naming the key and the rule", async () => {
    const bad = await settingsFrom({ budget_slice_requests: -1 })
    expect(Either.isLeft(bad) ? String(bad.left.message) : "").toContain("ledger.budget_slice_requests")
    expect(Either.isLeft(bad) ? String(bad.left.message) : "").toContain("from 0 to 1000000")
    const idle = await settingsFrom({ budget_slice_idle_ms: 1 })
    expect(Either.isLeft(idle) ? String(idle.left.message) : "").toContain("ledger.budget_slice_idle_ms")
  })
})
