/**
 * The fusion plugin through the server, on the three client formats: the answer is the request's
 * model's, its record says `router: "fusion"`, and each inner record's `parent_generation_id` is
 * the answer's `x-generation-id`; every panelist failing is a 502 in the format's envelope.
 *
 * Needs the route to build the plugin over inner calls and to keep the id the stage made
 * (src/pipeline/route.ts: `fusion: makeFusionPlugin(…)`, `prepared.generationId ?? newGenerationId()`).
 * Skipped until the merge wires that in (the fusion branch leaves route.ts alone): then drop `.skip`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startMockUpstream } from "../../scripts/mock-upstream.js"
import { TAG } from "../routing/helpers.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { fusionCatalog, PRESETS } from "../tools/support.js"

const mock = await startMockUpstream({ tokens: 1 })
let gw: TestGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  gw = await startTestGateway({ catalog: fusionCatalog(mock, PRESETS) })
})
afterAll(async () => {
  await gw?.stop()
  await mock.stop()
})

type Format = "responses" | "chat" | "messages"
const FORMATS: ReadonlyArray<Format> = ["responses", "chat", "messages"]
const PATHS: Record<Format, string> = { responses: "/v1/responses", chat: "/v1/chat/completions", messages: "/v1/messages" }

const ask = (format: Format, plugin: Record<string, unknown>) => {
  const plugins = [{ id: "fusion", ...plugin }]
  const messages = [{ role: "user", content: "What is the capital of France?" }]
  const json =
    format === "responses"
      ? { model: "test/final", input: messages, plugins }
      : format === "chat"
        ? { model: "test/final", messages, plugins }
        : { model: "test/final", max_tokens: 64, messages, plugins }
  return gw.fetch(PATHS[format], { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
}

const generation = async (id: string) => {
  const res = await gw.fetch(`/v1/generation?id=${id}`)
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Record<string, unknown> }).data
}

describe("the fusion plugin through the server", () => {
  for (const format of FORMATS) {
    test(`${format}: answered by the request's model; router fusion; each inner record's parent is the answer's generation`, async () => {
      const from = mock.requests.length
      const res = await ask(format, { analysis_models: ["test/a", "test/b"], model: "test/judge", tools: [] })
      const text = await res.text()
      expect(res.status).toBe(200)
      expect(text).toContain("The final answer.")
      const sent = mock.requests.slice(from)
      expect(sent.map((r) => r.headers[TAG]).sort()).toEqual(["pa", "pb", "pfinal", "pjudge"])
      const final = sent.find((r) => r.headers[TAG] === "pfinal")
      expect(JSON.stringify(final?.body)).toContain("Answer B: Paris, on the Seine.")

      const id = res.headers.get("x-generation-id") as string
      const outer = await generation(id)
      expect(outer["router"]).toBe("fusion")
      expect(outer["parent_generation_id"]).toBeNull()
      expect(outer["model"]).toBe("test/final")
      if (format === "responses") {
        const body = JSON.parse(text) as { service_metadata: { pipeline: ReadonlyArray<{ name: string; data: { generations: ReadonlyArray<string> } }> } }
        const entry = body.service_metadata.pipeline.find((e) => e.name === "fusion")
        expect(entry?.data.generations).toHaveLength(3)
        for (const inner of entry?.data.generations ?? []) {
          const record = await generation(inner)
          expect(record["parent_generation_id"]).toBe(id)
          expect(record["total_cost"]).toBeGreaterThan(0)
        }
      }
    })
  }

  test("every panelist failing is a 502 in the format's envelope; the model is not called", async () => {
    const from = mock.requests.length
    const res = await ask("chat", { analysis_models: ["test/fail"], model: "test/judge" })
    expect(res.status).toBe(502)
    const body = (await res.json()) as { error: { code: number; message: string; metadata: Record<string, unknown> } }
    expect(body.error.code).toBe(502)
    expect(body.error.metadata["failure_reason"]).toBe("all_panels_failed")
    expect(mock.requests.slice(from).map((r) => r.headers[TAG])).toEqual(["pfail"])
  })

  test("enabled: false: served as a plain request", async () => {
    const from = mock.requests.length
    const res = await ask("responses", { enabled: false, analysis_models: ["test/a"] })
    expect(res.status).toBe(200)
    expect(mock.requests.slice(from).map((r) => r.headers[TAG])).toEqual(["pfinal"])
    expect((await generation(res.headers.get("x-generation-id") as string))["router"]).toBeNull()
  })
})
