/**
 * The official SDK of this API family (`@openrouter/sdk`, pinned) on `models.listForUser`,
 * `endpoints.listZdrEndpoints`, `generations.submitFeedback` and the workspace budget methods
 * (`listBudgets`, `getBudget`, `setBudget`, `deleteBudget`): every answer passes the SDK's own zod
 * schemas (a missing required key is a `ResponseValidationError`), refusals come back as its typed
 * errors, and what the calls store is read back. On SQLite and, with GATEWAY_TEST_PG_URL, Postgres.
 */
import { describe, expect, test } from "bun:test"
import * as errors from "@openrouter/sdk/models/errors"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { GenerationFeedback } from "../../src/services/GenerationFeedback.js"
import { useGateway } from "../support/gateway.js"
import { openRouterAt, validated } from "../support/sdk.js"

/** The demo catalog with demo/echo's first endpoint (on `fake`) marked zero-data-retention. */
const catalog: ConfigFile = {
  ...demoCatalog,
  models: demoCatalog.models.map((m) => (m.id === "demo/echo" ? { ...m, endpoints: m.endpoints.map((e, i) => (i === 0 ? { ...e, zdr: true } : e)) } : m)) as ConfigFile["models"],
}

const gw = useGateway({ catalog })

const sdk = (apiKey: string = gw().adminKey) => openRouterAt(gw(), apiKey)

const caught = async (p: PromiseLike<unknown>): Promise<unknown> => {
  try {
    await p
  } catch (e) {
    if (e instanceof errors.ResponseValidationError) throw new Error(`ResponseValidationError: ${e.pretty()}`)
    return e
  }
  throw new Error("expected the call to fail")
}

const statusOf = (e: unknown) => (e as errors.OpenRouterError).statusCode

const inferenceKey = async () => (await sdk().apiKeys.create({ requestBody: { name: "reader" } })).key

/** A generation of the admin key: its id from the X-Generation-Id header. */
const generation = async (key = gw().adminKey) => {
  const res = await gw().fetch("/v1/responses", { method: "POST", key, json: { model: "demo/echo", input: "rate me" } })
  expect(res.status).toBe(200)
  await res.arrayBuffer()
  return res.headers.get("x-generation-id")!
}

describe("models.listForUser (GET /v1/models/user)", () => {
  test("validates with the SDK's default page and lists the catalog the key may call", async () => {
    const page = await validated(sdk().models.listForUser({ bearer: gw().adminKey }))
    // The text models (the demo's embedding and rerank models are listed under /v1/embeddings/models).
    const textModels = demoCatalog.models.filter((m) => m.kind === undefined || m.kind === "chat").map((m) => m.id)
    expect(page.result.data.map((m) => m.id)).toEqual(textModels)
    expect(page.result.totalCount).toBe(textModels.length)
    const small = await validated(sdk().models.listForUser({ bearer: await inferenceKey() }, { limit: 2 }))
    expect(small.result.data).toHaveLength(2)
    expect(small.result.links.next).not.toBeNull()
  })

  test("an unknown query parameter is a 400 naming it", async () => {
    const res = await gw().fetch("/v1/models/user?sort=newest")
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("sort")
  })
})

describe("endpoints.listZdrEndpoints (GET /v1/endpoints/zdr)", () => {
  test("validates and lists exactly the zero-data-retention endpoints", async () => {
    const { data } = await validated(sdk(await inferenceKey()).endpoints.listZdrEndpoints())
    expect(data.map((e) => `${e.modelName} ${e.tag}`)).toEqual(["Demo echo (offline, scripted) fake"])
    expect(data[0]!.pricing.prompt).toBe("0.000001")
  })
})

