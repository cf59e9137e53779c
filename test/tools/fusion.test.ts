/**
 * Fusion's core and the `openrouter:fusion` server tool, against the mock upstream:
 * the panel answers in parallel, the judge gets the answers and a json_schema format, a failing
 * panelist is listed and the rest go on, all failing is an error with failure_reason, presets
 * from config, each inner call charged and recorded with parent_generation_id.
 */
import { OutputFusionServerToolItem$inboundSchema } from "@openrouter/sdk/models"
import { afterAll, describe, expect, test } from "bun:test"
import { Either } from "effect"
import { startMockUpstream } from "../../scripts/mock-upstream.js"
import { parseConfigFile, testSettings } from "../../src/config/Config.js"
import { generationView } from "../../src/domain/generations.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { ANALYSIS_SCHEMA, chooseFusion, runFusion } from "../../src/tools/fusion-core.js"
import { checkFusionParameters, type FusionToolContext, fusionTool } from "../../src/tools/fusion.js"
import type { InnerCallResult } from "../../src/tools/inner-calls.js"
import type { ServerToolProgress } from "../../src/tools/index.js"
import { costAt, TAG } from "../routing/helpers.js"
import { useServices } from "../support/services.js"
import { ANALYSIS, fusionCatalog, OUTPUT_TOKENS, PRESETS, servicesOf } from "./support.js"

const mock = await startMockUpstream({ tokens: 1 })
afterAll(() => mock.stop())
const services = useServices({ catalog: fusionCatalog(mock, PRESETS) })
const env = () => servicesOf(services())

/** The mock's requests since `from`, by provider tag. */
const sentSince = (from: number) => mock.requests.slice(from).map((r) => ({ tag: r.headers[TAG], body: r.body as Record<string, unknown> }))

const toolContext = async (limit: number | null = null, model?: string): Promise<FusionToolContext> => {
  const e = await env()
  return { settings: e.settings, signal: new AbortController().signal, workspaceId: "ws", callsSoFar: 0, innerCalls: e.innerCalls, parent: await e.parentFor(limit), model }
}

describe("the panel and the judge", () => {
  test("the panel's calls are all made before any answers (in parallel)", async () => {
    let inFlight = 0
    let most = 0
    const fake = async (_request: unknown, model: string): Promise<InnerCallResult> => {
      inFlight++
      most = Math.max(most, inFlight)
      await Promise.resolve()
      await Promise.resolve()
      inFlight--
      return model === "judge"
        ? { ok: true, model, text: JSON.stringify(ANALYSIS), usage: { inputTokens: 1, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 }, cost: 0, endpoint: undefined as never, generationId: "g", finishReason: "stop" }
        : { ok: true, model, text: `answer of ${model}`, usage: { inputTokens: 1, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 1, reasoningTokens: 0 }, cost: 0, endpoint: undefined as never, generationId: "g", finishReason: "stop" }
    }
    const run = await runFusion({ analysisModels: ["m1", "m2", "m3", "m4"], judge: "judge" }, "q", fake)
    expect(most).toBe(4)
    expect(run.responses.map((r) => r.model)).toEqual(["m1", "m2", "m3", "m4"])
  })

  test("the judge gets the question and every answer, with a json_schema format, and its JSON is the analysis", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const from = mock.requests.length
    const run = await runFusion({ analysisModels: ["test/a", "test/b"], judge: "test/judge" }, "What is the capital of France?", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.failureReason).toBeUndefined()
    expect(run.responses).toEqual([
      { model: "test/a", content: "Answer A: Paris." },
      { model: "test/b", content: "Answer B: Paris, on the Seine." },
    ])
    expect(run.analysis).toEqual(ANALYSIS)
    const sent = sentSince(from)
    expect(sent.map((s) => s.tag).sort()).toEqual(["pa", "pb", "pjudge"])
    const panel = sent.filter((s) => s.tag !== "pjudge")
    for (const p of panel) {
      expect(JSON.stringify(p.body["messages"])).toContain("What is the capital of France?")
      // No tools for the panel: answers from model knowledge.
      expect(p.body["tools"]).toBeUndefined()
    }
    const judge = sent.find((s) => s.tag === "pjudge")?.body as Record<string, unknown>
    const format = judge["response_format"] as { type: string; json_schema: { name: string; schema: unknown; strict: boolean } }
    expect(format.type).toBe("json_schema")
    expect(format.json_schema.schema).toEqual(ANALYSIS_SCHEMA)
    const prompt = JSON.stringify(judge["messages"])
    expect(prompt).toContain("Answer A: Paris.")
    expect(prompt).toContain("Answer B: Paris, on the Seine.")
    expect(prompt).toContain("test/a")
  })

  test("a judge's broken JSON is healed (fenced, trailing comma)", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const run = await runFusion({ analysisModels: ["test/a"], judge: "test/judge-fenced" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.analysis).toEqual(ANALYSIS)
  })

  test("a judge that answers prose: no analysis, failure_reason judge_not_valid_json, the answers kept", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const run = await runFusion({ analysisModels: ["test/a"], judge: "test/judge-prose" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.analysis).toBeUndefined()
    expect(run.failureReason).toBe("judge_not_valid_json")
    expect(run.responses).toHaveLength(1)
  })

  test("a failing panelist is listed in failed_models with its status, and the rest go on", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const run = await runFusion({ analysisModels: ["test/a", "test/fail", "test/b"], judge: "test/judge" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.responses.map((r) => r.model)).toEqual(["test/a", "test/b"])
    expect(run.failedModels).toHaveLength(1)
    expect(run.failedModels[0]).toMatchObject({ model: "test/fail", status_code: 502 })
    expect(run.analysis).toEqual(ANALYSIS)
  })

  test("every panelist failing: no judge call, failure_reason all_panels_failed", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const from = mock.requests.length
    const run = await runFusion({ analysisModels: ["test/fail", "test/fail2"], judge: "test/judge" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.failureReason).toBe("all_panels_failed")
    expect(run.error).toContain("every analysis model failed")
    expect(run.failedModels.map((f) => f.model)).toEqual(["test/fail", "test/fail2"])
    expect(sentSince(from).map((s) => s.tag)).not.toContain("pjudge")
  })
})

