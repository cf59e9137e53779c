/**
 * The auto-router (router/auto) and pareto-router (router/pareto-code) end to end against the
 * mock upstream, on the three client formats: the concrete model in the answer and at the
 * upstream, the strategy, the pipeline entry, the fallbacks, the globs, the tiers, stickiness,
 * the 404 when none is eligible, and the generation record's `router`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ModelEntry } from "../../src/config/file.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { catalogOf, endpoint, mockProvider, model, TAG } from "../routing/helpers.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }

const scored = (id: string, provider: string, prompt: number, completion: number, scores: Record<string, number>): ModelEntry => ({
  ...model(id, endpoint(provider, prompt, completion)),
  scores,
})

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 2 })
  const providers = ["p-cheap", "p-mid", "p-claude", "p-dear", "p-plain"].map((id) => mockProvider(mock, id))
  gw = await startInProcessGateway({
    catalog: catalogOf(providers, [
      scored("cheap/coder", "p-cheap", 0.1, 0.2, { coding: 0.7, chat: 0.4 }),
      scored("mid/general", "p-mid", 1, 2, { coding: 0.6, chat: 0.8, writing: 0.8 }),
      scored("anthropic/claude", "p-claude", 3, 15, { coding: 0.9, chat: 0.85 }),
      scored("dear/best", "p-dear", 10, 30, { coding: 0.95, chat: 0.9, writing: 0.95, math: 0.95 }),
      model("plain/noscore", endpoint("p-plain", 0.01, 0.01)),
    ]),
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

interface Asked {
  readonly status: number
  readonly body: Record<string, unknown>
  readonly upstreamModel: string | undefined
  readonly upstreamTag: string | undefined
  readonly generationId: string | null
}

/** One request in `format` with metadata on; what the answer said and what the upstream saw. */
const ask = async (format: Format, model: string, text: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Asked> => {
  const before = mock.requests.length
  const res = await gw.fetch(PATHS[format], {
    method: "POST",
    json: bodyIn(format, model, text, extra),
    headers: { "x-service-metadata": "enabled", ...headers },
  })
  const body = (await res.json()) as Record<string, unknown>
  const seen = mock.requests.slice(before)
  const last = seen[seen.length - 1]
  return {
    status: res.status,
    body,
    upstreamModel: (last?.body as { model?: string } | undefined)?.model,
    upstreamTag: last?.headers[TAG],
    generationId: res.headers.get("x-generation-id"),
  }
}

interface RouterEntry {
  readonly type: string
  readonly name: string
  readonly summary: string
  readonly data: { task_type?: string; chosen: string; fallbacks: Array<string>; candidates: Array<{ model: string; score: number }> }
}

const metaOf = (a: Asked) => a.body["service_metadata"] as { strategy: string; requested: string; pipeline?: Array<RouterEntry>; endpoints: { available: Array<{ model: string }> } }
const entryOf = (a: Asked) => metaOf(a).pipeline?.find((e) => e.type === "router")

describe("auto-router", () => {
  for (const format of FORMATS) {
    test(`${format}: router/auto picks by task and price, reports the concrete model, strategy auto and the pipeline entry`, async () => {
      // A chat prompt at the default tradeoff (7): the cheap model wins on price.
      const a = await ask(format, "router/auto", "hello there, how are you?")
      expect(a.status).toBe(200)
      expect(a.body["model"]).toBe("cheap/coder")
      expect(a.upstreamModel).toBe("p-cheap-model")
      const meta = metaOf(a)
      expect(meta.strategy).toBe("auto")
      expect(meta.requested).toBe("router/auto")
      const entry = entryOf(a)
      expect(entry?.name).toBe("auto-router")
      expect(entry?.data.task_type).toBe("chat")
      expect(entry?.data.chosen).toBe("cheap/coder")
      expect(entry?.data.fallbacks).toHaveLength(2)
      // Without allowed_models only the scored models are candidates.
      expect(entry?.data.candidates.map((c) => c.model).sort()).toEqual(["anthropic/claude", "cheap/coder", "dear/best", "mid/general"])
      // The fallbacks are in the plan after the primary.
      expect(meta.endpoints.available.map((e) => e.model)).toEqual([entry?.data.chosen as string, ...(entry?.data.fallbacks ?? [])])
    })

    test(`${format}: openrouter/auto is an alias; quality first (tradeoff 0) picks the best score for a coding prompt`, async () => {
      const a = await ask(format, "openrouter/auto", "Fix the bug in this python function: def f(x): return x +", {
        plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }],
      })
      expect(a.status).toBe(200)
      expect(a.body["model"]).toBe("dear/best")
      expect(a.upstreamTag).toBe("p-dear")
      expect(entryOf(a)?.data.task_type).toBe("coding")
    })
  }

  test("allowed_models and excluded_models are globs; excluded applies after allowed", async () => {
    const allowed = await ask("responses", "router/auto", "hi", { plugins: [{ id: "auto-router", allowed_models: ["anthropic/*", "plain/*"] }] })
    expect(allowed.status).toBe(200)
    // allowed_models may name models without scores (they count as 0.5).
    expect(entryOf(allowed)?.data.candidates.map((c) => c.model).sort()).toEqual(["anthropic/claude", "plain/noscore"])
    const excluded = await ask("chat", "router/auto", "hi", {
      plugins: [{ id: "auto-router", cost_quality_tradeoff: 0, excluded_models: ["dear/*"] }],
    })
    expect(excluded.body["model"]).toBe("anthropic/claude")
    const both = await ask("messages", "router/auto", "hi", {
      plugins: [{ id: "auto-router", allowed_models: ["anthropic/*"], excluded_models: ["anthropic/*"] }],
    })
    expect(both.status).toBe(404)
    expect(JSON.stringify(both.body)).toContain("No models match your request and model restrictions")
  })

  test("cost_tier filters by price quintile of the eligible", async () => {
    const max = await ask("responses", "router/auto", "hi", { plugins: [{ id: "auto-router", cost_tier: "max" }] })
    expect(max.body["model"]).toBe("dear/best")
    const low = await ask("responses", "router/auto", "hi", { plugins: [{ id: "auto-router", cost_tier: "low", cost_quality_tradeoff: 0 }] })
    expect(low.body["model"]).toBe("cheap/coder")
    const bad = await ask("responses", "router/auto", "hi", { plugins: [{ id: "auto-router", cost_tier: "cheap" }] })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain("cost_tier")
  })

  test("a session keeps its model for the same task; pin_model keeps it when the task changes", async () => {
    const session = `s-${crypto.randomUUID()}`
    const first = await ask("responses", "router/auto", "hello", { session_id: session, plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }] })
    expect(first.body["model"]).toBe("dear/best")
    // Same session, cheaper tradeoff: the session's model stays.
    const again = await ask("responses", "router/auto", "hello again", { session_id: session })
    expect(again.body["model"]).toBe("dear/best")
    // Another session at the default tradeoff: the cheap one.
    const other = await ask("responses", "router/auto", "hello again", { session_id: `${session}-2` })
    expect(other.body["model"]).toBe("cheap/coder")
    // The task changed (writing): re-ranked without pin_model, kept with it.
    const writing = "Write a short poem about the sea"
    const rerank = await ask("responses", "router/auto", writing, { session_id: `${session}-2`, plugins: [{ id: "auto-router", cost_quality_tradeoff: 0 }] })
    expect(rerank.body["model"]).toBe("dear/best")
    const pinned = await ask("responses", "router/auto", "Write a short poem about the sea", {
      session_id: session,
      plugins: [{ id: "auto-router", pin_model: true, allowed_models: ["*/*"], cost_quality_tradeoff: 10 }],
    })
    expect(pinned.body["model"]).toBe("dear/best")
  })

  test("the auto-router plugin on a concrete model is refused, naming the plugin", async () => {
    const a = await ask("responses", "cheap/coder", "hi", { plugins: [{ id: "auto-router" }] })
    expect(a.status).toBe(400)
    expect(JSON.stringify(a.body)).toContain("plugins[0]: auto-router applies to the model router/auto")
    // enabled: false: the plugin is off, the request is served.
    const off = await ask("responses", "cheap/coder", "hi", { plugins: [{ id: "auto-router", enabled: false }] })
    expect(off.status).toBe(200)
  })

  test("enabled: false on router/auto: the router runs with its defaults, not the plugin's settings", async () => {
    const a = await ask("responses", "router/auto", "hello", { plugins: [{ id: "auto-router", enabled: false, cost_quality_tradeoff: 0 }] })
    expect(a.body["model"]).toBe("cheap/coder")
  })

  test("the generation record says which router chose", async () => {
    const a = await ask("responses", "router/auto", "hello")
    const id = a.generationId as string
    let record: { data: { router: string | null; model: string } } | undefined
    for (let i = 0; i < 100 && record === undefined; i++) {
      const res = await gw.fetch(`/v1/generation?id=${id}`)
      if (res.status === 200) record = (await res.json()) as { data: { router: string | null; model: string } }
      else await Bun.sleep(50)
    }
    expect(record?.data.router).toBe("auto")
    expect(record?.data.model).toBe("cheap/coder")
  })
})

