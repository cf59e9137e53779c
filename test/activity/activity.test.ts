/**
 * Usage from the rollup the ledger maintains (`usage_daily`): `GET /v1/activity` through the
 * official SDK's `analytics.getUserActivity` (its zod schemas must accept every answer), the
 * console's `GET /v1/activity/summary`, and the generation log `GET /v1/generations` with its
 * keyset pagination. Records are written through the real ledger commit (`recordDurable`), with
 * creation times in the past: the activity window is the last 30 completed UTC days.
 */
import { describe, expect, test } from "bun:test"
import * as errors from "@openrouter/sdk/models/errors"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type GenerationEntry, newGenerationId } from "../../src/domain/generations.js"
import { Auth } from "../../src/services/Auth.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { expectError, useGateway } from "../support/gateway.js"
import { generationEntry } from "../support/generations.js"
import { openRouterAt } from "../support/sdk.js"

const gw = useGateway()
const sdk = (apiKey: string = gw().adminKey) => openRouterAt(gw(), apiKey)
const run = <A>(effect: Effect.Effect<A, unknown, GenerationStore | Auth | SqlClient.SqlClient>) => gw().server.runtime.runPromise(effect)

const DAY_MS = 86_400_000
const daysAgo = (n: number, hour = 12) => {
  const d = new Date(Date.now() - n * DAY_MS)
  d.setUTCHours(hour, 0, 0, 0)
  return d.toISOString()
}
const dayOf = (iso: string) => iso.slice(0, 10)

const principalOf = (secret: string) => run(Effect.flatMap(Auth, (a) => a.authenticateSecret(secret)).pipe(Effect.orDie))
/** Through the real ledger commit; each id made at its creation time, as the request path makes it. */
const record = (entries: ReadonlyArray<GenerationEntry>) =>
  run(
    Effect.flatMap(GenerationStore, (g) =>
      Effect.all(entries.map((e) => g.recordDurable({ ...e, id: newGenerationId(Date.parse(e.createdAt)) })), { concurrency: "unbounded" }),
    ),
  )
const createKey = async (name: string) => {
  const res = await gw().fetch("/v1/keys", { method: "POST", json: { name } })
  expect(res.status).toBe(201)
  return ((await res.json()) as { key: string }).key
}

interface Setup {
  readonly admin: { hash: string; userId: string; workspaceId: string }
  readonly inference: { secret: string; hash: string }
  readonly other: { secret: string; hash: string }
}

let setup: Setup | undefined
/** Two keys of the admin's user with records two and three days ago, and a stranger's record. */
const prepare = async (): Promise<Setup> => {
  if (setup !== undefined) return setup
  const admin = await principalOf(gw().adminKey)
  const inferenceSecret = await createKey("inference")
  const otherSecret = await createKey("other")
  const inference = await principalOf(inferenceSecret)
  const other = await principalOf(otherSecret)
  const mine = { userId: admin.userId, workspaceId: admin.workspaceId }
  await record([
    // Two days ago, the inference key: two answers on one endpoint, one failure (429), one BYOK answer elsewhere.
    generationEntry({ ...mine, keyHash: inference.hash, createdAt: daysAgo(2, 9), totalCost: 0.002, inputTokens: 100, outputTokens: 40, reasoningTokens: 7, latencyMs: 300 }),
    generationEntry({ ...mine, keyHash: inference.hash, createdAt: daysAgo(2, 10), totalCost: 0.003, inputTokens: 50, outputTokens: 10, reasoningTokens: 0, latencyMs: 100 }),
    generationEntry({
      ...mine, keyHash: inference.hash, createdAt: daysAgo(2, 11), totalCost: 0, inputTokens: 20, outputTokens: 0, reasoningTokens: 0,
      latencyMs: null, status: "failed", error: { message: "rate limited", status: 429, providerName: "fake" },
    }),
    generationEntry({ ...mine, keyHash: inference.hash, createdAt: daysAgo(2, 12), model: "demo/byok", providerName: "my-own-key", isByok: true, totalCost: 0.5 }),
    // Three days ago, the other key of the same user.
    generationEntry({ ...mine, keyHash: other.hash, createdAt: daysAgo(3), totalCost: 0.25, inputTokens: 1000, outputTokens: 500, sessionId: "sess-1" }),
    // A stranger's usage, in a workspace the admin cannot use.
    generationEntry({ keyHash: "s".repeat(64), userId: "user_stranger", workspaceId: "ws_stranger", createdAt: daysAgo(2), totalCost: 9 }),
    // Today: not a completed day, so not in the activity.
    generationEntry({ ...mine, keyHash: other.hash, createdAt: new Date().toISOString(), totalCost: 1 }),
  ])
  setup = { admin: { hash: admin.hash, userId: admin.userId, workspaceId: admin.workspaceId }, inference: { secret: inferenceSecret, hash: inference.hash }, other: { secret: otherSecret, hash: other.hash } }
  return setup
}