describe("inner calls: charged and recorded", () => {
  test("each panel and judge call is a generation with parent_generation_id, charged at its endpoint's price", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const run = await runFusion({ analysisModels: ["test/a", "test/b"], judge: "test/judge" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.generations).toHaveLength(3)
    const records = await Promise.all(run.generations.map((id) => e.generation(id)))
    expect(records.map((r) => r.model)).toEqual(["test/a", "test/b", "test/judge"])
    for (const r of records) {
      expect(r.parentGenerationId).toBe(parent.generationId)
      expect(r.keyHash).toBe(parent.principal.hash)
      expect(r.status).toBe("completed")
    }
    expect(records.map((r) => r.totalCost)).toEqual([costAt(1, 2, OUTPUT_TOKENS), costAt(3, 4, OUTPUT_TOKENS), costAt(5, 6, OUTPUT_TOKENS)])
    expect(run.cost).toBeCloseTo(costAt(1, 2, OUTPUT_TOKENS) + costAt(3, 4, OUTPUT_TOKENS) + costAt(5, 6, OUTPUT_TOKENS), 12)
    expect(parent.budget.used).toBe(3)
  })

  test("GET /generation's view of an inner record names its parent", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const r = await e.innerCalls.call(Either.getOrThrow(decodeResponsesRequest({ input: "q" })), "test/a", parent)
    if (!r.ok) throw new Error(r.error)
    expect(generationView({ ...(await e.generation(r.generationId)) }).parent_generation_id).toBe(parent.generationId)
  })

  test("a failed inner call is recorded as failed under its parent", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const r = await e.innerCalls.call(Either.getOrThrow(decodeResponsesRequest({ input: "q" })), "test/fail", parent)
    expect(r.ok).toBe(false)
    if (r.ok || r.generationId === undefined) throw new Error("expected a recorded failure")
    const record = await e.generation(r.generationId)
    expect(record.status).toBe("failed")
    expect(record.parentGenerationId).toBe(parent.generationId)
  })

  test("the request's deadline ends an inner call in flight: 408, recorded as failed under its parent", async () => {
    const e = await env()
    const parent = { ...(await e.parentFor()), signal: AbortSignal.timeout(100) }
    const r = await e.innerCalls.call(Either.getOrThrow(decodeResponsesRequest({ input: "q" })), "test/hang", parent)
    expect(r).toMatchObject({ ok: false, status: 408 })
    if (r.ok || r.generationId === undefined) throw new Error("expected a recorded failure")
    const record = await e.generation(r.generationId)
    expect(record.status).toBe("failed")
    expect(record.parentGenerationId).toBe(parent.generationId)
  })

  test("the client leaving ends an inner call in flight: 499, recorded as cancelled", async () => {
    const e = await env()
    const client = new AbortController()
    const parent = { ...(await e.parentFor()), signal: client.signal }
    const pending = e.innerCalls.call(Either.getOrThrow(decodeResponsesRequest({ input: "q" })), "test/hang", parent)
    setTimeout(() => client.abort(), 50)
    const r = await pending
    expect(r).toMatchObject({ ok: false, status: 499 })
    if (r.ok || r.generationId === undefined) throw new Error("expected a recorded failure")
    expect((await e.generation(r.generationId)).status).toBe("cancelled")
  })

  test("a key whose limit cannot hold a call: that call fails with 402 and is not sent; the judge's 402 is insufficient_credits", async () => {
    const e = await env()
    // The key's first hold is admitted (Spend's rule); the holds after it do not fit the limit.
    const parent = await e.parentFor(0.000001)
    const from = mock.requests.length
    const run = await runFusion({ analysisModels: ["test/a", "test/b", "test/c"], judge: "test/judge" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.failedModels.length).toBeGreaterThan(0)
    for (const f of run.failedModels) {
      expect(f.status_code).toBe(402)
      expect(f.error).toContain("spending limit")
    }
    expect(mock.requests.length - from).toBe(run.responses.length)
    expect(run.failureReason).toBe("insufficient_credits")
  })

  test("the request's model-call budget ends the calls: the rest fail with 429", async () => {
    const e = await env()
    const parent = await e.parentFor(null, 1)
    const run = await runFusion({ analysisModels: ["test/a", "test/b"], judge: "test/judge" }, "q", (r, m) => e.innerCalls.call(r, m, parent))
    expect(run.responses).toHaveLength(1)
    expect(run.failedModels[0]?.status_code).toBe(429)
    expect(run.failureReason).toBe("rate_limited")
  })

  test("an inner call cannot call fusion", async () => {
    const e = await env()
    const parent = await e.parentFor()
    const request = Either.getOrThrow(decodeResponsesRequest({ input: "q", plugins: [{ id: "fusion", analysis_models: ["test/a"] }] }))
    const r = await e.innerCalls.call(request, "test/a", parent)
    expect(r).toMatchObject({ ok: false, status: 400, error: "an inner call cannot call fusion" })
  })
})