describe("generations.submitFeedback (POST /v1/generation/feedback)", () => {
  test("validates, and the feedback is stored with its category, comment, user and key", async () => {
    const id = await generation()
    const res = await validated(
      sdk().generations.submitFeedback({ submitGenerationFeedbackRequest: { generationId: id, category: "incorrect_response", comment: "wrong sum" } }),
    )
    expect(res.data.success).toBe(true)
    const stored = await gw().server.runtime.runPromise(Effect.flatMap(GenerationFeedback, (f) => f.of(id)))
    expect(stored.map((r) => [r.category, r.comment])).toEqual([["incorrect_response", "wrong sum"]])
  })

  test("an unknown category is a 400 naming the field and the values; an unknown or another key's generation a 404", async () => {
    const id = await generation()
    const bad = await gw().fetch("/v1/generation/feedback", { method: "POST", json: { generation_id: id, category: "slow" } })
    expect(bad.status).toBe(400)
    const message = ((await bad.json()) as { error: { message: string } }).error.message
    expect(message).toContain("category")
    expect(message).toContain("latency, incoherence, incorrect_response")
    const missing = await caught(sdk().generations.submitFeedback({ submitGenerationFeedbackRequest: { generationId: "gen-nope", category: "other" } }))
    expect(missing).toBeInstanceOf(errors.NotFoundResponseError)
    // An inference key gives feedback on its own generations only.
    const other = await inferenceKey()
    const theirs = await caught(sdk(other).generations.submitFeedback({ submitGenerationFeedbackRequest: { generationId: id, category: "other" } }))
    expect(statusOf(theirs)).toBe(404)
    const own = await generation(other)
    expect((await validated(sdk(other).generations.submitFeedback({ submitGenerationFeedbackRequest: { generationId: own, category: "latency" } }))).data.success).toBe(true)
    const count = await gw().server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM generation_feedback WHERE generation_id = ${id}`),
    )
    expect(Number(count[0]!.n)).toBe(0)
  })
})

describe("workspace budgets (GET/PUT/DELETE /v1/workspaces/{id}/budgets/{interval}, GET …/budgets)", () => {
  test("set, get and list validate; usage is the workspace's spend in the window; delete removes it", async () => {
    const client = sdk()
    const ws = await validated(client.workspaces.create({ createWorkspaceRequest: { name: "Budgeted", slug: "budgeted" } }))
    const ref = ws.data.slug
    expect((await validated(client.workspaces.listBudgets({ workspaceRef: ref }))).data).toEqual([])
    const set = await validated(
      client.workspaces.setBudget({ workspaceRef: ref, interval: "monthly", upsertWorkspaceBudgetRequest: { limitUsd: 25, includeByokInBudgets: true } }),
    )
    expect(set.data).toMatchObject({ workspaceId: ws.data.id, limitUsd: 25, resetInterval: "monthly" })
    expect(set.includeByokInBudgets).toBe(true)
    await validated(client.workspaces.setBudget({ workspaceRef: ref, interval: "lifetime", upsertWorkspaceBudgetRequest: { limitUsd: 100 } }))
    // Setting it again changes the limit of the same budget.
    const again = await validated(client.workspaces.setBudget({ workspaceRef: ref, interval: "monthly", upsertWorkspaceBudgetRequest: { limitUsd: 30 } }))
    expect(again.data.id).toBe(set.data.id)
    expect(again.data.limitUsd).toBe(30)
    expect(again.includeByokInBudgets).toBe(true)

    // A key of the workspace spends; the budget reports it.
    const key = (await client.apiKeys.create({ requestBody: { name: "in budgeted", workspaceId: ws.data.id } })).key
    await generation(key)
    await gw().server.drain()
    const one = await validated(client.workspaces.getBudget({ workspaceRef: ref, interval: "monthly" }))
    expect(one.data.limitUsd).toBe(30)
    const raw = (await (await gw().fetch(`/v1/workspaces/${ref}/budgets/monthly`)).json()) as { data: { usage_usd: number; remaining_usd: number; resets_at: string } }
    expect(raw.data.usage_usd).toBeGreaterThan(0)
    expect(raw.data.remaining_usd).toBeCloseTo(30 - raw.data.usage_usd, 9)
    expect(raw.data.resets_at).toMatch(/-01T00:00:00\.000Z$/)

    const list = await validated(client.workspaces.listBudgets({ workspaceRef: ws.data.id }))
    expect(list.data.map((b) => [b.resetInterval, b.limitUsd])).toEqual([
      ["monthly", 30],
      [null, 100],
    ])
    expect((await validated(client.workspaces.deleteBudget({ workspaceRef: ref, interval: "lifetime" }))).deleted).toBe(true)
    expect(statusOf(await caught(client.workspaces.getBudget({ workspaceRef: ref, interval: "lifetime" })))).toBe(404)
    expect(statusOf(await caught(client.workspaces.deleteBudget({ workspaceRef: ref, interval: "lifetime" })))).toBe(404)
  })

  test("a bad interval or limit is a 400 naming it and changes nothing; an inference key gets 403; another user's workspace 404", async () => {
    const client = sdk()
    await validated(client.workspaces.create({ createWorkspaceRequest: { name: "Strict", slug: "strict" } }))
    const badInterval = await gw().fetch("/v1/workspaces/strict/budgets/hourly", { method: "PUT", json: { limit_usd: 1 } })
    expect(badInterval.status).toBe(400)
    expect(((await badInterval.json()) as { error: { message: string } }).error.message).toContain("daily, weekly, monthly, lifetime")
    const negative = await gw().fetch("/v1/workspaces/strict/budgets/daily", { method: "PUT", json: { limit_usd: -1 } })
    expect(negative.status).toBe(400)
    expect(((await negative.json()) as { error: { message: string } }).error.message).toContain("limit_usd")
    // Below a nano-dollar a positive budget was stored as 0: a workspace that could spend nothing.
    const subNano = await gw().fetch("/v1/workspaces/strict/budgets/daily", { method: "PUT", json: { limit_usd: 1e-10 } })
    expect(subNano.status).toBe(400)
    expect(((await subNano.json()) as { error: { message: string } }).error.message).toContain("limit_usd: a positive limit must be at least 0.000000001")
    expect((await validated(client.workspaces.listBudgets({ workspaceRef: "strict" }))).data).toEqual([])
    const denied = await caught(sdk(await inferenceKey()).workspaces.listBudgets({ workspaceRef: "strict" }))
    expect(statusOf(denied)).toBe(403)
    expect(statusOf(await caught(client.workspaces.getBudget({ workspaceRef: "nobody-s", interval: "daily" })))).toBe(404)
  })
})
