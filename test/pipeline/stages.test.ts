/**
 * The pre-model stages: the plugin registry holds one plugin per id of the contract, each with
 * its own Schema; a plugin not built is a 400 naming it, `enabled: false` skips it; a stage may
 * rewrite the request (routed and priced again), narrow the plan, block, or add a pipeline entry.
 */
import { describe, expect, test } from "bun:test"
import { Effect, Exit } from "effect"
import { BadRequest, Forbidden } from "../../src/domain/errors.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { Either } from "effect"
import { testSettings } from "../../src/config/Config.js"
import { decodePlugins, type PluginId, pluginIds, type PluginSet, pluginSetOf, requestPlugins } from "../../src/pipeline/plugins/index.js"
import { notAvailable, type PluginConfig, type RequestPlugin } from "../../src/pipeline/plugins/plugin.js"
import type { StageOutcome, StageState } from "../../src/pipeline/stages.js"
import type { Preparation, Prepared } from "../../src/pipeline/pre-model.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { useInProcessGateway } from "../support/gateway.js"
import { preparerOf } from "../../src/testing/stores.js"
import { useServices } from "../support/services.js"

const services = useServices()
const gw = useInProcessGateway()

const preparerWith = async (registry: PluginSet) => {
  return preparerOf(
    services(),
    undefined,
    registry,
  )
}

const newKey = () =>
  services().runPromise(
    Effect.gen(function* () {
      const userId = `user_${crypto.randomUUID().slice(0, 8)}`
      const workspaceId = yield* (yield* Users).ensure(userId)
      return yield* (yield* KeyStore).create({ userId, workspaceId, name: "stages", limit: null, limitReset: null, includeByokInLimit: false })
    }),
  )

const complete = async (p: Preparation): Promise<Prepared | { readonly refused: string; readonly message: string }> => {
  if (p.ready !== undefined) return p.ready
  if (p.refused !== undefined) return { refused: p.refused._tag, message: p.refused.message }
  const exit = await services().runPromiseExit(p.pending())
  if (Exit.isSuccess(exit)) return exit.value
  if (exit.cause._tag === "Fail") return { refused: exit.cause.error._tag, message: exit.cause.error.message }
  throw new Error("defect")
}

const prepared = async (registry: PluginSet, json: unknown) => {
  const { secret } = await newKey()
  const preparer = await preparerWith(registry)
  return complete(preparer.prepare(new Headers({ authorization: `Bearer ${secret}`, "x-service-metadata": "enabled" }), JSON.stringify(json)))
}

/** A plugin's pre-model stage as a test writes it. */
interface StageOf {
  readonly id: PluginId
  readonly needsPlan: boolean
  readonly run: (config: PluginConfig & Record<string, unknown>, state: StageState, at: number) => StageOutcome
}

/** The registry's plugins with the given stages in place of theirs (the others as built). */
const registryWith = (...stages: ReadonlyArray<StageOf>): PluginSet =>
  pluginSetOf(
    { settings: testSettings() },
    requestPlugins.map((plugin): RequestPlugin => {
      const stage = stages.find((s) => s.id === plugin.id)
      return stage === undefined ? (plugin as unknown as RequestPlugin) : { ...(plugin as unknown as RequestPlugin), pre: () => stage as never }
    }),
  )

/** A registry where `web` is the given stage (the others as built). */
const withWeb = (web: StageOf): PluginSet => registryWith(web)

