/**
 * The router's rules as plain functions over an in-memory catalog: candidates in model order,
 * suffixes, `provider` preferences and their 404 messages, sorts, the default draw, cooldown
 * and sticky sessions. Randomness and the clock are injected, so every case is exact.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import type { EndpointEntry, ModelEntry } from "../../src/config/file.js"
import type { ApiError } from "../../src/domain/errors.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { makeRouter, type RouteInput, type RoutePlan, type RouterOptions } from "../../src/routing/Router.js"
import { buildCatalog } from "../../src/services/Catalog.js"
import { sessionScopeOf } from "../../src/routing/sticky.js"

type Extra = Partial<Omit<EndpointEntry, "provider" | "pricing">>

const ep = (provider: string, prompt: number, completion: number, extra: Extra = {}): EndpointEntry => ({
  provider,
  upstream_model: extra.upstream_model ?? "up",
  pricing: { prompt, completion },
  ...extra,
})

const model = (id: string, ...endpoints: Array<EndpointEntry>): ModelEntry => ({
  id,
  context_length: 8000,
  endpoints: endpoints as unknown as ModelEntry["endpoints"],
})

const MODELS: ReadonlyArray<ModelEntry> = [
  model("v/a", ep("cheap", 1, 1), ep("mid", 2, 2), ep("dear", 10, 20)),
  model("v/b", ep("bcheap", 0.5, 0.5), ep("bdear", 5, 5)),
  model(
    "v/policy",
    ep("collects", 1, 1, { data_collection: "allow", supports: ["tools", "json_schema", "reasoning"] }),
    ep("private", 2, 2, { zdr: true, supports: ["tools"], quantization: "fp8" }),
    ep("plain", 3, 3, { quantization: "bf16" }),
  ),
  model("v/free", ep("gratis", 0, 0), ep("paid", 1, 1)),
  model("v/paid", ep("p1", 1, 1), ep("p2", 2, 2)),
  model("v/pair", ep("left", 1, 1), ep("right", 1, 1)),
  model("v/known:free", ep("special", 3, 3)),
  model("v/solo", ep("only", 2, 2)),
]

const providerIds = [...new Set(MODELS.flatMap((m) => m.endpoints.map((e) => e.provider)))]
const catalog = buildCatalog(
  providerIds.map((id) => ({ id, kind: "fake" as const })),
  MODELS,
)

const request = (json: Record<string, unknown>) => Either.getOrThrow(decodeResponsesRequest({ input: "hi", ...json }))

/** A router with a fixed draw (0 = the first by price) and a settable clock. */
const routerWith = (options: Partial<RouterOptions> = {}) => {
  const clock = { now: 1_000_000 }
  const router = makeRouter(catalog, { random: () => 0, now: () => clock.now, ...options })
  return { router, clock }
}

const planOf = (router: ReturnType<typeof makeRouter>, json: Record<string, unknown>, input: Partial<RouteInput> = {}): RoutePlan => {
  const result = router.plan({ request: request(json), ...input })
  if (Either.isLeft(result)) throw new Error(`expected a plan, got ${result.left.message}`)
  return result.right
}

const errorOf = (router: ReturnType<typeof makeRouter>, json: Record<string, unknown>, input: Partial<RouteInput> = {}): ApiError => {
  const result = router.plan({ request: request(json), ...input })
  if (Either.isRight(result)) throw new Error(`expected an error, got ${JSON.stringify(result.right.candidates.map((e) => e.id))}`)
  return result.left
}

const providers = (plan: RoutePlan) => plan.candidates.map((e) => e.provider.id)

const timing = { ttftMs: undefined, outputTokens: 0, generationMs: undefined }

describe("candidates: model, then each of models", () => {
  test("the model's endpoints come first, then each fallback model's, in order", () => {
    const { router } = routerWith()
    const plan = planOf(router, { model: "v/a", models: ["v/b"] })
    expect(providers(plan)).toEqual(["cheap", "mid", "dear", "bcheap", "bdear"])
    expect(plan.requested).toBe("v/a")
    expect(plan.strategy).toBe("fallback")
    expect(planOf(router, { model: "v/a" }).strategy).toBe("direct")
  })

  test("models alone work; the workspace default is used only when no model is named", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { models: ["v/b"] }))).toEqual(["bcheap", "bdear"])
    expect(providers(planOf(router, {}, { defaultModel: "v/b" }))).toEqual(["bcheap", "bdear"])
    expect(providers(planOf(router, { model: "v/a" }, { defaultModel: "v/b" }))[0]).toBe("cheap")
    expect(errorOf(router, {}).status).toBe(400)
  })

  test("an unknown model is 404 naming the field and the id", () => {
    const { router } = routerWith()
    const e = errorOf(router, { model: "v/a", models: ["nope/x"] })
    expect(e.status).toBe(404)
    expect(e.message).toContain("models[0]")
    expect(e.message).toContain("nope/x")
  })

  test("a preset inside models is refused", () => {
    const { router } = routerWith()
    expect(errorOf(router, { model: "v/a", models: ["v/b@preset/x"] }).status).toBe(400)
  })
})