describe("presets", () => {
  test("a preset names the panel and the judge; explicit analysis_models and model win", () => {
    expect(chooseFusion({ preset: "general-high" }, PRESETS, "outer")).toEqual({ analysisModels: ["test/a", "test/b", "test/c"], judge: "test/judge" })
    expect(chooseFusion({ preset: "general-high", analysis_models: ["test/c"] }, PRESETS, "outer")).toEqual({ analysisModels: ["test/c"], judge: "test/judge" })
    expect(chooseFusion({ preset: "general-high", model: "test/b" }, PRESETS, "outer")).toEqual({ analysisModels: ["test/a", "test/b", "test/c"], judge: "test/b" })
    // No judge named: the request's own model.
    expect(chooseFusion({ analysis_models: ["test/a"] }, PRESETS, "outer")).toEqual({ analysisModels: ["test/a"], judge: "outer" })
  })

  test("a preset the config does not have, or no panel at all, is refused naming the field", () => {
    expect(chooseFusion({ preset: "general-budget" }, PRESETS, "outer")).toBe(
      "preset: fusion preset general-budget is not configured on this gateway (plugins.fusion.presets)",
    )
    expect(chooseFusion({}, PRESETS, "outer")).toBe("analysis_models: 1 to 8 models, or a preset")
  })

  test("the config file refuses an unknown preset key and a preset naming an unknown model", () => {
    const base = { providers: [{ id: "p", kind: "fake" }], models: [{ id: "m/a", context_length: 8192, endpoints: [{ provider: "p", upstream_model: "a", pricing: { prompt: 0, completion: 0 } }] }] }
    const withFusion = (fusion: unknown) => parseConfigFile("gw.json", JSON.stringify({ ...base, plugins: { fusion } }))
    expect(Either.isRight(withFusion({ presets: { "general-fast": { analysis_models: ["m/a"], model: "m/a" } } }))).toBe(true)
    const unknownKey = withFusion({ presets: { "general-slow": { analysis_models: ["m/a"], model: "m/a" } } })
    expect(Either.isLeft(unknownKey) && unknownKey.left.message).toContain("general-slow")
    const unknownModel = withFusion({ presets: { "general-fast": { analysis_models: ["m/zzz"], model: "m/a" } } })
    expect(Either.isLeft(unknownModel) && unknownModel.left.message).toContain('plugins.fusion.presets.general-fast.analysis_models[0]: unknown model "m/zzz"')
  })
})

