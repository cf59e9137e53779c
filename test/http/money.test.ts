/**
 * Spending limits and credits (docs/operations.md): the worst case is reserved before the call, the actual
 * committed after, the rest released, on every path; concurrent requests never together pass a
 * key's limit by more than one request's reservation.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { join } from "node:path"
import { demoCatalog, GatewayConfig, testSettings } from "../../src/config/Config.js"
import { startServer } from "../../src/http/server.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Spend } from "../../src/services/Spend.js"
import { engine, freshDatabase } from "../support/db.js"
import { expectError, startTestGateway, type TestGateway, useGateway } from "../support/gateway.js"
import { at } from "../support/services.js"

const gw = useGateway()

/** One request's actual cost on demo/echo ($1/M prompt, $2/M completion) for this body. */
// Pinned to the "fake" endpoint: the default spreads load across endpoints by price.
const BODY = { model: "demo/echo", input: "hi there", max_output_tokens: 3, provider: { order: ["fake"] } }
// The fake counts ceil(8/4) = 2 input tokens and 3 output words ("Echo: hi there").
const ACTUAL = (2 * 1 + 3 * 2) / 1e6

const makeKey = async (g: TestGateway, json: Record<string, unknown>) =>
  (await (await g.fetch("/v1/keys", { method: "POST", json })).json()) as { key: string; data: { hash: string } }

const run = <A, E>(g: TestGateway, effect: Effect.Effect<A, E, any>) => g.server.runtime.runPromise(effect as Effect.Effect<A, E, never>)
const flush = (g: TestGateway) => g.server.drain()
const openReservations = (g: TestGateway) => run(g, Effect.flatMap(Spend, (s) => s.openReservations))

const ledgerSpend = (g: TestGateway, hash: string) =>
  run(
    g,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${hash}`
      return Number(rows[0]?.total ?? 0) / 1e9
    }),
  )

/** The largest reservation one request of BODY can hold: estimated prompt tokens + 3 output tokens. */
const maxReservation = (bodyChars: number) => (Math.ceil(bodyChars / 4) * 1 + 3 * 2) / 1e6

describe("spending limits under concurrency", () => {
  test("200 concurrent requests on a key that affords 10: at most 11 succeed, every other is 402", async () => {
    const limit = ACTUAL * 10
    const { key, data } = await makeKey(gw(), { name: "tight", limit })
    const results = await Promise.all(
      Array.from({ length: 200 }, () => gw().fetch("/v1/responses", { method: "POST", json: BODY, key })),
    )
    const statuses = results.map((r) => r.status)
    const ok = statuses.filter((s) => s === 200).length
    expect(ok).toBeGreaterThan(0)
    expect(ok).toBeLessThanOrEqual(11)
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([])
    const refused = results.find((r) => r.status === 402)!
    expect(await expectError(refused, 402)).toContain("key's limit")
    await Promise.all(results.map((r) => r.text().catch(() => "")))
    await flush(gw())
    const spent = await ledgerSpend(gw(), data.hash)
    expect(spent).toBeCloseTo(ok * ACTUAL, 12)
    expect(spent).toBeLessThanOrEqual(limit + maxReservation(JSON.stringify(BODY).length) + 1e-12)
    expect(await openReservations(gw())).toBe(0)
  })

  test("a key over its limit gets 402 saying it is the key's limit and when it resets", async () => {
    const { key } = await makeKey(gw(), { name: "zero-daily", limit: 0, limit_reset: "daily" })
    const message = await expectError(await gw().fetch("/v1/responses", { method: "POST", json: BODY, key }), 402)
    expect(message).toContain("key's limit")
    expect(message).toContain("not your account's credits")
    expect(message).toMatch(/resets at \d{4}-\d{2}-\d{2}T00:00:00\.000Z/)
  })

  test("raising the limit lets the key spend again at once", async () => {
    const { key, data } = await makeKey(gw(), { name: "raise", limit: 0 })
    await expectError(await gw().fetch("/v1/responses", { method: "POST", json: BODY, key }), 402)
    await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { limit: 1 } })
    expect((await gw().fetch("/v1/responses", { method: "POST", json: BODY, key })).status).toBe(200)
  })
})

describe("no reservation is left behind", () => {
  test("after an upstream timeout, a 4xx from upstream and our own deadline", async () => {
    const { key } = await makeKey(gw(), { name: "paths", limit: 5 })
    // The statuses of docs/providers.md "Errors": a timeout 524, a bad request 400, overloaded 529.
    for (const [input, status] of [["x [fail:timeout]", 524], ["x [fail:400]", 400], ["x [fail:529]", 529]] as const) {
      const res = await gw().fetch("/v1/responses", { method: "POST", json: { ...BODY, input }, key })
      expect([input, res.status]).toEqual([input, status])
    }
    await Bun.sleep(50)
    expect(await openReservations(gw())).toBe(0)
  })

  test("after a client abort mid-stream; the partial answer is charged", async () => {
    const { key, data } = await makeKey(gw(), { name: "abort", limit: 5 })
    const controller = new AbortController()
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: `${"w ".repeat(30)}[slow:20]`, stream: true },
      key,
      signal: controller.signal,
    })
    const reader = res.body!.getReader()
    let text = ""
    while (!text.includes("output_text.delta")) text += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    await reader.cancel().catch(() => {})
    for (let i = 0; i < 50 && (await openReservations(gw())) > 0; i++) await Bun.sleep(10)
    expect(await openReservations(gw())).toBe(0)
    await flush(gw())
    expect(await ledgerSpend(gw(), data.hash)).toBeGreaterThan(0)
  })

  test("a reservation left by a crash is released at the next start", async () => {
    const db = await freshDatabase()
    const url = db.url
    const first = await startTestGateway({ databaseUrl: url, requestTimeoutMs: 1000 })
    const { data } = await makeKey(first, { name: "crashy", limit: 1 })
    // A reservation as a crashed process would leave it: an hour old and still held.
    await run(
      first,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const old = new Date(Date.now() - 3_600_000).toISOString()
        yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at)
          SELECT ${"r-crash"}, hash, user_id, 500000000, 0, ${old} FROM api_keys WHERE hash = ${data.hash}`
        yield* sql`UPDATE api_keys SET reserved_nano = reserved_nano + 500000000 WHERE hash = ${data.hash}`
      }),
    )
    await first.server.stop()
    // The same database again: no first key is created this time.
    const second = { server: await startServer(GatewayConfig.layer(testSettings({ databaseUrl: url, requestTimeoutMs: 1000 }))) } as TestGateway
    try {
      expect(await openReservations(second)).toBe(0)
      const reserved = await run(
        second,
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return (yield* sql<{ r: number }>`SELECT reserved_nano AS r FROM api_keys WHERE hash = ${data.hash}`)[0]!.r
        }),
      )
      expect(Number(reserved)).toBe(0)
    } finally {
      await second.server.stop()
      await db.drop()
    }
  })
})