describe("the plugin registry", () => {
  test("every plugin id of the contract has its plugin, and only those; each entry decodes to its own id", () => {
    const contract = ["auto-router", "context-compression", "file-parser", "fusion", "moderation", "pareto-router", "response-healing", "web", "web-fetch"]
    const ids: Array<string> = [...pluginIds].sort()
    expect(ids).toEqual(contract)
    for (const plugin of requestPlugins) {
      expect(Either.getOrThrow(decodePlugins([{ id: plugin.id }]))).toEqual([expect.objectContaining({ id: plugin.id, enabled: true })])
    }
  })

  // Every plugin of the contract is built (each has its own tests: test/plugins/*, test/pipeline/*);
  // a stage not built yet is `notAvailable`: a 400 naming it, never a request served without it.
  test("a plugin not built yet is refused with 400 naming it and its index", async () => {
    const outcome = await prepared(registryWith({ id: "web-fetch", ...notAvailable("web-fetch") }), {
      model: "demo/echo",
      input: "hi",
      plugins: [{ id: "web", enabled: false }, { id: "web-fetch" }],
    })
    expect(outcome).toEqual({ refused: "BadRequest", message: "Invalid request: plugins[1]: plugin web-fetch is not available on this gateway" })
  })

  test("enabled: false skips a plugin: the request is served", async () => {
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "hi", plugins: [{ id: "web", enabled: false }, { id: "fusion", enabled: false }] },
    })
    expect(res.status).toBe(200)
  })
})

describe("what a pre-model stage may do", () => {
  test("add a service_metadata.pipeline entry: it reaches the answer's metadata", async () => {
    const entry = { type: "plugin", name: "web", summary: "searched the web" }
    const registry = withWeb({ id: "web", needsPlan: false, run: () => ({ entry }) })
    const p = await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web" }] })
    expect("pipeline" in p && p.pipeline).toEqual([entry])
  })

  test("give links the answer may cite: the decision carries them, in stage order (none: undefined)", async () => {
    const first = { url: "https://a.example/x", title: "A" }
    const second = { url: "https://b.example/y", title: "B" }
    const registry = registryWith(
      { id: "web", needsPlan: false, run: () => ({ citable: [first] }) },
      { id: "web-fetch", needsPlan: false, run: () => ({ citable: [second] }) },
    )
    const p = await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web" }, { id: "web-fetch" }] })
    expect("citable" in p && p.citable).toEqual([first, second])
    const none = await prepared(registry, { model: "demo/echo", input: "hi" })
    expect("plan" in none && none.citable).toBeUndefined()
  })

  test("rewrite the request: it is routed again and priced on the rewritten request", async () => {
    const longer = Either.getOrThrow(decodeResponsesRequest({ model: "demo/free", input: "x".repeat(4000) }))
    const registry = withWeb({ id: "web", needsPlan: false, run: () => ({ request: longer }) })
    const p = await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web" }] })
    if (!("plan" in p)) throw new Error(JSON.stringify(p))
    expect(p.plan.requested).toBe("demo/free")
    expect(p.request).toBe(longer)
    // Estimated on the request as the stage left it (4,000 characters), not the short body.
    expect(p.estimatedInputTokens).toBeGreaterThanOrEqual(1000)
  })

  test("narrow the route plan: a stage that reads the plan is routed first, its plan is the one used", async () => {
    let routed: ReadonlyArray<string> = []
    const registry = withWeb({
      id: "web",
      needsPlan: true,
      run: (_config, state) => {
        const plan = state.plan
        if (plan === undefined) throw new Error("not routed before a stage that reads the plan")
        routed = plan.candidates.map((e) => e.provider.id)
        return { plan: { ...plan, candidates: plan.candidates.slice(1) } }
      },
    })
    const p = await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web" }] })
    if (!("plan" in p)) throw new Error(JSON.stringify(p))
    expect(routed).toHaveLength(2)
    expect(p.plan.candidates.map((e) => e.provider.id)).toEqual(routed.slice(1))
  })

  test("block: the stage's error is the answer, and nothing is held", async () => {
    const registry = withWeb({ id: "web", needsPlan: false, run: () => new Forbidden({ message: "blocked by web" }) })
    expect(await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web" }] })).toEqual({
      refused: "Forbidden",
      message: "blocked by web",
    })
  })

  test("a stage reads the plugin's own config", async () => {
    const seen: Array<unknown> = []
    const registry = withWeb({
      id: "web",
      needsPlan: false,
      run: (config) => {
        seen.push(config)
        return new BadRequest({ message: "stop" })
      },
    })
    await prepared(registry, { model: "demo/echo", input: "hi", plugins: [{ id: "web", max_results: 3 }] })
    expect(seen).toEqual([{ id: "web", enabled: true, max_results: 3 }])
  })
})