describe("model suffixes", () => {
  test(":floor sorts by price and :nitro by throughput (unknown stats after known, by price)", () => {
    const { router } = routerWith({ random: () => 0.999 })
    expect(providers(planOf(router, { model: "v/a:floor" }))).toEqual(["cheap", "mid", "dear"])
    expect(planOf(router, { model: "v/a:floor" }).strategy).toBe("sort:price")
    router.recordSuccess(planOf(router, { model: "v/a" }), catalog.model("v/a")!.endpoints[2], {
      ttftMs: 10,
      outputTokens: 100,
      generationMs: 1000,
    })
    router.recordSuccess(planOf(router, { model: "v/a" }), catalog.model("v/a")!.endpoints[1], {
      ttftMs: 10,
      outputTokens: 10,
      generationMs: 1000,
    })
    const nitro = planOf(router, { model: "v/a:nitro" })
    expect(providers(nitro)).toEqual(["dear", "mid", "cheap"])
    expect(nitro.strategy).toBe("sort:throughput")
  })

  test(":free keeps only endpoints priced zero, and says so when there are none", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/free:free" }))).toEqual(["gratis"])
    const e = errorOf(router, { model: "v/paid:free" })
    expect(e.status).toBe(404)
    expect(e.message).toContain(":free")
    expect(e.message).toContain("p1 (priced $1/M prompt, $1/M completion)")
  })

  test("a catalog id that ends like a suffix is that model", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/known:free" }))).toEqual(["special"])
  })
})