describe("GET /v1/activity (the SDK's analytics.getUserActivity)", () => {
  test("sums the last 30 completed days per day and endpoint from the rollup, and the SDK's schemas accept it", async () => {
    const s = await prepare()
    const res = await sdk().analytics.getUserActivity({})
    const byEndpoint = new Map(res.data.map((i) => [`${i.date}|${i.endpointId}`, i]))
    const echo2 = byEndpoint.get(`${dayOf(daysAgo(2))}|demo/echo:fake`)
    expect(echo2).toMatchObject({
      model: "demo/echo",
      modelPermaslug: "demo/echo",
      providerName: "fake",
      requests: 3,
      promptTokens: 170,
      completionTokens: 50,
      reasoningTokens: 7,
      byokUsageInference: 0,
    })
    expect(echo2?.usage).toBeCloseTo(0.005, 9)
    const byok = byEndpoint.get(`${dayOf(daysAgo(2))}|demo/byok:my-own-key`)
    expect(byok?.usage).toBe(0)
    expect(byok?.byokUsageInference).toBeCloseTo(0.5, 9)
    expect(byEndpoint.get(`${dayOf(daysAgo(3))}|demo/echo:fake`)?.requests).toBe(1)
    // Not today (incomplete), not the stranger's $9.
    expect(res.data.some((i) => i.date === dayOf(new Date().toISOString()))).toBe(false)
    expect(res.data.reduce((a, i) => a + i.usage + i.byokUsageInference, 0)).toBeCloseTo(0.755, 9)
    // Newest day first; no workspace_id without group_by.
    expect(res.data[0]?.date).toBe(dayOf(daysAgo(2)))
    expect(res.data.every((i) => i.workspaceId === undefined)).toBe(true)
    expect(s.admin.userId.length).toBeGreaterThan(0)
  })

  test("date, api_key_hash, user_id, workspace_id and group_by=workspace filter and split the rows", async () => {
    const s = await prepare()
    const oneDay = await sdk().analytics.getUserActivity({ date: dayOf(daysAgo(3)) })
    expect(oneDay.data.map((i) => [i.date, i.requests])).toEqual([[dayOf(daysAgo(3)), 1]])
    const oneKey = await sdk().analytics.getUserActivity({ apiKeyHash: s.other.hash })
    expect(oneKey.data.map((i) => i.requests)).toEqual([1])
    const oneUser = await sdk().analytics.getUserActivity({ userId: s.admin.userId })
    expect(oneUser.data.reduce((a, i) => a + i.requests, 0)).toBe(5)
    const noOne = await sdk().analytics.getUserActivity({ userId: "user_nobody" })
    expect(noOne.data).toEqual([])
    const grouped = await sdk().analytics.getUserActivity({ workspaceId: s.admin.workspaceId, groupBy: "workspace" })
    expect(grouped.data.length).toBe(3)
    expect(grouped.data.every((i) => i.workspaceId === s.admin.workspaceId)).toBe(true)
  })

  test("a date outside the last 30 completed days is a 400 naming date; a workspace the user cannot use is 404", async () => {
    await prepare()
    const today = dayOf(new Date().toISOString())
    const e = await sdk().analytics.getUserActivity({ date: today }).then(() => undefined, (x: unknown) => x)
    expect(e).toBeInstanceOf(errors.BadRequestResponseError)
    expect(String((e as Error).message)).toContain("date")
    expect(await expectError(await gw().fetch("/v1/activity?date=2026-02-30"), 400)).toContain("date")
    expect(await expectError(await gw().fetch("/v1/activity?group_by=model"), 400)).toContain("group_by")
    await expectError(await gw().fetch("/v1/activity?workspace_id=ws_stranger"), 404)
  })

  test("a key of no workspace the user can use is 404 (it read as a key with no usage); a deleted key of one is found", async () => {
    const s = await prepare()
    for (const path of ["/v1/activity", "/v1/generations"]) {
      expect(await expectError(await gw().fetch(`${path}?api_key_hash=${"s".repeat(64)}`), 404)).toContain("not found")
      expect(await expectError(await gw().fetch(`${path}?api_key_hash=${"f".repeat(64)}`), 404)).toContain("not found")
    }
    expect((await gw().fetch(`/v1/keys/${s.other.hash}`, { method: "DELETE" })).status).toBe(200)
    const deleted = await sdk().analytics.getUserActivity({ apiKeyHash: s.other.hash })
    expect(deleted.data.map((i) => i.requests)).toEqual([1])
  })

  test("an inference key is refused (management keys only)", async () => {
    const s = await prepare()
    const e = await sdk(s.inference.secret).analytics.getUserActivity({}).then(() => undefined, (x: unknown) => x)
    expect(e).toBeInstanceOf(errors.ForbiddenResponseError)
  })
})