/**
 * A key with `limitReset` and spend `spentUsd` recorded at `spentAt`: whether a reservation is
 * refused just before the window ends and admitted when the next one starts (injected clock).
 */
const rollsOver = (
  limitReset: "daily" | "weekly",
  spend: { readonly usd: number; readonly at: string },
  lastInstant: string,
  firstInstant: string,
) =>
  Effect.gen(function* () {
    const { data } = yield* Effect.promise(() => makeKey(gw(), { name: limitReset, limit: 0.001, limit_reset: limitReset }))
    const keys = yield* KeyStore
    const spendService = yield* Spend
    const row = Option.getOrThrow(yield* keys.cachedByHash(data.hash))
    yield* keys.recordSpend([
      { keyHash: row.hash, userId: row.user_id, workspaceId: row.workspace_id, amountUsd: spend.usd, isByok: false, createdAt: spend.at },
    ])
    const before = yield* Effect.either(at(lastInstant, spendService.reserve(row, 0.0001, { isByok: false })))
    const after = yield* Effect.either(at(firstInstant, spendService.reserve(row, 0.0001, { isByok: false })))
    if (after._tag === "Right" && Option.isSome(after.right)) yield* spendService.settle(after.right.value, 0)
    return { before: before._tag, after: after._tag }
  })

describe("limit windows roll at 00:00 UTC and on Mondays (injected clock)", () => {
  test("a weekly key spent out on Sunday 23:59:59Z is admitted again on Monday 00:00:00Z", async () => {
    const outcome = await run(
      gw(),
      rollsOver("weekly", { usd: 0.001, at: "2026-11-22T12:00:00.000Z" }, "2026-11-22T23:59:59.000Z", "2026-11-23T00:00:00.000Z"),
    )
    expect(outcome).toEqual({ before: "Left", after: "Right" })
  })

  test("a daily key rolls at midnight UTC", async () => {
    const outcome = await run(
      gw(),
      rollsOver("daily", { usd: 0.002, at: "2026-11-25T08:00:00.000Z" }, "2026-11-25T23:59:59.999Z", "2026-11-26T00:00:00.000Z"),
    )
    expect(outcome).toEqual({ before: "Left", after: "Right" })
  })
})

