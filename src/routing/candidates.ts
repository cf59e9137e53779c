/**
 * The steps of a route plan (Router.ts) from the request to the endpoints it tries: the model ids
 * it names, each model's endpoints left by the `provider` filters, and their order within a set
 * (the caller's `order`, then the sort or the draw, the session's endpoint first). Plain functions
 * of their arguments, the router's state passed in: they run for every model request.
 */
import { type ApiError, BadRequest, NotFound } from "../domain/errors.js"
import type { ResponsesRequest } from "../domain/responses.js"
import { quote } from "../domain/validation.js"
import type { CatalogShape, Endpoint, Model, ModelKind } from "../services/Catalog.js"
import { type ModelVariant, namesPreset, parseModelRef } from "./model-id.js"
import { filtersOf, type Ranked, type SortBy, type StatsSource, slugMatcher, sortRanked, weightedRanked } from "./preferences.js"

/** A model id the request names, with the field it came from. */
export interface NamedModel {
  readonly id: string
  readonly field: string
  /** Where the id was stored earlier (preset, workspace setting): a catalog that lost it is a 400 naming where. */
  readonly stored?: string | undefined
}

/** One named model and its endpoints after the request's filters. */
export interface Group {
  readonly model: Model
  readonly variant: ModelVariant | undefined
  readonly field: string
  readonly kept: Array<Ranked>
  /** filter label → excluded endpoints with the reason. */
  readonly removed: Map<string, Array<string>>
}

/** Where a model of each kind is served, for the refusal of a model asked for elsewhere. */
const SERVED_AT: Record<ModelKind, string> = {
  chat: "the model requests (POST /v1/responses, /v1/chat/completions, /v1/messages)",
  embedding: "POST /v1/embeddings",
  rerank: "POST /v1/rerank",
}

const KIND_NAMES: Record<ModelKind, string> = { chat: "a chat model", embedding: "an embedding model", rerank: "a rerank model" }

/** The model ids in order: `model`, each of `models`; the workspace default when none is named (empty: none at all). */
export const namedModels = (
  request: ResponsesRequest,
  defaultModel: string | null | undefined,
  presetSlug: string | undefined,
  fromPreset: { readonly model: boolean; readonly models: boolean } | undefined,
): Array<NamedModel> => {
  const ids: Array<NamedModel> = []
  const preset = presetSlug === undefined ? undefined : `preset ${quote(presetSlug)}`
  if (request.model !== undefined && request.model !== "") {
    ids.push({ id: request.model, field: "model", stored: fromPreset?.model ? preset : undefined })
  }
  for (const [i, id] of (request.models ?? []).entries()) {
    ids.push({ id, field: `models[${i}]`, stored: fromPreset?.models ? preset : undefined })
  }
  if (ids.length === 0 && defaultModel) {
    ids.push({ id: defaultModel, field: "model", stored: "the workspace setting default_text_model" })
  }
  return ids
}

/**
 * Each named model with its endpoints left by the request's filters (an endpoint already kept for
 * an earlier id is not kept twice), or the refusal of the first id that names no catalog model of
 * `kind`.
 */