describe("GET /v1/activity/summary (the console's charts)", () => {
  interface Summary {
    data: {
      totals: { requests: number; usage: number; errors: number }
      days: Array<{ date: string; requests: number }>
      by_key: Array<{ api_key_hash: string; name: string | null; requests: number }>
      by_provider: Array<{ provider_name: string; latency_p50_ms: number | null; latency_p99_ms: number | null; requests: number }>
      by_model: Array<{ model: string; requests: number }>
      errors_by_status: Array<{ status: number; count: number }>
    }
  }
  const summary = async (query: string, key?: string) => {
    const res = await gw().fetch(`/v1/activity/summary${query}`, key === undefined ? {} : { key })
    expect(res.status).toBe(200)
    return ((await res.json()) as Summary).data
  }

  test("totals, every day of the range, by key with its name, errors by status and latency percentiles per provider", async () => {
    const s = await prepare()
    const d = await summary(`?from=${dayOf(daysAgo(6))}&to=${dayOf(daysAgo(0))}`)
    expect(d.days.map((x) => x.date)).toHaveLength(7)
    expect(d.totals.requests).toBe(6)
    expect(d.totals.errors).toBe(1)
    expect(d.errors_by_status).toEqual([{ status: 429, count: 1 }])
    expect(d.by_key.find((k) => k.api_key_hash === s.inference.hash)).toMatchObject({ name: "inference", requests: 4 })
    const fake = d.by_provider.find((p) => p.provider_name === "fake")
    // Time to first token of the fake provider's answers: 40 (the other key's, twice), 100, 300 ms.
    expect(fake?.latency_p50_ms).toBe(250)
    expect(fake?.latency_p99_ms).toBe(500)
    const byModel = await summary(`?from=${dayOf(daysAgo(6))}&model=demo/byok`)
    expect(byModel.totals.requests).toBe(1)
  })

  test("an inference key sees only its own usage, and naming another key is 403", async () => {
    const s = await prepare()
    const d = await summary(`?from=${dayOf(daysAgo(6))}`, s.inference.secret)
    expect(d.totals.requests).toBe(4)
    expect(d.by_key.map((k) => k.api_key_hash)).toEqual([s.inference.hash])
    const res = await gw().fetch(`/v1/activity/summary?api_key_hash=${s.other.hash}`, { key: s.inference.secret })
    expect(await expectError(res, 403)).toContain("own")
  })

  test("a range longer than a year, or reversed, is a 400 naming from", async () => {
    expect(await expectError(await gw().fetch("/v1/activity/summary?from=2024-01-01&to=2026-01-01"), 400)).toContain("from")
    expect(await expectError(await gw().fetch("/v1/activity/summary?from=2026-01-02&to=2026-01-01"), 400)).toContain("from")
  })
})

