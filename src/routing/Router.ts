/**
 * Picks the ordered list of endpoints for a request: `model`, then each of `models`, and for
 * each model its endpoints, filtered by the `provider` preferences and the model suffix,
 * ordered by `order`, `sort` (request, suffix or workspace default) or the default draw
 * weighted by 1/price², with a session's sticky endpoint first and cooled-down endpoints
 * last. Plain data in, plain data out: the catalog, health and sticky maps are in memory, so
 * a plan costs no I/O. The data plane reports each attempt back with plain calls.
 */
import { Effect, Either } from "effect"
import { type ApiError, BadRequest, NotFound } from "../domain/errors.js"
import type { ResponsesRequest } from "../domain/responses.js"
import { quote } from "../domain/validation.js"
import type { ProviderErrorKind } from "../providers/types.js"
import { Catalog, type CatalogShape, type Endpoint, type Model, type ModelKind } from "../services/Catalog.js"
import { EndpointHealth, type HealthOptions } from "./health.js"
import { RollingStats } from "./rolling.js"
import { type ModelVariant, namesPreset, parseModelRef } from "./model-id.js"
import {
  type EndpointFilter,
  filtersOf,
  type Ranked,
  type SortBy,
  type StatsSource,
  slugMatcher,
  sortRanked,
  weightedRanked,
} from "./preferences.js"
import { DEFAULT_STICKY_OPTIONS, sessionScopeOf, StickySessions, type StickyOptions, stickyKeyOf } from "./sticky.js"
import { type RouterShare, shareRouting } from "./shared-routing.js"
import { SharedState } from "../services/SharedState.js"
import { now as clockNow } from "../clock.js"

export interface RoutePlan {
  /** The model id the caller asked for (first of `model`, `models`). */
  readonly requested: string
  /** How the candidates were ordered, for `service_metadata.strategy` (parts joined by "+"). */
  readonly strategy: string
  /** Endpoints to try, in order. */
  readonly candidates: ReadonlyArray<Endpoint>
  /** The user-scoped session key a success is remembered under; undefined when not sticky. */
  readonly stickyScope: string | undefined
}

export interface RouteInput {
  readonly request: ResponsesRequest
  /** Model used when the request names none (the workspace's `default_text_model`). */
  readonly defaultModel?: string | null
  /** Sort used when neither the request nor the model suffix gives one (`default_provider_sort`). */
  readonly defaultSort?: SortBy | null
  /** The caller's user: scopes the session key. */
  readonly userId?: string
  /** `session_id` (body, else `x-session-id`), else `prompt_cache_key`. */
  readonly sessionKey?: string | null
  /** The slug of the preset the request was built from. */
  readonly preset?: string
  /** The model as the caller wrote it, when it differs from `request.model` (a preset form). */
  readonly requested?: string
  /** Which of the request's `model` and `models` came from the preset's config, not from the caller. */
  readonly fromPreset?: { readonly model: boolean; readonly models: boolean }
  /** What the route serves (default chat): a model of another kind is refused (the embeddings and rerank routes ask for theirs). */
  readonly kind?: ModelKind
}

/** Where a model of each kind is served, for the refusal of a model asked for elsewhere. */
const SERVED_AT: Record<ModelKind, string> = {
  chat: "the model requests (POST /v1/responses, /v1/chat/completions, /v1/messages)",
  embedding: "POST /v1/embeddings",
  rerank: "POST /v1/rerank",
}

const KIND_NAMES: Record<ModelKind, string> = { chat: "a chat model", embedding: "an embedding model", rerank: "a rerank model" }

/** What the data plane learned from one attempt that answered. */
export interface AttemptTiming {
  /** From the attempt's start to its first event. */
  readonly ttftMs: number | undefined
  readonly outputTokens: number
  /** The time the output took: first to last event when streamed, the whole call otherwise. */
  readonly generationMs: number | undefined
}

export interface RouterOptions {
  readonly random: () => number
  readonly now: () => number
  readonly health: Partial<HealthOptions>
  readonly sticky: Partial<StickyOptions>
}


/** Failures that say the endpoint is unwell (not the request's fault): they count toward a cooldown. */
const UNHEALTHY: ReadonlySet<ProviderErrorKind> = new Set(["rate_limited", "overloaded", "timeout", "server", "connection"])

