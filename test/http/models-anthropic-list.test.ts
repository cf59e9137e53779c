/**
 * GET /v1/models with `anthropic-version`: Anthropic's list of `ModelInfo`s and its paging
 * (`limit` 1 to 1000, default 20; `after_id`; `before_id`), the key in `x-api-key` or a bearer,
 * and every refusal in the Messages format's envelope. Without the header the list is the
 * catalog listing it always was.
 */
import { describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { expectError, metricsAuth, useInProcessGateway } from "../support/gateway.js"

const extra: ConfigFile["models"] = Array.from({ length: 25 }, (_, i) => ({
  id: `many/m${String(i).padStart(2, "0")}`,
  context_length: 8_000,
  endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 1, completion: 1 } }],
}))
const catalog: ConfigFile = { ...demoCatalog, models: [...demoCatalog.models, ...extra] }
const textIds = catalog.models.filter((m) => m.kind === undefined || m.kind === "chat").map((m) => m.id)

const gw = useInProcessGateway({ catalog })

interface Page {
  readonly data: ReadonlyArray<{ readonly id: string; readonly type: string }>
  readonly has_more: boolean
  readonly first_id: string | null
  readonly last_id: string | null
}

const ANTHROPIC = { "anthropic-version": "2023-06-01" }

/** The list in Anthropic's shape, the key in `x-api-key` as the Anthropic SDK sends it. */
const list = (query = "", key: string = gw().adminKey) => gw().fetch(`/v1/models${query}`, { key: null, headers: { ...ANTHROPIC, "x-api-key": key } })

const page = async (query = ""): Promise<Page> => {
  const res = await list(query)
  expect(res.status).toBe(200)
  return (await res.json()) as Page
}

/** A refusal in the Messages envelope: `{type: "error", error: {type, message}}`; returns the message. */
const refusal = async (res: Response, status: number, type: string): Promise<string> => {
  const body = (await res.json()) as { type?: string; error?: { type?: string; message?: string } }
  expect({ status: res.status, body }).toMatchObject({ status, body: { type: "error", error: { type } } })
  return body.error?.message ?? ""
}

describe("GET /v1/models with anthropic-version: the page", () => {
  test("the default page is the first 20 models, with has_more, first_id and last_id", async () => {
    const first = await page()
    expect(first.data.map((m) => m.id)).toEqual(textIds.slice(0, 20))
    expect(first.data.every((m) => m.type === "model")).toBe(true)
    expect(first).toMatchObject({ has_more: true, first_id: textIds[0], last_id: textIds[19] })
    expect(Object.keys(first).sort()).toEqual(["data", "first_id", "has_more", "last_id"])
  })

  test("after_id continues after that model; the last page has has_more false", async () => {
    const next = await page(`?after_id=${encodeURIComponent(textIds[19])}`)
    expect(next.data.map((m) => m.id)).toEqual(textIds.slice(20))
    expect(next).toMatchObject({ has_more: false, first_id: textIds[20], last_id: textIds[textIds.length - 1] })
  })

  test("before_id is the page just before that model, in catalog order", async () => {
    const before = await page(`?limit=3&before_id=${encodeURIComponent(textIds[10])}`)
    expect(before.data.map((m) => m.id)).toEqual(textIds.slice(7, 10))
    expect(before.has_more).toBe(true)
    const start = await page(`?limit=5&before_id=${encodeURIComponent(textIds[2])}`)
    expect(start.data.map((m) => m.id)).toEqual(textIds.slice(0, 2))
    expect(start.has_more).toBe(false)
  })

  test("limit 1 and limit 1000 are served; past the end is an empty page with null ids", async () => {
    expect((await page("?limit=1")).data.map((m) => m.id)).toEqual([textIds[0]])
    const all = await page("?limit=1000")
    expect(all.data.map((m) => m.id)).toEqual(textIds)
    expect(all.has_more).toBe(false)
    const after = await page(`?after_id=${encodeURIComponent(textIds[textIds.length - 1])}`)
    expect(after).toEqual({ data: [], has_more: false, first_id: null, last_id: null })
  })

  test("is counted in GET /v1/models's metrics, as the listing is", async () => {
    const ok = async () => {
      const text = await (await gw().fetch("/metrics", { key: null, headers: metricsAuth })).text()
      const line = text.split("\n").find((l) => l.startsWith('gateway_http_requests_total{route="/v1/models",method="GET",status="200"}'))
      return Number(line?.split(" ")[1] ?? 0)
    }
    const before = await ok()
    await page("?limit=1")
    expect(await ok()).toBe(before + 1)
  })

  test("a bearer key is accepted too", async () => {
    const res = await gw().fetch("/v1/models?limit=2", { headers: ANTHROPIC })
    expect(res.status).toBe(200)
    const body = (await res.json()) as Page
    expect(body.data.map((m) => [m.id, m.type])).toEqual(textIds.slice(0, 2).map((id) => [id, "model"]))
    expect(body.has_more).toBe(true)
  })
})

describe("GET /v1/models with anthropic-version: refusals in the Messages envelope", () => {
  test("limit 0, 1001 or not an integer is a 400 naming limit", async () => {
    for (const limit of ["0", "1001", "abc", "2.5", ""]) {
      expect(await refusal(await list(`?limit=${limit}`), 400, "invalid_request_error")).toContain("limit")
    }
  })

  test("an after_id or before_id the catalog does not have is a 400 naming it", async () => {
    expect(await refusal(await list("?after_id=nobody%2Fnothing"), 400, "invalid_request_error")).toContain("after_id")
    expect(await refusal(await list("?before_id=nobody%2Fnothing"), 400, "invalid_request_error")).toContain("before_id")
  })

  test("an unknown query parameter is a 400 naming it", async () => {
    expect(await refusal(await list("?offset=2"), 400, "invalid_request_error")).toContain("offset")
  })

  test("a bad x-api-key or none is a 401 in Anthropic's envelope", async () => {
    expect(await refusal(await list("", "sk-gw-v1-nope"), 401, "authentication_error")).toBeTruthy()
    const none = await gw().fetch("/v1/models", { key: null, headers: ANTHROPIC })
    await refusal(none, 401, "authentication_error")
  })
})

describe("GET /v1/models without anthropic-version", () => {
  test("is the catalog listing, with object and owned_by on each model; x-api-key alone is not a key there", async () => {
    const res = await gw().fetch("/v1/models?limit=2")
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: ReadonlyArray<Record<string, unknown>>; total_count: number }
    expect(body.total_count).toBe(textIds.length)
    expect(body.data[0]).toMatchObject({ id: "demo/echo", object: "model", owned_by: "demo", canonical_slug: "demo/echo" })
    await expectError(await gw().fetch("/v1/models", { key: null, headers: { "x-api-key": gw().adminKey } }), 401)
  })
})