describe("provider preferences", () => {
  test("order: those providers first, in the given order, then the rest", () => {
    const { router } = routerWith()
    const plan = planOf(router, { model: "v/a", provider: { order: ["dear", "MID"] } })
    expect(providers(plan)).toEqual(["dear", "mid", "cheap"])
    expect(plan.strategy).toBe("order")
  })

  test("order with allow_fallbacks: false keeps only the ordered providers", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/a", provider: { order: ["dear", "mid"], allow_fallbacks: false } }))).toEqual([
      "dear",
      "mid",
    ])
  })

  test("allow_fallbacks: false without an order keeps only the first choice of each model", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/a", models: ["v/b"], provider: { allow_fallbacks: false } }))).toEqual([
      "cheap",
      "bcheap",
    ])
  })

  test("only and ignore take provider slugs; what they remove is named when nothing is left", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/a", provider: { only: ["mid", "dear"] } }))).toEqual(["mid", "dear"])
    expect(providers(planOf(router, { model: "v/a", provider: { ignore: ["cheap"] } }))).toEqual(["mid", "dear"])
    const e = errorOf(router, { model: "v/a", provider: { only: ["nobody"] } })
    expect(e.status).toBe(404)
    expect(e.message).toContain("provider.only [nobody] removed cheap (not listed), mid (not listed), dear (not listed)")
    const both = errorOf(router, { model: "v/a", provider: { only: ["cheap"], ignore: ["cheap"] } })
    expect(both.message).toContain("provider.only [cheap] removed mid")
    expect(both.message).toContain("provider.ignore [cheap] removed cheap (ignored)")
  })

  test("max_price excludes endpoints over it (numbers or numeric strings); none left is 404 saying why", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/a", provider: { max_price: { prompt: 2 } } }))).toEqual(["cheap", "mid"])
    expect(providers(planOf(router, { model: "v/a", provider: { max_price: { completion: "1.5" } } }))).toEqual(["cheap"])
    const e = errorOf(router, { model: "v/a", provider: { max_price: { prompt: "0.5" } } })
    expect(e.status).toBe(404)
    expect(e.message).toContain("provider.max_price (prompt ≤ $0.5/M)")
    expect(e.message).toContain("dear (prompt $10/M over the maximum)")
  })

  test("data_collection: deny excludes endpoints that collect; zdr: true keeps only zero-retention ones", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/policy", provider: { data_collection: "deny" } }))).toEqual(["private", "plain"])
    expect(providers(planOf(router, { model: "v/policy", provider: { zdr: true } }))).toEqual(["private"])
    const e = errorOf(router, { model: "v/policy", provider: { zdr: true, only: ["plain", "collects"] } })
    expect(e.message).toContain("provider.only [plain, collects] removed private (not listed)")
    expect(e.message).toContain("provider.zdr: true removed collects (no zero data retention), plain (no zero data retention)")
  })

  test("quantizations keep matching endpoints (no declared quantization is 'unknown')", () => {
    const { router } = routerWith()
    expect(providers(planOf(router, { model: "v/policy", provider: { quantizations: ["bf16", "unknown"] } }))).toEqual([
      "collects",
      "plain",
    ])
  })

  test("require_parameters excludes endpoints lacking tools, json_schema or reasoning the request uses", () => {
    const { router } = routerWith()
    const tools = [{ type: "function", name: "f" }]
    const schema = { format: { type: "json_schema", name: "x", schema: {} } }
    const req = { model: "v/policy", provider: { require_parameters: true } }
    expect(providers(planOf(router, { ...req, tools }))).toEqual(["collects", "private"])
    expect(providers(planOf(router, { ...req, text: schema }))).toEqual(["collects"])
    expect(providers(planOf(router, { ...req, reasoning: { effort: "high" } }))).toEqual(["collects"])
    // Without require_parameters nothing is excluded; without a capability in use neither.
    expect(providers(planOf(router, { model: "v/policy", tools }))).toHaveLength(3)
    expect(providers(planOf(router, req))).toHaveLength(3)
    const e = errorOf(router, { ...req, provider: { require_parameters: true, only: ["plain"] }, tools })
    expect(e.message).toContain("provider.require_parameters (the request uses tools) removed")
  })

  test("sort price, latency and throughput; unknown stats sort after known ones", () => {
    const { router } = routerWith({ random: () => 0.999 })
    expect(providers(planOf(router, { model: "v/a", provider: { sort: "price" } }))).toEqual(["cheap", "mid", "dear"])
    // No stats yet: latency falls back to price order, deterministically.
    expect(providers(planOf(router, { model: "v/a", provider: { sort: "latency" } }))).toEqual(["cheap", "mid", "dear"])
    const [cheap, mid, dear] = catalog.model("v/a")!.endpoints
    const any = planOf(router, { model: "v/a" })
    router.recordSuccess(any, dear, { ttftMs: 50, outputTokens: 10, generationMs: 100 })
    router.recordSuccess(any, mid, { ttftMs: 500, outputTokens: 10, generationMs: 1000 })
    expect(providers(planOf(router, { model: "v/a", provider: { sort: "latency" } }))).toEqual(["dear", "mid", "cheap"])
    expect(providers(planOf(router, { model: "v/a", provider: { sort: { by: "throughput" } } }))).toEqual([
      "dear",
      "mid",
      "cheap",
    ])
    // The averages move with new samples (EWMA), not all at once.
    for (let i = 0; i < 10; i++) router.recordSuccess(any, cheap, { ttftMs: 5, outputTokens: 10, generationMs: 10 })
    expect(providers(planOf(router, { model: "v/a", provider: { sort: "latency" } }))[0]).toBe("cheap")
  })

  test("sort partition: model keeps model order; none sorts every endpoint together", () => {
    const { router } = routerWith()
    expect(
      providers(planOf(router, { model: "v/a", models: ["v/b"], provider: { sort: { by: "price", partition: "model" } } })),
    ).toEqual(["cheap", "mid", "dear", "bcheap", "bdear"])
    expect(
      providers(planOf(router, { model: "v/a", models: ["v/b"], provider: { sort: { by: "price", partition: "none" } } })),
    ).toEqual(["bcheap", "cheap", "mid", "bdear", "dear"])
  })

  test("the workspace's default sort applies when the request gives none", () => {
    const { router } = routerWith()
    const [, mid] = catalog.model("v/a")!.endpoints
    router.recordSuccess(planOf(router, { model: "v/a" }), mid, { ttftMs: 1, outputTokens: 1, generationMs: 1 })
    const plan = planOf(router, { model: "v/a" }, { defaultSort: "latency" })
    expect(providers(plan)).toEqual(["mid", "cheap", "dear"])
    expect(plan.strategy).toBe("sort:latency")
    expect(providers(planOf(router, { model: "v/a", provider: { sort: "price" } }, { defaultSort: "latency" }))[0]).toBe("cheap")
  })
})

