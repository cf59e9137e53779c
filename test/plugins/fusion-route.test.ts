/**
 * The fusion plugin through the server, on the three client formats: the answer is the request's
 * model's, its record says `router: "fusion"`, and each inner record's `parent_generation_id` is
 * the answer's `x-generation-id`; every panelist failing is a 502 in the format's envelope.
 * The plugin's model calls count in `server.max_upstream_calls` with the server-tool loop's turns.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startMockUpstream } from "../../scripts/mock-upstream.js"
import { endpoint, mockProvider, model, TAG } from "../routing/helpers.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { fusionCatalog, PRESETS } from "../tools/support.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

const mock = await startMockUpstream({ tokens: 1 })
let gw: InProcessGateway & { stop: () => Promise<void> }
beforeAll(async () => {
  const base = fusionCatalog(mock, PRESETS)
  // A panelist that answers after a second: a client leaving before it must not see its judge called.
  gw = await startInProcessGateway({
    catalog: {
      ...base,
      providers: [...base.providers, mockProvider(mock, "pslow", { "x-mock-ttft-ms": "1000", "x-mock-tokens": "1" })],
      models: [...base.models, model("test/slow", endpoint("pslow", 1, 2))],
    },
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock.stop()
})

const ask = (format: Format, plugin: Record<string, unknown>) => {
  const plugins = [{ id: "fusion", ...plugin }]
  const json = bodyIn(format, "test/final", [{ role: "user", content: "What is the capital of France?" }], { plugins })
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

describe("the fusion plugin beside server tools", () => {
  test("its panel's and judge's calls count in server.max_upstream_calls with the loop's turns", async () => {
    const base = fusionCatalog(mock, PRESETS)
    const tight = await startInProcessGateway({
      catalog: {
        ...base,
        server: { max_upstream_calls: 4 },
        // A model that calls the tools it is offered as long as it may.
        providers: [...base.providers, mockProvider(mock, "plooper", { "x-mock-server-tool-calls": "10", "x-mock-tokens": "1" })],
        models: [...base.models, model("test/looper", endpoint("plooper", 1, 2))],
      },
    })
    try {
      const from = mock.requests.length
      const res = await tight.fetch("/v1/responses", {
        method: "POST",
        json: {
          model: "test/looper",
          input: "What time is it in Paris?",
          tools: [{ type: "openrouter:datetime" }],
          plugins: [{ id: "fusion", analysis_models: ["test/a"], model: "test/judge", tools: [] }],
        },
      })
      expect(res.status).toBe(200)
      await res.arrayBuffer()
      const sent = mock.requests.slice(from).map((r) => ({ tag: r.headers[TAG], body: r.body as { tool_choice?: unknown } }))
      // The panelist and the judge (2), then the loop: one turn that calls datetime and, the cap of 4
      // reached with the next, the last turn without tools. Not counted, the loop would run 4 turns.
      expect(sent.map((s) => s.tag)).toEqual(["pa", "pjudge", "plooper", "plooper"])
      expect(sent[3]?.body.tool_choice).toBe("none")
    } finally {
      await tight.stop()
    }
  })
})

describe("the fusion plugin and the request's end", () => {
  test("the client leaving mid-panel: the panelist in flight is cut, no judge is called after it", async () => {
    const from = mock.requests.length
    const client = new AbortController()
    const json = { model: "test/final", input: "What is the capital of France?", plugins: [{ id: "fusion", analysis_models: ["test/a", "test/slow"], model: "test/judge", tools: [] }] }
    const pending = gw.fetch("/v1/responses", { method: "POST", json, signal: client.signal }).catch(() => undefined)
    // Left once both panel calls are out (the slow one answers a second after its call).
    const sentTags = () => mock.requests.slice(from).map((r) => r.headers[TAG])
    for (let i = 0; i < 200 && !sentTags().includes("pslow"); i++) await Bun.sleep(25)
    client.abort()
    await pending
    // Past the slow panelist's answer (1 s): had the panel gone on, its judge would have been called by now.
    await Bun.sleep(1_500)
    await gw.server.drain()
    expect(mock.requests.slice(from).map((r) => r.headers[TAG]).sort()).toEqual(["pa", "pslow"])
  })

  test("a key whose limit the panel spent: 402, with a record under the id the panel's records name as their parent", async () => {
    const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "fusion-tight", limit: 0.000001 } })).json()) as { key: string }
    const json = { model: "test/final", input: "What is the capital of France?", plugins: [{ id: "fusion", analysis_models: ["test/a", "test/b"], model: "test/judge", tools: [] }] }
    const res = await gw.fetch("/v1/responses", { method: "POST", json, key: made.key })
    expect(res.status).toBe(402)
    const id = res.headers.get("x-generation-id")
    expect(id).not.toBeNull()
    await gw.server.drain()
    const record = await generation(id as string)
    expect(record["status"]).toBe("failed")
  })
})