/** Failures that count against an endpoint's uptime: the unwell ones except rate limits (as the SDK documents uptime). */
const DOWN: ReadonlySet<ProviderErrorKind> = new Set(["overloaded", "timeout", "server", "connection"])

const VARIANT_SORT: Partial<Record<ModelVariant, SortBy>> = { nitro: "throughput", floor: "price" }

interface Group {
  readonly model: Model
  readonly variant: ModelVariant | undefined
  readonly field: string
  readonly kept: Array<Ranked>
  /** filter label → excluded endpoints with the reason. */
  readonly removed: Map<string, Array<string>>
}

const describeRemovals = (groups: ReadonlyArray<Group>) =>
  groups
    .map((g) => {
      const parts = [...g.removed].map(([label, which]) => `${label} removed ${which.join(", ")}`)
      return `${g.model.id}${g.variant ? `:${g.variant}` : ""}: ${parts.join("; ")}`
    })
    .join(" | ")

export const makeRouter = (catalog: CatalogShape, options: Partial<RouterOptions> = {}) => {
  const random = options.random ?? Math.random
  const now = options.now ?? clockNow
  const health = new EndpointHealth(options.health)
  const sticky = new StickySessions(options.sticky)
  const rolling = new RollingStats()
  /** Set once at start when the processes share routing state (shared-routing.ts). */
  let share: RouterShare | undefined
  const stats: StatsSource = {
    latencyOf: (id) => share?.latencyOf(id) ?? health.latencyOf(id),
    throughputOf: (id) => share?.throughputOf(id) ?? health.throughputOf(id),
  }

  /**
   * The common request: one model named as the catalog lists it, with a single endpoint, and no
   * preferences, fallbacks or session. Its plan is the one the general path makes (the only
   * endpoint, cooled down or not), without that path's lists and closures (~2 % of the CPU of a
   * JSON answer at 32 connections).
   */
  const singleEndpointPlan = (input: RouteInput): RoutePlan | undefined => {
    const { request } = input
    if (request.provider != null || (request.models !== undefined && request.models.length > 0)) return undefined
    if (input.sessionKey != null && input.sessionKey !== "") return undefined
    const id = request.model
    if (id === undefined || id === "" || namesPreset(id)) return undefined
    const model = catalog.model(id)
    if (model === undefined || model.endpoints.length !== 1 || model.kind !== (input.kind ?? "chat")) return undefined
    const sort = input.defaultSort ?? undefined
    const parts = input.preset !== undefined ? ["preset"] : []
    if (sort !== undefined) parts.push(`sort:${sort}`)
    return {
      requested: input.requested ?? id,
      strategy: parts.length === 0 ? "direct" : parts.join("+"),
      candidates: model.endpoints,
      stickyScope: undefined,
    }
  }

  const plan = (input: RouteInput): Either.Either<RoutePlan, ApiError> => {
    const single = singleEndpointPlan(input)
    if (single !== undefined) return Either.right(single)
    const { request } = input
    const prefs = request.provider ?? undefined

    // Model ids in order: `model`, each of `models`; the workspace default when none is named.
    // `stored`: the id was stored earlier (preset, workspace setting): a catalog that lost it is a 400 naming where.
    const ids: Array<{ id: string; field: string; stored?: string }> = []
    const preset = input.preset === undefined ? undefined : `preset ${quote(input.preset)}`
    if (request.model !== undefined && request.model !== "") {
      ids.push({ id: request.model, field: "model", stored: input.fromPreset?.model ? preset : undefined })
    }
    for (const [i, id] of (request.models ?? []).entries()) {
      ids.push({ id, field: `models[${i}]`, stored: input.fromPreset?.models ? preset : undefined })
    }
    if (ids.length === 0 && input.defaultModel) {
      ids.push({ id: input.defaultModel, field: "model", stored: "the workspace setting default_text_model" })
    }
    if (ids.length === 0) return Either.left(new BadRequest({ message: "Invalid request: model: is missing" }))

    const at = now()
    const cooling = (e: Endpoint) => health.isCoolingDown(e.id, at)
    const groups: Array<Group> = []
    const seen = new Set<string>()
    let index = 0
    for (const { id, field, stored } of ids) {
      if (namesPreset(id)) {
        return Either.left(
          new BadRequest({ message: `Invalid request: ${field}: ${quote(id)}: a preset can be named only in model or preset` }),
        )
      }
      const ref = parseModelRef(id, (m) => catalog.model(m) !== undefined)
      const model = catalog.model(ref.id)
      if (model === undefined && stored !== undefined) {
        return Either.left(
          new BadRequest({
            message: `Invalid request: ${stored} names ${field === "model" ? "the model" : field} ${quote(id)}, which this gateway's catalog does not have (the catalog changed since it was saved)`,
          }),
        )
      }
      if (model === undefined) {
        return Either.left(new NotFound({ message: `${field}: model ${quote(id)} does not exist in this gateway's catalog` }))
      }
      const kind = input.kind ?? "chat"
      if (model.kind !== kind) {
        return Either.left(
          new BadRequest({ message: `Invalid request: ${field}: ${quote(id)} is ${KIND_NAMES[model.kind]}, served by ${SERVED_AT[model.kind]}, not ${KIND_NAMES[kind]}` }),
        )
      }
      const group: Group = { model, variant: ref.variant, field, kept: [], removed: new Map() }
      const filters: ReadonlyArray<EndpointFilter> = filtersOf(prefs, request, ref.variant)
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

    const live = groups.filter((g) => g.kept.length > 0)
    if (live.length === 0) {
      return Either.left(
        new NotFound({
          message: `No endpoint is left to serve this request after its routing preferences: ${describeRemovals(groups)}`,
        }),
      )
    }

    const order = prefs?.order != null && prefs.order.length > 0 ? prefs.order : undefined
    const requestSort = prefs?.sort == null ? undefined : typeof prefs.sort === "string" ? prefs.sort : prefs.sort.by
    const partitionNone = typeof prefs?.sort === "object" && prefs.sort?.partition === "none"
    const allowFallbacks = prefs?.allow_fallbacks !== false
    // Never sticky when the caller fixed the order itself.
    const stickyScope =
      order === undefined && input.sessionKey != null && input.sessionKey !== ""
        ? sessionScopeOf(input.userId ?? "", input.sessionKey)
        : undefined

    let stickyApplied = false
    let orderApplied = false

    /** One set of endpoints in the order they are tried: ordered providers, then by sort or the draw. */
    const arrange = (list: ReadonlyArray<Ranked>, by: SortBy | undefined, draw: boolean): Array<Ranked> => {
      let rest = list
      const front: Array<Ranked> = []
      if (order !== undefined) {
        for (const slug of order) {
          const matches = slugMatcher([slug])
          for (const r of rest) if (matches(r.endpoint)) front.push(r)
          rest = rest.filter((r) => !matches(r.endpoint))
        }
        if (front.length > 0) orderApplied = true
      }
      const sorted = by !== undefined ? sortRanked(rest, by, stats) : draw ? weightedRanked(rest, random) : sortRanked(rest, "price", stats)
      return [...front, ...sorted]
    }

    /** Healthy endpoints first, cooled-down ones after; the session's endpoint first when eligible. */
    const arrangeSet = (list: ReadonlyArray<Ranked>, by: SortBy | undefined, stickyModel: Model | undefined) => {
      const healthy = list.filter((r) => !cooling(r.endpoint))
      const cooled = list.filter((r) => cooling(r.endpoint))
      const ordered = [...arrange(healthy, by, true), ...arrange(cooled, by, false)]
      if (stickyScope !== undefined && stickyModel !== undefined) {
        const endpointId = sticky.get(stickyKeyOf(stickyScope, stickyModel.id), at)
        const i = ordered.findIndex((r) => r.endpoint.id === endpointId && r.endpoint.modelId === stickyModel.id)
        if (i >= 0 && !cooling(ordered[i].endpoint)) {
          if (i > 0) ordered.unshift(...ordered.splice(i, 1))
          stickyApplied = true
        }
      }
      // allow_fallbacks: false without an order: only the first choice.
      return !allowFallbacks && order === undefined ? ordered.slice(0, 1) : ordered
    }

    let ranked: Array<Ranked>
    let firstSort: SortBy | undefined
    if (partitionNone && requestSort !== undefined) {
      // One sort over every model's endpoints together.
      firstSort = requestSort
      ranked = arrangeSet(
        live.flatMap((g) => g.kept),
        requestSort,
        live[0].model,
      )
    } else {
      ranked = []
      for (const [i, g] of live.entries()) {
        const suffixSort = g.variant === undefined ? undefined : VARIANT_SORT[g.variant]
        const by = suffixSort ?? requestSort ?? input.defaultSort ?? undefined
        if (i === 0) firstSort = by
        ranked.push(...arrangeSet(g.kept, by, g.model))
      }
    }
    // A cooled-down endpoint is the last resort of the whole request, not of its model.
    const candidates = [
      ...ranked.filter((r) => !cooling(r.endpoint)),
      ...ranked.filter((r) => cooling(r.endpoint)),
    ].map((r) => r.endpoint)

    const parts: Array<string> = []
    if (input.preset !== undefined) parts.push("preset")
    if (stickyApplied) parts.push("sticky")
    if (orderApplied) parts.push("order")
    if (firstSort !== undefined) parts.push(`sort:${firstSort}`)
    if (live[0].variant === "free") parts.push("free")
    if (ids.length > 1) parts.push("fallback")
    if (parts.length === 0) parts.push("direct")

    return Either.right({
      requested: input.requested ?? ids[0].id,
      strategy: parts.join("+"),
      candidates,
      stickyScope,
    })
  }

  /** An attempt that failed before answering; only failures that say the endpoint is unwell count. */
  const recordFailure = (endpoint: Endpoint, kind: ProviderErrorKind) => {
    if (!UNHEALTHY.has(kind)) return
    const at = now()
    const tripped = health.recordFailure(endpoint.id, at)
    if (tripped !== undefined) share?.tripped(endpoint.id, tripped)
    if (DOWN.has(kind)) rolling.recordOutcome(endpoint.id, false, at)
  }

  /** An attempt that answered: health, rolling stats, and the session's endpoint. */
  const recordSuccess = (plan: RoutePlan, endpoint: Endpoint, timing: AttemptTiming) => {
    const at = now()
    if (health.recordSuccess(endpoint.id)) share?.recovered(endpoint.id)
    rolling.recordOutcome(endpoint.id, true, at)
    if (timing.ttftMs !== undefined) {
      health.recordLatency(endpoint.id, timing.ttftMs)
      rolling.recordLatency(endpoint.id, timing.ttftMs, at)
    }
    if (timing.generationMs !== undefined && timing.generationMs > 0 && timing.outputTokens > 0) {
      const tokensPerSecond = (timing.outputTokens * 1000) / timing.generationMs
      health.recordThroughput(endpoint.id, tokensPerSecond)
      rolling.recordThroughput(endpoint.id, tokensPerSecond, at)
    }
    if (plan.stickyScope !== undefined) {
      sticky.set(stickyKeyOf(plan.stickyScope, endpoint.modelId), endpoint.id, at)
      share?.stuck(plan.stickyScope, endpoint.modelId, endpoint.id, at)
    }
  }

  /** Connects the router to the other processes (once, at start). */
  const shareWith = (other: RouterShare) => {
    share = other
  }

  /** What the endpoints listing shows of an endpoint: its health now and its rolling windows. */
  const endpointStats = (endpoint: Endpoint) => {
    const at = now()
    return { health: health.stats(endpoint.id), coolingDown: health.isCoolingDown(endpoint.id, at), rolling: rolling.snapshot(endpoint.id, at) }
  }

  /** The shared state, when the processes share it. */
  const sharing = () => share

  return { plan, recordFailure, recordSuccess, endpointStats, health, sticky, catalog, shareWith, sharing, now } as const
}

export class Router extends Effect.Service<Router>()("Router", {
  scoped: Effect.gen(function* () {
    const router = makeRouter(yield* Catalog)
    // With Redis, sticky sessions, cooldowns and the rolling figures are the processes' together.
    const shared = yield* SharedState
    if (shared.link !== undefined && shared.subscriber !== undefined) {
      const stop = shareRouting(router, shared.link, shared.subscriber, { self: shared.self, stickyTtlMs: DEFAULT_STICKY_OPTIONS.ttlMs })
      yield* Effect.addFinalizer(() => Effect.sync(stop))
    }
    return router
  }),
  dependencies: [SharedState.Default],
}) {}
