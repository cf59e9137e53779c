/**
 * Fusion against the mock upstream: several mock "models" (providers with fixed `x-mock-*`
 * headers), a services runtime over a fresh database, inner calls over its router, ledger and
 * spend, and keys to make them for.
 */
import { Context, Effect } from "effect"
import type { MockUpstream } from "../../scripts/mock-upstream.js"
import { GatewayConfig, type Settings } from "../../src/config/Config.js"
import type { ConfigFile, FusionConfig } from "../../src/config/file.js"
import type { StoredGeneration } from "../../src/domain/generations.js"
import { authenticate } from "../../src/pipeline/ingress.js"
import { type Loaded, Missing } from "../../src/pipeline/stages.js"
import { Router } from "../../src/routing/Router.js"
import type { PrincipalShape } from "../../src/services/Auth.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Spend } from "../../src/services/Spend.js"
import { Users } from "../../src/services/Users.js"
import type { FusionAnalysis } from "../../src/tools/fusion-core.js"
import { makeInnerCalls } from "../../src/pipeline/inner-calls.js"
import type { InnerCalls, ParentCall } from "../../src/tools/inner-calls.js"
import { endpoint, mockProvider, model } from "../routing/helpers.js"
import type { useServices } from "../support/services.js"

/** What every mock model reports as its output tokens (the input is USAGE_INPUT). */
export const OUTPUT_TOKENS = 10

export const ANALYSIS: FusionAnalysis = {
  consensus: ["Paris is the capital of France"],
  contradictions: [{ topic: "population", stances: [{ model: "test/a", stance: "2.1 million" }, { model: "test/b", stance: "2.2 million" }] }],
  partial_coverage: [{ point: "history", models: ["test/a"] }],
  unique_insights: [{ model: "test/b", insight: "the Seine" }],
  blind_spots: ["climate"],
}

const answering = (text: string) => ({ "x-mock-chunk-uri": encodeURIComponent(text), "x-mock-tokens": "1", "x-mock-usage-output": String(OUTPUT_TOKENS) })
/** A judge that answers `text` at once, even when offered the panel's tools. */
const judging = (text: string) => ({ ...answering(text), "x-mock-server-tool-calls": "0", "x-mock-after-tools": "chunk" })

/**
 * The models: two that answer, one that fails (500), a judge (JSON), a judge whose JSON needs
 * healing, one that answers prose (the judges answer at once, tools or not), and a judge that
 * calls each tool it is offered once, then answers its JSON.
 */
export const fusionCatalog = (mock: MockUpstream, fusion?: FusionConfig): ConfigFile => ({
  providers: [
    mockProvider(mock, "pa", answering("Answer A: Paris.")),
    mockProvider(mock, "pb", answering("Answer B: Paris, on the Seine.")),
    mockProvider(mock, "pc", answering("Answer C: Paris, 2.1 million people.")),
    mockProvider(mock, "pfail", { "x-mock-error": "500" }),
    mockProvider(mock, "pfail2", { "x-mock-error": "503" }),
    mockProvider(mock, "pjudge", judging(JSON.stringify(ANALYSIS))),
    mockProvider(mock, "psjudge", { ...answering(JSON.stringify(ANALYSIS)), "x-mock-after-tools": "chunk" }),
    // A fenced block with a trailing comma: response-healing's repair makes it valid.
    mockProvider(mock, "pfenced", judging(`Here is the analysis:\n\`\`\`json\n${JSON.stringify(ANALYSIS).slice(0, -1)},}\n\`\`\``)),
    mockProvider(mock, "pprose", judging("I would rather not compare them.")),
    mockProvider(mock, "pfinal", answering("The final answer.")),
    mockProvider(mock, "phang", { "x-mock-error": "hang" }),
  ],
  models: [
    model("test/a", endpoint("pa", 1, 2)),
    model("test/b", endpoint("pb", 3, 4)),
    model("test/c", endpoint("pc", 1, 1)),
    model("test/fail", endpoint("pfail", 1, 2)),
    model("test/fail2", endpoint("pfail2", 1, 2)),
    model("test/judge", endpoint("pjudge", 5, 6)),
    model("test/judge-fenced", endpoint("pfenced", 5, 6)),
    model("test/judge-prose", endpoint("pprose", 5, 6)),
    model("test/judge-searching", endpoint("psjudge", 5, 6)),
    model("test/final", endpoint("pfinal", 1, 2)),
    model("test/hang", endpoint("phang", 1, 2)),
  ],
  ...(fusion === undefined ? {} : { plugins: { fusion } }),
})

export const PRESETS: FusionConfig = {
  presets: {
    "general-high": { analysis_models: ["test/a", "test/b", "test/c"], model: "test/judge" },
    "general-fast": { analysis_models: ["test/c"], model: "test/judge-fenced" },
  },
}

type Runtime = ReturnType<ReturnType<typeof useServices>>

export const servicesOf = async (runtime: Runtime) => {
  const rt = await runtime.runtime()
  const settings: Settings = Context.get(rt.context, GatewayConfig)
  const generationStore = Context.get(rt.context, GenerationStore)
  const innerCalls: InnerCalls = makeInnerCalls({
    settings,
    router: Context.get(rt.context, Router),
    generationStore,
    spend: Context.get(rt.context, Spend),
  })
  const keys = Context.get(rt.context, KeyStore)

  /** A new key (with `limit` USD, or none) and its secret. */
  const newKey = (limit: number | null = null) =>
    runtime.runPromise(
      Effect.gen(function* () {
        const userId = `user_${crypto.randomUUID().slice(0, 8)}`
        const workspaceId = yield* (yield* Users).ensure(userId)
        return yield* (yield* KeyStore).create({ userId, workspaceId, name: "fusion", limit, limitReset: null, includeByokInLimit: false })
      }),
    )

  const principalOf = async (secret: string): Promise<PrincipalShape> => {
    const headers = new Headers({ authorization: `Bearer ${secret}` })
    const loaded: Loaded = {}
    let step = authenticate(keys, headers, loaded)
    while (step instanceof Missing) {
      await runtime.runPromise(step.load)
      step = authenticate(keys, headers, loaded)
    }
    if ("_tag" in step) throw new Error(step.message)
    return step
  }

  const parentFor = async (limit: number | null = null, max = 64): Promise<ParentCall> => {
    const { secret } = await newKey(limit)
    return {
      generationId: `gen-parent-${crypto.randomUUID().slice(0, 8)}`,
      principal: await principalOf(secret),
      sessionId: null,
      storeContent: false,
      signal: new AbortController().signal,
      budget: { used: 0, max },
    }
  }

  /** The stored record of generation `id` (the ledger flushed first). */
  const generation = (id: string): Promise<StoredGeneration> =>
    runtime.runPromise(
      Effect.gen(function* () {
        yield* generationStore.flush
        const row = yield* generationStore.get(id)
        if (row._tag === "None") return yield* Effect.die(new Error(`no generation ${id}`))
        return row.value
      }),
    )

  return { settings, innerCalls, generationStore, newKey, principalOf, parentFor, generation, runtime }
}