export const endpointGroups = (
  catalog: CatalogShape,
  ids: ReadonlyArray<NamedModel>,
  request: ResponsesRequest,
  kind: ModelKind,
): Array<Group> | ApiError => {
  const groups: Array<Group> = []
  const seen = new Set<string>()
  let index = 0
  for (const { id, field, stored } of ids) {
    if (namesPreset(id)) {
      return new BadRequest({ message: `Invalid request: ${field}: ${quote(id)}: a preset can be named only in model or preset` })
    }
    const ref = parseModelRef(id, (m) => catalog.model(m) !== undefined)
    const model = catalog.model(ref.id)
    if (model === undefined && stored !== undefined) {
      return new BadRequest({
        message: `Invalid request: ${stored} names ${field === "model" ? "the model" : field} ${quote(id)}, which this gateway's catalog does not have (the catalog changed since it was saved)`,
      })
    }
    if (model === undefined) {
      return new NotFound({ message: `${field}: model ${quote(id)} does not exist in this gateway's catalog` })
    }
    if (model.kind !== kind) {
      return new BadRequest({
        message: `Invalid request: ${field}: ${quote(id)} is ${KIND_NAMES[model.kind]}, served by ${SERVED_AT[model.kind]}, not ${KIND_NAMES[kind]}`,
      })
    }
    const group: Group = { model, variant: ref.variant, field, kept: [], removed: new Map() }
    const filters = filtersOf(request.provider, request, ref.variant)
    for (const endpoint of model.endpoints) {
      const key = `${model.id}|${endpoint.id}`
      if (seen.has(key)) continue
      let excluded = false
      for (const filter of filters) {
        const why = filter.reject(endpoint)
        if (why === undefined) continue
        const list = group.removed.get(filter.label) ?? []
        list.push(`${endpoint.provider.id} (${why})`)
        group.removed.set(filter.label, list)
        excluded = true
        break
      }
      if (excluded) continue
      seen.add(key)
      group.kept.push({ endpoint, index: index++ })
    }
    groups.push(group)
  }
  return groups
}

/** The 404 of a request whose filters left no endpoint, naming what each filter removed from each model. */
export const noEndpointLeft = (groups: ReadonlyArray<Group>): NotFound => {
  const removals = groups
    .map((g) => {
      const parts = [...g.removed].map(([label, which]) => `${label} removed ${which.join(", ")}`)
      return `${g.model.id}${g.variant ? `:${g.variant}` : ""}: ${parts.join("; ")}`
    })
    .join(" | ")
  return new NotFound({ message: `No endpoint is left to serve this request after its routing preferences: ${removals}` })
}

/**
 * Pushes `list` onto `into` in the order it is tried: the providers of the caller's `order` first
 * (slug by slug), then by `by`, else the weighted draw (`draw`) or price. True when `order` put any
 * endpoint first.
 */
export const arrangeInto = (
  into: Array<Ranked>,
  list: ReadonlyArray<Ranked>,
  by: SortBy | undefined,
  draw: boolean,
  order: ReadonlyArray<string> | undefined,
  stats: StatsSource,
  random: () => number,
): boolean => {
  let rest = list
  let ordered = false
  if (order !== undefined) {
    for (const slug of order) {
      const matches = slugMatcher([slug])
      for (const r of rest) {
        if (!matches(r.endpoint)) continue
        into.push(r)
        ordered = true
      }
      rest = rest.filter((r) => !matches(r.endpoint))
    }
  }
  const sorted = by !== undefined ? sortRanked(rest, by, stats) : draw ? weightedRanked(rest, random) : sortRanked(rest, "price", stats)
  into.push(...sorted)
  return ordered
}

/** Moves the session's endpoint (`endpointId` of `modelId`) to the front of `ordered` when it is there and not cooling down; true if it is first now. */
export const putStickyFirst = (
  ordered: Array<Ranked>,
  endpointId: string | undefined,
  modelId: string,
  cooling: (e: Endpoint) => boolean,
): boolean => {
  const i = ordered.findIndex((r) => r.endpoint.id === endpointId && r.endpoint.modelId === modelId)
  if (i < 0 || cooling(ordered[i].endpoint)) return false
  if (i > 0) ordered.unshift(...ordered.splice(i, 1))
  return true
}

/** The endpoints of `ranked` in the order they are tried: a cooled-down one is the last resort of the whole request, not of its model. */
export const healthyFirst = (ranked: ReadonlyArray<Ranked>, cooling: (e: Endpoint) => boolean): Array<Endpoint> =>
  [...ranked.filter((r) => !cooling(r.endpoint)), ...ranked.filter((r) => cooling(r.endpoint))].map((r) => r.endpoint)
