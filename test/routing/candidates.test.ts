/**
 * The route plan's steps (src/routing/candidates.ts) on their own: the model ids a request names,
 * each model's endpoints after the filters, and the order within a set. The plan as a whole is
 * router.test.ts's.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import type { EndpointEntry, ModelEntry } from "../../src/config/file.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { arrangeInto, endpointGroups, healthyFirst, namedModels, noEndpointLeft, putStickyFirst } from "../../src/routing/candidates.js"
import type { Ranked, StatsSource } from "../../src/routing/preferences.js"
import { buildCatalog, type Endpoint } from "../../src/services/Catalog.js"

const ep = (provider: string, prompt: number): EndpointEntry => ({ provider, upstream_model: "up", pricing: { prompt, completion: prompt } })

const MODELS: ReadonlyArray<ModelEntry> = [
  { id: "v/a", context_length: 8000, endpoints: [ep("cheap", 1), ep("mid", 2), ep("dear", 10)] as unknown as ModelEntry["endpoints"] },
  { id: "v/b", context_length: 8000, endpoints: [ep("bcheap", 0.5)] as unknown as ModelEntry["endpoints"] },
  { id: "v/emb", kind: "embedding", context_length: 8000, endpoints: [ep("cheap", 1)] as unknown as ModelEntry["endpoints"] },
]

const catalog = buildCatalog(
  ["cheap", "mid", "dear", "bcheap"].map((id) => ({ id, kind: "fake" as const })),
  MODELS,
)

const request = (json: Record<string, unknown>) => Either.getOrThrow(decodeResponsesRequest({ input: "hi", ...json }))

/** The endpoints of v/a in catalog order, ranked as the filter step ranks them. */
const ranked = (): Array<Ranked> => (catalog.model("v/a")?.endpoints ?? []).map((endpoint, index) => ({ endpoint, index }))

const noStats: StatsSource = { latencyOf: () => undefined, throughputOf: () => undefined }

const providers = (list: ReadonlyArray<Ranked>) => list.map((r) => r.endpoint.provider.id)

describe("the model ids a request names", () => {
  test("model first, then each of models, each with the field it came from", () => {
    const ids = namedModels(request({ model: "v/a", models: ["v/b", "v/c"] }), "v/default", undefined, undefined)
    expect(ids.map((m) => [m.id, m.field])).toEqual([
      ["v/a", "model"],
      ["v/b", "models[0]"],
      ["v/c", "models[1]"],
    ])
  })

  test("the workspace default only when the request names none, said to be the workspace setting", () => {
    expect(namedModels(request({}), "v/default", undefined, undefined)).toEqual([
      { id: "v/default", field: "model", stored: "the workspace setting default_text_model" },
    ])
    expect(namedModels(request({}), null, undefined, undefined)).toEqual([])
  })

  test("ids the preset gave are said to be the preset's; the caller's own are not", () => {
    const ids = namedModels(request({ model: "v/a", models: ["v/b"] }), undefined, "fast", { model: false, models: true })
    expect(ids.map((m) => m.stored)).toEqual([undefined, 'preset "fast"'])
  })
})

describe("each model's endpoints after the filters", () => {
  test("an endpoint kept for an earlier id is not kept twice", () => {
    const groups = endpointGroups(catalog, namedModels(request({ model: "v/a", models: ["v/a"] }), undefined, undefined, undefined), request({}), "chat")
    if (!Array.isArray(groups)) throw new Error(`expected groups, got ${groups.message}`)
    expect(groups.map((g) => g.kept.length)).toEqual([3, 0])
  })

  test("a filter's removals are kept under its label, and the 404 names them", () => {
    const req = request({ model: "v/a", provider: { only: ["mid"] } })
    const groups = endpointGroups(catalog, namedModels(req, undefined, undefined, undefined), req, "chat")
    if (!Array.isArray(groups)) throw new Error(`expected groups, got ${groups.message}`)
    expect(providers(groups[0].kept)).toEqual(["mid"])
    expect([...groups[0].removed.keys()]).toEqual(["provider.only [mid]"])
    expect(noEndpointLeft(groups).message).toContain("v/a: provider.only [mid] removed cheap (not listed), dear (not listed)")
  })

  test("a model of another kind is refused, naming where it is served", () => {
    const refused = endpointGroups(catalog, [{ id: "v/emb", field: "model" }], request({}), "chat")
    if (Array.isArray(refused)) throw new Error("expected a refusal")
    expect(refused._tag).toBe("BadRequest")
    expect(refused.message).toContain("is an embedding model, served by POST /v1/embeddings")
  })

  test("an id the catalog lost since it was stored is a 400 naming where it was stored; an unknown one a 404", () => {
    const lost = endpointGroups(catalog, [{ id: "v/gone", field: "model", stored: 'preset "fast"' }], request({}), "chat")
    const unknown = endpointGroups(catalog, [{ id: "v/gone", field: "models[0]" }], request({}), "chat")
    if (Array.isArray(lost) || Array.isArray(unknown)) throw new Error("expected refusals")
    expect(lost._tag).toBe("BadRequest")
    expect(lost.message).toContain('preset "fast" names the model "v/gone"')
    expect(unknown._tag).toBe("NotFound")
  })
})

describe("the order within a set", () => {
  test("the order's providers come first, slug by slug, the rest by price; it says the order applied", () => {
    const into: Array<Ranked> = []
    expect(arrangeInto(into, ranked(), undefined, false, ["dear", "mid"], noStats, () => 0)).toBe(true)
    expect(providers(into)).toEqual(["dear", "mid", "cheap"])
  })

  test("an order that names none of the set does not apply", () => {
    const into: Array<Ranked> = []
    expect(arrangeInto(into, ranked(), "price", true, ["bcheap"], noStats, () => 0)).toBe(false)
    expect(providers(into)).toEqual(["cheap", "mid", "dear"])
  })

  test("it appends to what the list holds", () => {
    const list = ranked()
    const into: Array<Ranked> = [list[2]]
    arrangeInto(into, list.slice(0, 2), undefined, false, undefined, noStats, () => 0)
    expect(providers(into)).toEqual(["dear", "cheap", "mid"])
  })

  test("the session's endpoint moves to the front, unless it is cooling down", () => {
    const list = ranked()
    const dear = list[2].endpoint
    expect(putStickyFirst(list, dear.id, "v/a", () => true)).toBe(false)
    expect(providers(list)).toEqual(["cheap", "mid", "dear"])
    expect(putStickyFirst(list, dear.id, "v/a", () => false)).toBe(true)
    expect(providers(list)).toEqual(["dear", "cheap", "mid"])
    expect(putStickyFirst(list, dear.id, "v/b", () => false)).toBe(false)
  })

  test("cooled-down endpoints are the last resort of the whole request, in their order", () => {
    const list = ranked()
    const cooling = (e: Endpoint) => e.provider.id !== "mid"
    expect(healthyFirst(list, cooling).map((e) => e.provider.id)).toEqual(["mid", "cheap", "dear"])
  })
})