describe("the default order: a draw weighted by 1/price²", () => {
  test("the draw picks the first endpoint; the others follow by price as fallbacks", () => {
    expect(providers(planOf(routerWith({ random: () => 0 }).router, { model: "v/a" }))).toEqual(["cheap", "mid", "dear"])
    // Weights 1/4, 1/16, 1/900 of 0.3236: a draw near the top lands on the dearest.
    expect(providers(planOf(routerWith({ random: () => 0.9999 }).router, { model: "v/a" }))).toEqual(["dear", "cheap", "mid"])
    expect(providers(planOf(routerWith({ random: () => 0.9 }).router, { model: "v/a" }))).toEqual(["mid", "cheap", "dear"])
  })

  test("over many requests the shares follow 1/price²", () => {
    const { router } = routerWith({ random: Math.random })
    const counts = new Map<string, number>()
    const n = 4000
    for (let i = 0; i < n; i++) {
      const first = providers(planOf(router, { model: "v/a" }))[0]
      counts.set(first, (counts.get(first) ?? 0) + 1)
    }
    const total = 1 / 4 + 1 / 16 + 1 / 900
    expect((counts.get("cheap") ?? 0) / n).toBeCloseTo(1 / 4 / total, 1)
    expect((counts.get("mid") ?? 0) / n).toBeCloseTo(1 / 16 / total, 1)
  })

  test("endpoints priced zero come first", () => {
    expect(providers(planOf(routerWith({ random: () => 0.99 }).router, { model: "v/free" }))).toEqual(["gratis", "paid"])
  })
})

describe("cooldown", () => {
  test("three consecutive retryable failures move an endpoint to the end for 30 s, then it is tried again", () => {
    const { router, clock } = routerWith()
    const [cheap] = catalog.model("v/a")!.endpoints
    for (let i = 0; i < 2; i++) router.recordFailure(cheap, "server")
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("cheap")
    router.recordFailure(cheap, "rate_limited")
    // Moved to the end of the whole request, not dropped: still a last resort.
    expect(providers(planOf(router, { model: "v/a", models: ["v/b"] }))).toEqual(["mid", "dear", "bcheap", "bdear", "cheap"])
    // Even an explicit order or sort does not put it first while it cools down.
    expect(providers(planOf(router, { model: "v/a", provider: { order: ["cheap"] } }))).toEqual(["mid", "dear", "cheap"])
    clock.now += 30_000
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("cheap")
  })

  test("a failure right after a cooldown trips a longer one; a success forgets it", () => {
    const { router, clock } = routerWith()
    const [cheap] = catalog.model("v/a")!.endpoints
    for (let i = 0; i < 3; i++) router.recordFailure(cheap, "timeout")
    clock.now += 30_000
    router.recordFailure(cheap, "connection")
    clock.now += 59_000
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("mid")
    clock.now += 1_000
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("cheap")
    router.recordSuccess(planOf(router, { model: "v/a" }), cheap, timing)
    router.recordFailure(cheap, "server")
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("cheap")
  })

  test("request-shaped failures (context length, bad request, auth) do not count", () => {
    const { router } = routerWith()
    const [cheap] = catalog.model("v/a")!.endpoints
    for (const kind of ["context_length", "bad_request", "auth", "context_length"] as const) router.recordFailure(cheap, kind)
    expect(providers(planOf(router, { model: "v/a" }))[0]).toBe("cheap")
  })
})

