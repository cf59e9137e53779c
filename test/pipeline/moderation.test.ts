/**
 * The moderation plugin end to end against the mock upstream's `/v1/moderations`, on the three
 * client formats: flagged → 403 with the categories and the elided input, and the model never
 * called; clean → served, the call charged; `enabled: false`; enforce; fail closed (503,
 * Retry-After); not configured → 400.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile, ModerationConfig } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { costAt, endpoint, mockProvider, model } from "../routing/helpers.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

type Gw = InProcessGateway & { stop: () => Promise<void> }
let mock: MockUpstream
let plain: Gw
let priced: Gw
let enforced: Gw
let failing: Gw

const catalog = (moderation: ModerationConfig | undefined, modHeaders: Record<string, string> = {}): ConfigFile => ({
  providers: [mockProvider(mock, "p-model"), mockProvider(mock, "mod", modHeaders)],
  models: [model("test/model", endpoint("p-model", 1, 2))],
  ...(moderation === undefined ? {} : { plugins: { moderation } }),
})

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  plain = await startInProcessGateway({ catalog: catalog(undefined) })
  priced = await startInProcessGateway({ catalog: catalog({ provider: "mod", model: "omni-moderation-latest", pricing: { request: 0.01 } }) })
  enforced = await startInProcessGateway({ catalog: catalog({ provider: "mod", model: "omni-moderation-latest", enforce: true }) })
  failing = await startInProcessGateway({ catalog: catalog({ provider: "mod", model: "omni-moderation-latest", timeout_ms: 300 }, { "x-mock-error": "hang" }) })
})
afterAll(async () => {
  for (const gw of [plain, priced, enforced, failing]) await gw?.stop()
  await mock?.stop()
})

const ask = async (gw: Gw, format: Format, text: string, plugins?: ReadonlyArray<Record<string, unknown>>) => {
  const before = mock.requests.length
  const json = bodyIn(format, "test/model", text, plugins === undefined ? {} : { plugins })
  const res = await gw.fetch(PATHS[format], { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
  const body = (await res.json()) as Record<string, unknown>
  const seen = mock.requests.slice(before)
  return {
    res,
    body,
    moderationCalls: seen.filter((r) => r.path === "/v1/moderations"),
    modelCalls: seen.filter((r) => r.path !== "/v1/moderations"),
  }
}

const ON = [{ id: "moderation" }]

describe("moderation", () => {
  for (const format of FORMATS) {
    test(`${format}: flagged → 403 with reasons, flagged_input, provider and model; the model is not called`, async () => {
      const a = await ask(priced, format, "please FLAG:violence now", ON)
      expect(a.res.status).toBe(403)
      expect(a.modelCalls).toHaveLength(0)
      expect(a.moderationCalls).toHaveLength(1)
      expect(a.moderationCalls[0]?.body).toEqual({ model: "omni-moderation-latest", input: ["please FLAG:violence now"] })
      const error = a.body["error"] as { message: string; metadata?: Record<string, unknown>; type?: string }
      expect(error.message).toContain("Moderation flagged the request: violence")
      if (format !== "messages") {
        expect((error as unknown as { code: number }).code).toBe(403)
        expect(error.metadata).toEqual({
          reasons: ["violence"],
          flagged_input: "please FLAG:violence now",
          provider_name: "mod",
          model_slug: "omni-moderation-latest",
        })
        const meta = a.body["service_metadata"] as { pipeline: Array<{ type: string; name: string }> }
        expect(meta.pipeline).toContainEqual(expect.objectContaining({ type: "guardrail", name: "moderation" }))
      } else {
        expect(a.body["type"]).toBe("error")
      }
    })

    test(`${format}: clean → served; the call is charged with the generation`, async () => {
      const a = await ask(priced, format, "a harmless question", ON)
      expect(a.res.status).toBe(200)
      expect(a.moderationCalls).toHaveLength(1)
      expect(a.modelCalls).toHaveLength(1)
      // Nothing flagged, nothing changed: no pipeline entry (docs/plugins.md).
      const pipeline = (a.body["service_metadata"] as { pipeline?: Array<{ name: string }> } | undefined)?.pipeline ?? []
      expect(pipeline.filter((e) => e.name === "moderation")).toEqual([])
      if (format === "responses") {
        const usage = a.body["usage"] as { cost: number }
        expect(usage.cost).toBeCloseTo(costAt(1, 2) + 0.01, 9)
        const id = a.res.headers.get("x-generation-id")
        let cost: number | undefined
        for (let i = 0; i < 100 && cost === undefined; i++) {
          const res = await priced.fetch(`/v1/generation?id=${id}`)
          if (res.status === 200) cost = ((await res.json()) as { data: { total_cost: number } }).data.total_cost
          else await Bun.sleep(50)
        }
        expect(cost).toBeCloseTo(costAt(1, 2) + 0.01, 9)
      }
    })

    test(`${format}: enabled: false skips it; enforce runs it anyway`, async () => {
      const off = await ask(priced, format, "FLAG:hate", [{ id: "moderation", enabled: false }])
      expect(off.res.status).toBe(200)
      expect(off.moderationCalls).toHaveLength(0)
      const forced = await ask(enforced, format, "FLAG:hate", [{ id: "moderation", enabled: false }])
      expect(forced.res.status).toBe(403)
      expect(forced.modelCalls).toHaveLength(0)
      const without = await ask(enforced, format, "FLAG:hate")
      expect(without.res.status).toBe(403)
    })

    test(`${format}: a moderation API that does not answer fails the request closed (503, Retry-After)`, async () => {
      const a = await ask(failing, format, "hello", ON)
      expect(a.res.status).toBe(503)
      expect(a.res.headers.get("retry-after")).not.toBeNull()
      expect(a.modelCalls).toHaveLength(0)
      expect(JSON.stringify(a.body)).toContain("did not answer within 300 ms")
    })

    test(`${format}: not configured → 400`, async () => {
      const a = await ask(plain, format, "hello", ON)
      expect(a.res.status).toBe(400)
      expect(JSON.stringify(a.body)).toContain("moderation is not configured on this gateway")
    })
  }

  test("a blocked request keeps its generation id and record, charged the moderation call", async () => {
    const a = await ask(priced, "chat", "FLAG:violence", ON)
    expect(a.res.status).toBe(403)
    const id = a.res.headers.get("x-generation-id")
    expect(id).toMatch(/^gen-/)
    let record: { status: string; total_cost: number; provider_name: string; upstream_model: string; model: string } | undefined
    for (let i = 0; i < 100 && record === undefined; i++) {
      const res = await priced.fetch(`/v1/generation?id=${id}`)
      if (res.status === 200) record = ((await res.json()) as { data: NonNullable<typeof record> }).data
      else await Bun.sleep(50)
    }
    expect(record).toMatchObject({ status: "failed", total_cost: 0.01, provider_name: "mod", upstream_model: "omni-moderation-latest", model: "test/model" })
  })

  test("flagged_input is at most 100 characters, the middle elided", async () => {
    const text = `${"a".repeat(200)} FLAG:self-harm ${"z".repeat(200)}`
    const a = await ask(priced, "responses", text, ON)
    const flagged = (a.body["error"] as { metadata: { flagged_input: string } }).metadata.flagged_input
    expect(flagged.length).toBe(100)
    expect(flagged.startsWith("aaaa")).toBe(true)
    expect(flagged.endsWith("zzzz")).toBe(true)
    expect(flagged).toContain("…")
  })

  test("the config names a known provider", async () => {
    const { parseConfigFile } = await import("../../src/config/Config.js")
    const bad = parseConfigFile("t.json", JSON.stringify({ ...catalog(undefined), plugins: { moderation: { provider: "nope", model: "m" } } }))
    expect(bad._tag).toBe("Left")
    expect(JSON.stringify(bad)).toContain("plugins.moderation.provider: unknown provider")
    const unknown = parseConfigFile("t.json", JSON.stringify({ ...catalog(undefined), plugins: { moderation: { provider: "mod", model: "m", nope: 1 } } }))
    expect(unknown._tag).toBe("Left")
  })
})