describe("pareto-router", () => {
  for (const format of FORMATS) {
    test(`${format}: the cheapest model with coding ≥ 0.66, two fallbacks, strategy pareto`, async () => {
      const a = await ask(format, "router/pareto-code", "write a sort function")
      expect(a.status).toBe(200)
      expect(a.body["model"]).toBe("cheap/coder")
      expect(a.upstreamModel).toBe("p-cheap-model")
      const meta = metaOf(a)
      expect(meta.strategy).toBe("pareto")
      const entry = entryOf(a)
      expect(entry?.name).toBe("pareto-router")
      expect(entry?.data.fallbacks).toEqual(["anthropic/claude", "dear/best"])
      // mid/general (0.6) and plain/noscore (0.5) are under the threshold.
      expect(entry?.data.candidates.map((c) => c.model)).toEqual(["cheap/coder", "anthropic/claude", "dear/best"])
    })
  }

  test("max_price: the best coding score at or under it; min_coding_score; none → 404", async () => {
    const capped = await ask("chat", "openrouter/pareto-code", "code", { plugins: [{ id: "pareto-router", max_price: 5 }] })
    expect(capped.body["model"]).toBe("anthropic/claude")
    const strict = await ask("messages", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", min_coding_score: 0.92 }] })
    expect(strict.body["model"]).toBe("dear/best")
    const none = await ask("responses", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", min_coding_score: 0.99 }] })
    expect(none.status).toBe(404)
    expect(JSON.stringify(none.body)).toContain("No models match your request and model restrictions")
    const bad = await ask("responses", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", min_coding_score: 2 }] })
    expect(bad.status).toBe(400)
    expect(JSON.stringify(bad.body)).toContain("min_coding_score")
  })

  test("max_price bypasses the coding-score tiers: the best-scored model at or under the price, whatever its tier; 404 only when none is under it", async () => {
    // Over the 0.92 threshold only dear/best (10 USD/M) remains, which is over the price: the cap
    // still picks the best score under it, anthropic/claude (0.9), then cheap/coder and mid/general.
    const tiered = await ask("responses", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", min_coding_score: 0.92, max_price: 5 }] })
    expect(tiered.status).toBe(200)
    expect(tiered.body["model"]).toBe("anthropic/claude")
    const entry = entryOf(tiered) as unknown as { data: { fallbacks: ReadonlyArray<string>; max_price: number; min_coding_score?: number } }
    expect(entry.data.fallbacks).toEqual(["cheap/coder", "mid/general"])
    expect(entry.data.max_price).toBe(5)
    expect(entry.data.min_coding_score).toBeUndefined()
    // Under 0.05 USD/M only the unscored model (coding 0.5, below the default 0.66 tier) is left: it is chosen.
    const low = await ask("chat", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", max_price: 0.05 }] })
    expect(low.status).toBe(200)
    expect(low.body["model"]).toBe("plain/noscore")
    const none = await ask("messages", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", max_price: 0.001 }] })
    expect(none.status).toBe(404)
    expect(JSON.stringify(none.body)).toContain("No models match your request and model restrictions")
  })

  test("price_source weighted_avg ranks by the blend", async () => {
    // Prompt-only: cheap (0.1) < claude (3); the blend keeps the order, so check the data says the source.
    const a = await ask("responses", "router/pareto-code", "code", { plugins: [{ id: "pareto-router", price_source: "weighted_avg", min_coding_score: 0.85 }] })
    expect(a.body["model"]).toBe("anthropic/claude")
    const entry = entryOf(a) as unknown as { data: { price_source: string; candidates: Array<{ price: number }> } }
    expect(entry.data.price_source).toBe("weighted_avg")
    expect(entry.data.candidates[0]?.price).toBe((3 + 3 * 15) / 4)
  })
})