describe("sticky sessions", () => {
  const session = { userId: "u1", sessionKey: "s1" }

  test("a session stays on the endpoint of its last success for 10 minutes", () => {
    const { router, clock } = routerWith({ random: () => 0 })
    const [, right] = catalog.model("v/pair")!.endpoints
    const first = planOf(router, { model: "v/pair" }, session)
    expect(providers(first)[0]).toBe("left")
    router.recordSuccess(first, right, timing)
    const again = planOf(router, { model: "v/pair" }, session)
    expect(providers(again)).toEqual(["right", "left"])
    expect(again.strategy).toBe("sticky")
    clock.now += 9 * 60_000
    expect(providers(planOf(router, { model: "v/pair" }, session))[0]).toBe("right")
    // Ten minutes after the last success, not after the last request.
    clock.now += 60_000
    expect(providers(planOf(router, { model: "v/pair" }, session))[0]).toBe("left")
  })

  test("scoped by user and model; never with provider.order; only while eligible", () => {
    const { router } = routerWith({ random: () => 0 })
    const [, right] = catalog.model("v/pair")!.endpoints
    router.recordSuccess(planOf(router, { model: "v/pair" }, session), right, timing)
    expect(providers(planOf(router, { model: "v/pair" }, { userId: "u2", sessionKey: "s1" }))[0]).toBe("left")
    expect(providers(planOf(router, { model: "v/pair" }, { userId: "u1", sessionKey: "s2" }))[0]).toBe("left")
    expect(providers(planOf(router, { model: "v/pair", provider: { order: ["left"] } }, session))[0]).toBe("left")
    expect(planOf(router, { model: "v/pair", provider: { order: ["left"] } }, session).stickyScope).toBeUndefined()
    expect(providers(planOf(router, { model: "v/pair", provider: { ignore: ["right"] } }, session))).toEqual(["left"])
    for (let i = 0; i < 3; i++) router.recordFailure(right, "server")
    expect(providers(planOf(router, { model: "v/pair" }, session))).toEqual(["left", "right"])
  })

  test("a failure does not move the session; the next success does", () => {
    const { router } = routerWith({ random: () => 0 })
    const [left, right] = catalog.model("v/pair")!.endpoints
    router.recordSuccess(planOf(router, { model: "v/pair" }, session), right, timing)
    router.recordFailure(right, "server")
    expect(providers(planOf(router, { model: "v/pair" }, session))[0]).toBe("right")
    router.recordSuccess(planOf(router, { model: "v/pair" }, session), left, timing)
    expect(providers(planOf(router, { model: "v/pair" }, session))[0]).toBe("left")
  })

  test("without a session key nothing is remembered", () => {
    const { router } = routerWith({ random: () => 0 })
    const [, right] = catalog.model("v/pair")!.endpoints
    const plan = planOf(router, { model: "v/pair" }, { userId: "u1", sessionKey: null })
    expect(plan.stickyScope).toBeUndefined()
    router.recordSuccess(plan, right, timing)
    expect(providers(planOf(router, { model: "v/pair" }, { userId: "u1", sessionKey: null }))[0]).toBe("left")
    expect(router.sticky.size).toBe(0)
  })
})

describe("a single-endpoint model with no preferences (the short path)", () => {
  // `provider: {}` changes nothing about the plan but takes the general path: the two must agree.
  const cases: Array<[string, Record<string, unknown>, Partial<RouteInput>]> = [
    ["plain", { model: "v/solo" }, {}],
    ["a workspace default sort", { model: "v/solo" }, { defaultSort: "latency" }],
    ["from a preset", { model: "v/solo" }, { preset: "mine", requested: "@preset/mine" }],
    ["from a preset, with a default sort", { model: "v/solo" }, { preset: "mine", defaultSort: "price" }],
    ["a catalog id that looks like a variant", { model: "v/known:free" }, {}],
  ]
  for (const [name, json, input] of cases) {
    test(`${name}: the same plan as the general path`, () => {
      const { router } = routerWith()
      const short = planOf(router, json, input)
      expect(short).toEqual(planOf(router, { ...json, provider: {} }, input))
      expect(short.candidates).toHaveLength(1)
    })
  }

  test("its strategy, candidates and requested id", () => {
    const { router } = routerWith()
    expect(planOf(router, { model: "v/solo" })).toMatchObject({ requested: "v/solo", strategy: "direct", stickyScope: undefined })
    expect(providers(planOf(router, { model: "v/solo" }))).toEqual(["only"])
    expect(planOf(router, { model: "v/solo" }, { preset: "p", defaultSort: "throughput" }).strategy).toBe("preset+sort:throughput")
  })

  test("cooled down, its only endpoint is still the candidate", () => {
    const { router } = routerWith()
    const [endpoint] = planOf(router, { model: "v/solo" }).candidates
    for (let i = 0; i < 10; i++) router.recordFailure(endpoint!, "server")
    expect(router.health.isCoolingDown(endpoint!.id, 1_000_000)).toBe(true)
    expect(providers(planOf(router, { model: "v/solo" }))).toEqual(["only"])
  })

  test("a session, fallbacks or a suffix take the general path (sticky, fallback, the variant's sort)", () => {
    const { router } = routerWith()
    const sticky = planOf(router, { model: "v/solo" }, { sessionKey: "s1", userId: "u1" })
    // The caller's own session: the same session id of another user is another scope.
    expect(sticky.stickyScope).toBe(sessionScopeOf("u1", "s1"))
    expect(planOf(router, { model: "v/solo" }, { sessionKey: "s1", userId: "u2" }).stickyScope).not.toBe(sticky.stickyScope)
    expect(planOf(router, { model: "v/solo", models: ["v/b"] }).strategy).toBe("fallback")
    expect(planOf(router, { model: "v/solo:floor" }).strategy).toBe("sort:price")
  })
})