describe("credits", () => {
  test("enforced credits: 402 without a balance, accepted after a top-up; BYOK does not draw credits", async () => {
    const catalog = {
      ...demoCatalog,
      credits: { enforce: true },
      providers: [...demoCatalog.providers, { id: "mine", kind: "fake" as const, byok: true }],
      models: [
        ...demoCatalog.models,
        { id: "byok/echo", context_length: 1000, endpoints: [{ provider: "mine", upstream_model: "echo", pricing: { prompt: 1, completion: 2 } }] as const },
      ],
    }
    const g = await startTestGateway({ catalog, creditsEnforced: true })
    try {
      const message = await expectError(await g.fetch("/v1/responses", { method: "POST", json: BODY }), 402)
      expect(message).toContain("credits")
      const me = (await (await g.fetch("/v1/key")).json()) as { data: { creator_user_id: string } }
      await run(g, Effect.flatMap(KeyStore, (k) => k.addCredits(me.data.creator_user_id, 1)))
      expect((await g.fetch("/v1/responses", { method: "POST", json: BODY })).status).toBe(200)
      const byok = await g.fetch("/v1/responses", { method: "POST", json: { ...BODY, model: "byok/echo" } })
      expect(byok.status).toBe(200)
      const body = (await byok.json()) as { usage: { is_byok: boolean } }
      expect(body.usage.is_byok).toBe(true)
      await flush(g)
      const credits = (await (await g.fetch("/v1/credits")).json()) as { data: { total_credits: number; total_usage: number } }
      expect(credits.data.total_credits).toBe(1)
      // Only the non-BYOK request drew credits.
      expect(credits.data.total_usage).toBeCloseTo(ACTUAL, 12)
      const key = (await (await g.fetch("/v1/key")).json()) as { data: { byok_usage: number; usage: number } }
      // The BYOK request is the same body at the same prices: it is counted as BYOK usage, at the same cost.
      expect(key.data.byok_usage).toBeCloseTo(ACTUAL, 12)
      expect(key.data.usage).toBeCloseTo(ACTUAL, 12)
    } finally {
      await g.stop()
    }
  })
})

describe.skipIf(engine !== "postgres")("two gateway processes on one Postgres database", () => {
  test("together they never let a key pass its limit by more than one reservation", async () => {
    const db = await freshDatabase()
    const secret = `sk-gw-v1-${"cd".repeat(32)}`
    const root = join(import.meta.dir, "../..")
    const spawnGateway = () =>
      Bun.spawn([process.execPath, "src/main.ts", "serve"], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: db.url, GATEWAY_MANAGEMENT_KEY: secret, PORT: "0", HOST: "127.0.0.1", GATEWAY_LOG_LEVEL: "none" },
        stdout: "pipe",
        stderr: "pipe",
      })
    const urlOf = async (proc: ReturnType<typeof spawnGateway>) => {
      const reader = proc.stdout.getReader()
      let out = ""
      while (!/listening on (http:\/\/\S+)\/v1/.test(out)) {
        const { value, done } = await reader.read()
        if (done) throw new Error(`gateway exited: ${out}`)
        out += new TextDecoder().decode(value)
      }
      reader.releaseLock()
      return /listening on (http:\/\/\S+)\/v1/.exec(out)![1]!
    }
    // Start them one after the other: both run the migrations at start.
    const a = spawnGateway()
    const urlA = await urlOf(a)
    const b = spawnGateway()
    const urlB = await urlOf(b)
    try {
      const auth = { authorization: `Bearer ${secret}`, "content-type": "application/json" }
      const limit = ACTUAL * 10
      const made = (await (
        await fetch(`${urlA}/v1/keys`, { method: "POST", headers: auth, body: JSON.stringify({ name: "shared", limit }) })
      ).json()) as { key: string; data: { hash: string } }
      const call = (url: string) =>
        fetch(`${url}/v1/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${made.key}`, "content-type": "application/json" },
          body: JSON.stringify(BODY),
        })
      const results = await Promise.all(Array.from({ length: 200 }, (_, i) => call(i % 2 === 0 ? urlA : urlB)))
      const ok = results.filter((r) => r.status === 200).length
      expect(results.every((r) => r.status === 200 || r.status === 402)).toBe(true)
      expect(ok).toBeGreaterThan(0)
      expect(ok).toBeLessThanOrEqual(11)
      // Let both processes' group commits land, then read the shared ledger.
      await Bun.sleep(300)
      const { SQL } = await import("bun")
      const pg = new SQL(db.url)
      const [row] = await pg`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${made.data.hash}`
      const [open] = await pg`SELECT COUNT(*)::int AS n FROM reservations`
      await pg.close()
      expect(Number(row.total) / 1e9).toBeCloseTo(ok * ACTUAL, 12)
      expect(Number(row.total) / 1e9).toBeLessThanOrEqual(limit + maxReservation(JSON.stringify(BODY).length) + 1e-12)
      expect(open.n).toBe(0)
    } finally {
      a.kill("SIGTERM")
      b.kill("SIGTERM")
      await Promise.all([a.exited, b.exited])
      await db.drop()
    }
  }, 60_000)
})
