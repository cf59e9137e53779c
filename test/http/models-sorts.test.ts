/**
 * The sorts and filters the official SDK (`@openrouter/sdk`, pinned) offers on `models.list`, from
 * the data the gateway has: `most-popular` (requests served in 30 days) and `top-weekly` (tokens in
 * 7) from the ledger's usage rollup, written with each batch; the benchmark sorts and index filters
 * from the config's `scores`; `distillable` from the config. On SQLite and, with
 * GATEWAY_TEST_PG_URL, Postgres.
 */
import { describe, expect, test } from "bun:test"
import type { OpenRouter } from "@openrouter/sdk"
import * as errors from "@openrouter/sdk/models/errors"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile, ModelEntry } from "../../src/config/file.js"
import { useGateway } from "../support/gateway.js"
import { openRouterAt } from "../support/sdk.js"

const EXTRA: Readonly<Record<string, Partial<ModelEntry>>> = {
  "demo/echo": { scores: { coding: 0.8, intelligence: 0.6 }, distillable: true },
  "demo/free": { scores: { coding: 0.4, agentic: 0.9 } },
}
const catalog: ConfigFile = { ...demoCatalog, models: demoCatalog.models.map((m) => ({ ...m, ...EXTRA[m.id] })) as ConfigFile["models"] }
// The listing's text models, in catalog order (embedding and rerank models have listings of their own).
const textModels = demoCatalog.models.filter((m) => m.kind === undefined || m.kind === "chat").map((m) => m.id)
const others = textModels.filter((id) => id !== "demo/echo" && id !== "demo/free")

const gw = useGateway({ catalog })
const sdk = () => openRouterAt(gw())

const ids = async (request: Parameters<OpenRouter["models"]["list"]>[0]) => {
  try {
    return (await sdk().models.list(request)).result.data.map((m) => m.id)
  } catch (e) {
    if (e instanceof errors.ResponseValidationError) throw new Error(`ResponseValidationError: ${e.pretty()}`)
    throw e
  }
}

const ask = async (model: string, input: string) => {
  const res = await gw().fetch("/v1/responses", { method: "POST", json: { model, input } })
  await res.arrayBuffer()
  return res.status
}

describe("GET /v1/models: popularity sorts from the ledger", () => {
  test("most-popular ranks by requests served, top-weekly by tokens processed; failed requests count for neither", async () => {
    // demo/free: three short requests; demo/echo: one long one (it echoes: many tokens both ways).
    for (let i = 0; i < 3; i++) expect(await ask("demo/free", "hi")).toBe(200)
    expect(await ask("demo/echo", "word ".repeat(300))).toBe(200)
    // Failures serve nothing: demo/slow stays at 0 however many it gets.
    for (let i = 0; i < 5; i++) expect(await ask("demo/slow", "[fail:400]")).not.toBe(200)
    await gw().server.drain()
    const popular = await ids({ sort: "most-popular" })
    expect(popular.slice(0, 2)).toEqual(["demo/free", "demo/echo"])
    // Unused models keep catalog order after the used ones, demo/slow among them.
    expect(popular.slice(2)).toEqual(others)
    const weekly = await ids({ sort: "top-weekly" })
    expect(weekly.slice(0, 2)).toEqual(["demo/echo", "demo/free"])
    expect(weekly.slice(2)).toEqual(others)
  })
})

describe("GET /v1/models: benchmark sorts and filters from the config's scores, distillable from the config", () => {
  test("coding, intelligence and agentic sorts put the best-scored first and models without a score last", async () => {
    expect(await ids({ sort: "coding-high-to-low" })).toEqual(["demo/echo", "demo/free", ...others])
    expect(await ids({ sort: "intelligence-high-to-low" })).toEqual(["demo/echo", "demo/free", ...others])
    expect(await ids({ sort: "agentic-high-to-low" })).toEqual(["demo/free", "demo/echo", ...others])
    // No model has a design_arena score: catalog order.
    expect(await ids({ sort: "design-arena-elo-high-to-low" })).toEqual(textModels)
  })

  test("index filters compare the score × 100; distillable reads the config flag", async () => {
    expect(await ids({ minCodingIndex: 50 })).toEqual(["demo/echo"])
    expect(await ids({ maxCodingIndex: 50 })).toEqual(["demo/free"])
    expect(await ids({ minAgenticIndex: 0 })).toEqual(["demo/free"])
    expect(await ids({ distillable: "true" })).toEqual(["demo/echo"])
    expect(await ids({ distillable: "false" })).toEqual(textModels.filter((id) => id !== "demo/echo"))
  })

  test("what the gateway has no data for is a 400 naming it", async () => {
    const e = await sdk()
      .models.list({ minToolSuccessRate: 0.5 })
      .then(() => undefined, (err: unknown) => err)
    expect(e).toBeInstanceOf(errors.BadRequestResponseError)
    expect((e as Error).message).toContain("min_tool_success_rate: not available on this gateway")
  })
})
