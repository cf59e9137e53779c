/**
 * Presets in requests (`@preset/slug`, `vendor/model@preset/slug`, the `preset` field) and the
 * workspace's routing defaults (`default_text_model`, `default_provider_sort`), end to end.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, ok, refused, startGateway, TAG } from "./helpers.js"

let mock: MockUpstream
let gw: Gateway

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startGateway(
    catalogOf(
      ["pa", "pb", "near-a", "near-b"].map((id) => mockProvider(mock, id)),
      [
        model("t/a", endpoint("pa", 1, 1)),
        model("t/b", endpoint("pb", 2, 2)),
        // Within 1 % of each other: the default draw is close to a coin toss, `sort: price` is not.
        model("t/near", endpoint("near-b", 1.01, 1.01), endpoint("near-a", 1, 1)),
      ],
    ),
  )
})

afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

const createVersion = async (slug: string, json: Record<string, unknown>) => {
  const res = await gw.fetch(`/v1/presets/${slug}/responses`, { method: "POST", json })
  expect(res.status).toBe(200)
}

interface ChatBody {
  readonly model: string
  readonly temperature?: number
  readonly max_tokens?: number
  readonly messages: ReadonlyArray<{ role: string; content: unknown }>
}

/** The body the mock upstream received for the last request. */
const lastUpstream = () => {
  const last = mock.requests[mock.requests.length - 1]!
  return { provider: last.headers[TAG], body: last.body as ChatBody }
}

describe("presets in requests", () => {
  beforeAll(async () => {
    await createVersion("brief", { model: "t/a", temperature: 0.5, max_output_tokens: 50, instructions: "Be brief." })
  })

  test("@preset/slug: the preset's model and config, its system prompt as instructions", async () => {
    const answer = await ok(gw, { model: "@preset/brief" })
    expect(answer.model).toBe("t/a")
    expect(answer.meta.requested).toBe("@preset/brief")
    expect(answer.meta.strategy).toContain("preset")
    const { provider, body } = lastUpstream()
    expect(provider).toBe("pa")
    expect(body.temperature).toBe(0.5)
    expect(body.max_tokens).toBe(50)
    expect(body.messages[0]).toEqual({ role: "system", content: "Be brief." })
  })

  test("vendor/model@preset/slug: that model with the preset's config", async () => {
    const answer = await ok(gw, { model: "t/b@preset/brief" })
    expect(answer.model).toBe("t/b")
    const { provider, body } = lastUpstream()
    expect(provider).toBe("pb")
    expect(body.temperature).toBe(0.5)
  })

  test("the preset field: the preset's model when the request names none, the request's model otherwise", async () => {
    expect((await ok(gw, { preset: "brief" })).model).toBe("t/a")
    expect((await ok(gw, { preset: "brief", model: "t/b" })).model).toBe("t/b")
    expect(lastUpstream().body.temperature).toBe(0.5)
  })

  test("request fields override the preset's, key by key; the request's instructions win", async () => {
    await ok(gw, { model: "@preset/brief", temperature: 0.9, instructions: "Be thorough." })
    const { body } = lastUpstream()
    expect(body.temperature).toBe(0.9)
    expect(body.max_tokens).toBe(50)
    expect(body.messages[0]).toEqual({ role: "system", content: "Be thorough." })
  })

  test("the designated version is the latest", async () => {
    await createVersion("moving", { model: "t/a" })
    expect((await ok(gw, { model: "@preset/moving" })).model).toBe("t/a")
    await createVersion("moving", { model: "t/b", temperature: 0.1 })
    // The preset cache of this process is evicted by the write.
    expect((await ok(gw, { model: "@preset/moving" })).model).toBe("t/b")
    expect(lastUpstream().body.temperature).toBe(0.1)
  })

  test("an unknown preset is 404 naming it, in every form", async () => {
    for (const json of [{ model: "@preset/nowhere" }, { model: "t/a@preset/nowhere" }, { model: "t/a", preset: "nowhere" }]) {
      const error = await refused(gw, json)
      expect(error.status).toBe(404)
      expect(error.message).toContain('"nowhere"')
    }
  })

  test("two different presets in model and preset is 400", async () => {
    const error = await refused(gw, { model: "@preset/brief", preset: "moving" })
    expect(error.status).toBe(400)
  })
})

describe("workspace routing defaults", () => {
  /** A key in a new workspace created with these settings. */
  const keyInWorkspace = async (settings: Record<string, unknown>) => {
    const slug = `ws-${crypto.randomUUID().slice(0, 8)}`
    const ws = await gw.fetch("/v1/workspaces", { method: "POST", json: { name: slug, slug, ...settings } })
    expect(ws.status).toBe(201)
    const { data } = (await ws.json()) as { data: { id: string } }
    const key = await gw.fetch("/v1/keys", { method: "POST", json: { name: "router", workspace_id: data.id } })
    expect(key.status).toBe(201)
    return ((await key.json()) as { key: string }).key
  }

  test("default_text_model is used when the request names no model", async () => {
    const key = await keyInWorkspace({ default_text_model: "t/b" })
    const answer = await ok(gw, {}, key)
    expect(answer.model).toBe("t/b")
    expect((await ok(gw, { model: "t/a" }, key)).model).toBe("t/a")
  })

  test("default_provider_sort applies when the request gives no sort", async () => {
    const sorted = await keyInWorkspace({ default_provider_sort: "price" })
    for (let i = 0; i < 15; i++) {
      const answer = await ok(gw, { model: "t/near" }, sorted)
      expect(answer.servedBy).toBe("near-a")
      expect(answer.meta.strategy).toBe("sort:price")
    }
    // Without the workspace default the draw spreads the near-equal endpoints.
    const seen = new Set<string>()
    for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await ok(gw, { model: "t/near" })).servedBy!)
    expect(seen).toEqual(new Set(["near-a", "near-b"]))
  })
})