describe("the openrouter:fusion server tool", () => {
  test("is offered as the function fusion with a prompt", () => {
    expect(fusionTool.type).toBe("openrouter:fusion")
    expect(fusionTool.name).toBe("fusion")
    expect(fusionTool.parameters).toMatchObject({ required: ["prompt"] })
  })

  test("a call returns the SDK's item (responses, analysis, failed_models) and the same facts to the model", async () => {
    const ctx = await toolContext()
    const result = await fusionTool.run({ prompt: "What is the capital of France?" }, { analysis_models: ["test/a", "test/fail"], model: "test/judge", tools: [] }, ctx)
    expect(result.item).toEqual({
      type: "openrouter:fusion",
      status: "completed",
      responses: [{ model: "test/a", content: "Answer A: Paris." }],
      analysis: ANALYSIS,
      failed_models: [expect.objectContaining({ model: "test/fail", status_code: 502 })],
    })
    // The official SDK's schema of the item (the loop adds its id).
    const parsed = OutputFusionServerToolItem$inboundSchema.safeParse({ id: "fc_1", ...result.item })
    expect(parsed.success).toBe(true)
    expect(parsed.data?.analysis?.partialCoverage).toEqual([{ point: "history", models: ["test/a"] }])
    expect(parsed.data?.failedModels?.[0]?.statusCode).toBe(502)
    const output = JSON.parse(result.modelOutput) as Record<string, unknown>
    expect(output["responses"]).toEqual([{ model: "test/a", content: "Answer A: Paris." }])
    expect(output["analysis"]).toEqual(ANALYSIS)
    // Charged with the inner calls' own records, not again as the tool's price.
    expect(result.cost).toBe(0)
  })

  test("a preset from config, with the judge the request's model when the preset has none named explicitly", async () => {
    const ctx = await toolContext(null, "test/judge-prose")
    const from = mock.requests.length
    const result = await fusionTool.run({ prompt: "q" }, { preset: "general-fast", tools: [] }, ctx)
    expect(result.item["analysis"]).toEqual(ANALYSIS)
    expect(sentSince(from).map((s) => s.tag)).toEqual(["pc", "pfenced"])
  })

  test("its progress reaches the loop's progress callback as the SDK's fusion_call events, in their order", async () => {
    const events: Array<ServerToolProgress> = []
    const ctx: FusionToolContext = { ...(await toolContext()), progress: (p) => events.push(p) }
    await fusionTool.run({ prompt: "q" }, { analysis_models: ["test/a", "test/fail"], model: "test/judge", tools: [] }, ctx)
    const named = events.map((e) => `${e.event} ${"model" in e ? e.model : ""}`.trim())
    expect(named.slice(0, 2).sort()).toEqual(["panel.added test/a", "panel.added test/fail"])
    expect(named.slice(2, 4).sort()).toEqual(["panel.completed test/a", "panel.failed test/fail"])
    expect(events.find((e) => e.event === "panel.completed")).toEqual({ event: "panel.completed", model: "test/a", content: "Answer A: Paris." })
    expect(events.find((e) => e.event === "panel.failed")).toMatchObject({ model: "test/fail", status_code: 502 })
    expect(events.slice(4)).toEqual([
      { event: "analysis.in_progress", analyst_model: "test/judge", judge_model: "test/judge" },
      { event: "analysis.completed", analysis: ANALYSIS },
    ])
  })

  test("every panelist failing: an incomplete item with failure_reason and error", async () => {
    const ctx = await toolContext()
    const result = await fusionTool.run({ prompt: "q" }, { analysis_models: ["test/fail"], model: "test/judge" }, ctx)
    expect(result.item).toMatchObject({ type: "openrouter:fusion", status: "incomplete", failure_reason: "all_panels_failed", responses: [] })
    expect(String(result.item["error"])).toContain("every analysis model failed")
    expect(OutputFusionServerToolItem$inboundSchema.safeParse({ id: "fc_2", ...result.item }).success).toBe(true)
  })

  test("bad arguments and parameters are a failed tool result, not a throw", async () => {
    const ctx = await toolContext()
    expect((await fusionTool.run({}, { analysis_models: ["test/a"] }, ctx)).item).toMatchObject({ status: "incomplete", error: "the call needs a prompt (a non-empty string)" })
    expect((await fusionTool.run({ prompt: "q" }, { analysis_models: [] }, ctx)).item).toMatchObject({ error: "analysis_models: 1 to 8 models" })
  })

  test("parameters: 1 to 8 models, max_tool_calls 1 to 16; unused keys accepted", () => {
    const settings = testSettings()
    expect(checkFusionParameters({ analysis_models: Array(9).fill("m") }, settings)).toBe("analysis_models: 1 to 8 models")
    expect(checkFusionParameters({ max_tool_calls: 17 }, settings)).toBe("max_tool_calls: an integer from 1 to 16")
    expect(checkFusionParameters({ max_tool_calls: 0 }, settings)).toBe("max_tool_calls: an integer from 1 to 16")
    expect(checkFusionParameters({ tools: [], temperature: 0.3 }, settings)).toMatchObject({ parameters: { tools: [] }, panel: { tools: [], maxToolCalls: 8 } })
  })

  test("without inner calls in its context (a loop that does not pass them) the call fails, it does not throw", async () => {
    const e = await env()
    const result = await fusionTool.run({ prompt: "q" }, {}, { settings: e.settings, signal: new AbortController().signal, workspaceId: "ws", callsSoFar: 0 })
    expect(result.item).toMatchObject({ status: "incomplete", error: "fusion cannot make model calls here" })
  })
})