describe("GET /v1/generations (the log)", () => {
  interface Page {
    data: Array<{ id: string; api_key_hash: string; total_cost: number; session_id: string | null; status: string }>
    next_cursor: string | null
  }
  const page = async (query: string, key?: string) => {
    const res = await gw().fetch(`/v1/generations${query}`, key === undefined ? {} : { key })
    if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`)
    return (await res.json()) as Page
  }

  test("newest first, keyset pages that neither skip nor repeat a record", async () => {
    await prepare()
    const all = await page("?limit=100")
    expect(all.data).toHaveLength(6)
    expect(all.data.map((g) => g.id)).toEqual([...all.data.map((g) => g.id)].sort().reverse())
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const p: Page = await page(`?limit=2${cursor === null ? "" : `&cursor=${cursor}`}`)
      seen.push(...p.data.map((g) => g.id))
      cursor = p.next_cursor
    } while (cursor !== null)
    expect(seen).toEqual(all.data.map((g) => g.id))
  })

  test("each filter narrows the page: key, model, status, session, min cost, time range", async () => {
    const s = await prepare()
    expect((await page(`?api_key_hash=${s.other.hash}`)).data).toHaveLength(2)
    expect((await page("?model=demo/byok")).data).toHaveLength(1)
    expect((await page("?provider=my-own-key")).data).toHaveLength(1)
    expect((await page("?status=failed")).data.map((g) => g.status)).toEqual(["failed"])
    expect((await page("?session_id=sess-1")).data.map((g) => g.session_id)).toEqual(["sess-1"])
    expect((await page("?min_cost=0.2")).data.map((g) => g.total_cost).sort()).toEqual([0.25, 0.5, 1])
    // Days are inclusive, as on the activity routes: `to` a day takes that whole day; a time ends before it.
    expect((await page(`?from=${dayOf(daysAgo(3))}&to=${dayOf(daysAgo(3))}`)).data).toHaveLength(1)
    expect((await page(`?from=${dayOf(daysAgo(3))}&to=${dayOf(daysAgo(2))}`)).data).toHaveLength(5)
    expect((await page(`?from=${dayOf(daysAgo(3))}&to=${daysAgo(2, 10)}`)).data).toHaveLength(2)
    expect((await page(`?model=demo/echo&api_key_hash=${s.inference.hash}`)).data).toHaveLength(3)
  })

  test("an inference key lists only its own generations; asking for another key's is 403", async () => {
    const s = await prepare()
    const own = await page("", s.inference.secret)
    expect(own.data.length).toBe(4)
    expect(own.data.every((g) => g.api_key_hash === s.inference.hash)).toBe(true)
    const res = await gw().fetch(`/v1/generations?api_key_hash=${s.other.hash}`, { key: s.inference.secret })
    expect(await expectError(res, 403)).toContain("own")
  })

  test("bad parameters are a 400 naming the parameter", async () => {
    expect(await expectError(await gw().fetch("/v1/generations?limit=500"), 400)).toContain("limit")
    expect(await expectError(await gw().fetch("/v1/generations?cursor=abc"), 400)).toContain("cursor")
    expect(await expectError(await gw().fetch("/v1/generations?status=weird"), 400)).toContain("status")
    expect(await expectError(await gw().fetch("/v1/generations?min_cost=-1"), 400)).toContain("min_cost")
    // A day the calendar does not have, not rolled over to the next month.
    expect(await expectError(await gw().fetch("/v1/generations?from=2026-02-30"), 400)).toContain("from")
    expect(await expectError(await gw().fetch("/v1/activity/summary?to=2026-04-31T10:00:00Z"), 400)).toContain("to")
  })
})

describe("the usage rollup is maintained by the ledger's commit", () => {
  test("its sums equal the generations' sums per day, key, model and provider after many batches", async () => {
    await prepare()
    const keys = ["a", "b", "c"].map((c) => c.repeat(64))
    const models = ["m/one", "m/two"]
    const entries: Array<GenerationEntry> = []
    for (let i = 0; i < 300; i++) {
      entries.push(
        generationEntry({
          keyHash: keys[i % 3] as string,
          userId: "user_roll",
          workspaceId: "ws_roll",
          model: models[i % 2] as string,
          createdAt: daysAgo(i % 4, i % 24),
          totalCost: (i % 7) * 0.0001,
          isByok: i % 11 === 0,
          inputTokens: i,
          outputTokens: i % 13,
          latencyMs: i % 5 === 0 ? null : i * 37,
          status: i % 9 === 0 ? "failed" : "completed",
          error: i % 9 === 0 ? { message: "x", status: 502, providerName: "fake" } : null,
        }),
      )
    }
    await record(entries)
    const [rolled, counted] = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const a = yield* sql<Record<string, number | string>>`SELECT day, key_hash, model, SUM(requests) AS n, SUM(input_tokens) AS i,
          SUM(output_tokens) AS o, SUM(cost_nano + byok_cost_nano) AS c, SUM(latency_count) AS lc,
          SUM(lat_h0 + lat_h1 + lat_h2 + lat_h3 + lat_h4 + lat_h5 + lat_h6 + lat_h7) AS hc,
          SUM(CASE WHEN status_code = 502 THEN requests ELSE 0 END) AS e
          FROM usage_daily WHERE workspace_id = 'ws_roll' GROUP BY day, key_hash, model ORDER BY day, key_hash, model`
        const b = yield* sql<Record<string, number | string>>`SELECT substr(created_at, 1, 10) AS day, key_hash, model, COUNT(*) AS n,
          SUM(input_tokens) AS i, SUM(output_tokens) AS o, SUM(total_cost_nano) AS c,
          SUM(CASE WHEN latency_ms IS NULL THEN 0 ELSE 1 END) AS lc, SUM(CASE WHEN latency_ms IS NULL THEN 0 ELSE 1 END) AS hc,
          SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS e
          FROM generations WHERE workspace_id = 'ws_roll' GROUP BY substr(created_at, 1, 10), key_hash, model ORDER BY 1, 2, 3`
        return [a, b] as const
      }).pipe(Effect.orDie),
    )
    const norm = (rows: ReadonlyArray<Record<string, number | string>>) => rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, String(v)])))
    expect(rolled.length).toBe(12)
    expect(norm(rolled)).toEqual(norm(counted))
    // The two coarser rollups hold the same sums (over keys; over models and providers).
    const [fine, byModel, byKey] = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const q = (table: string) =>
          sql<Record<string, number | string>>`SELECT day, status_code, SUM(requests) AS n, SUM(cost_nano) AS c, SUM(byok_cost_nano) AS b,
            SUM(input_tokens) AS i, SUM(lat_h0 + lat_h3 + lat_h7) AS h FROM ${sql(table)} WHERE workspace_id = 'ws_roll'
            GROUP BY day, status_code ORDER BY day, status_code`
        return [yield* q("usage_daily"), yield* q("usage_daily_models"), yield* q("usage_daily_keys")] as const
      }).pipe(Effect.orDie),
    )
    expect(fine.length).toBeGreaterThan(4)
    expect(norm(byModel)).toEqual(norm(fine))
    expect(norm(byKey)).toEqual(norm(fine))
  })
})
