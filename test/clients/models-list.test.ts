/**
 * GET /v1/models with each pinned client's `models.list`: the `openai` SDK reads `object` and
 * `owned_by` on every item, the Anthropic SDK (which sends `anthropic-version` and its key in
 * `x-api-key`) pages through `ModelInfo`s by `after_id`, and `@openrouter/sdk` still parses the
 * list with those fields added. The catalog has more than a default Anthropic page (20) of models.
 */
import { describe, expect, test } from "bun:test"
import Anthropic from "@anthropic-ai/sdk"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { useGateway } from "../support/gateway.js"
import { anthropicAt, caught, openaiAt, openRouterAt, validated } from "../support/sdk.js"

const extra: ConfigFile["models"] = Array.from({ length: 22 }, (_, i) => ({
  id: `many/m${String(i).padStart(2, "0")}`,
  context_length: 8_000,
  endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 1, completion: 1 } }],
}))
const catalog: ConfigFile = { ...demoCatalog, models: [...demoCatalog.models, ...extra] }

/** What every listing shows by default: the text models (embedding and rerank ones have their own). */
const textIds = catalog.models.filter((m) => m.kind === undefined || m.kind === "chat").map((m) => m.id)

const gw = useGateway({ catalog })

describe("GET /v1/models with the openai SDK", () => {
  test("models.list reads object: model and owned_by (the id's vendor) on every item", async () => {
    const items = []
    for await (const model of openaiAt(gw()).models.list()) items.push(model)
    expect(items.map((m) => m.id)).toEqual(textIds)
    for (const m of items) {
      expect(m.object).toBe("model")
      expect(m.owned_by).toBe(m.id.split("/")[0])
    }
    expect(items[0]).toMatchObject({ id: "demo/echo", object: "model", created: 1767225600, owned_by: "demo" })
  })
})

describe("GET /v1/models with the Anthropic SDK", () => {
  test("models.list pages through every model by after_id, each a ModelInfo", async () => {
    const items = []
    for await (const model of anthropicAt(gw()).models.list()) items.push(model)
    expect(items.map((m) => m.id)).toEqual(textIds)
    for (const m of items) {
      expect(m.type).toBe("model")
      expect(typeof m.display_name).toBe("string")
      expect(Number.isNaN(Date.parse(m.created_at))).toBe(false)
    }
    expect(items[0]).toMatchObject({ id: "demo/echo", display_name: "Demo echo (offline, scripted)", created_at: "2026-01-01T00:00:00.000Z" })
  })

  test("a page of one at a time, forwards and backwards, and the page's own fields", async () => {
    const client = anthropicAt(gw())
    const first = await client.models.list({ limit: 1 })
    expect(first.data.map((m) => m.id)).toEqual([textIds[0]])
    expect(first.has_more).toBe(true)
    expect(first.first_id).toBe(textIds[0])
    expect(first.last_id).toBe(textIds[0])
    const ones = []
    for await (const model of client.models.list({ limit: 1 })) ones.push(model.id)
    expect(ones).toEqual(textIds)
    const back = []
    for await (const model of client.models.list({ limit: 3, before_id: textIds[7] })) back.push(model.id)
    // Each page in catalog order, the pages from the cursor backwards (first_id is the next before_id).
    expect(back).toEqual([4, 5, 6, 1, 2, 3, 0].map((i) => textIds[i]))
  })

  test("a key that is not one is an AuthenticationError, read from Anthropic's envelope", async () => {
    const e = await caught(anthropicAt(gw(), "sk-gw-v1-nope").models.list())
    expect(e).toBeInstanceOf(Anthropic.AuthenticationError)
    expect((e as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: "error", error: { type: "authentication_error" } })
  })
})

describe("GET /v1/models with @openrouter/sdk", () => {
  test("models.list still validates with object and owned_by on every item", async () => {
    const raw = (await (await gw().fetch("/v1/models")).json()) as { data: ReadonlyArray<Record<string, unknown>> }
    for (const m of raw.data) expect(m).toMatchObject({ object: "model", owned_by: String(m.id).split("/")[0] })
    const page = await validated(openRouterAt(gw()).models.list())
    expect(page.result.data.map((m) => m.id)).toEqual(textIds)
    expect(page.result.data[0].pricing.prompt).toBe("0.000001")
  })
})
