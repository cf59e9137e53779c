/**
 * Picks the ordered list of endpoints for a request: `model`, then each of `models`, and for
 * each model its endpoints, filtered by the `provider` preferences and the model suffix,
 * ordered by `order`, `sort` (request, suffix or workspace default) or the default draw
 * weighted by 1/price², with a session's sticky endpoint first and cooled-down endpoints
 * last. Plain data in, plain data out: the catalog, health and sticky maps are in memory, so
 * a plan costs no I/O. The data plane reports each attempt back with plain calls.
 */
import { Effect, Either } from "effect"
import { type ApiError, BadRequest } from "../domain/errors.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { ProviderErrorKind } from "../providers/types.js"
import { Catalog, type CatalogShape, type Endpoint, type ModelKind } from "../services/Catalog.js"
import { arrangeInto, endpointGroups, healthyFirst, namedModels, noEndpointLeft, putStickyFirst } from "./candidates.js"
import { EndpointHealth, type HealthOptions } from "./health.js"
import { RollingStats } from "./rolling.js"
import { type ModelVariant, namesPreset } from "./model-id.js"
import type { Ranked, SortBy, StatsSource } from "./preferences.js"
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

/**
 * The common request: one model named as the catalog lists it, with a single endpoint, and no
 * preferences, fallbacks or session. Its plan is the one the general path makes (the only
 * endpoint, cooled down or not), without that path's lists and closures (~2 % of the CPU of a
 * JSON answer at 32 connections).
 */
const singleEndpointPlan = (catalog: CatalogShape, input: RouteInput): RoutePlan | undefined => {
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

  const plan = (input: RouteInput): Either.Either<RoutePlan, ApiError> => {
    const single = singleEndpointPlan(catalog, input)
    if (single !== undefined) return Either.right(single)
    const { request } = input
    const prefs = request.provider ?? undefined

    const ids = namedModels(request, input.defaultModel, input.preset, input.fromPreset)
    if (ids.length === 0) return Either.left(new BadRequest({ message: "Invalid request: model: is missing" }))
    const at = now()
    const cooling = (e: Endpoint) => health.isCoolingDown(e.id, at)
    const groups = endpointGroups(catalog, ids, request, input.kind ?? "chat")
    if (!Array.isArray(groups)) return Either.left(groups)
    const live = groups.filter((g) => g.kept.length > 0)
    if (live.length === 0) return Either.left(noEndpointLeft(groups))

    const order = prefs?.order != null && prefs.order.length > 0 ? prefs.order : undefined
    const requestSort = prefs?.sort == null ? undefined : typeof prefs.sort === "string" ? prefs.sort : prefs.sort.by
    const allowFallbacks = prefs?.allow_fallbacks !== false
    // Never sticky when the caller fixed the order itself.
    const stickyScope =
      order === undefined && input.sessionKey != null && input.sessionKey !== ""
        ? sessionScopeOf(input.userId ?? "", input.sessionKey)
        : undefined
    // `partition: "none"`: one sort over every model's endpoints together; else one set per model.
    const together = requestSort !== undefined && typeof prefs?.sort === "object" && prefs.sort?.partition === "none"

    let stickyApplied = false
    let orderApplied = false
    let firstSort: SortBy | undefined
    const ranked: Array<Ranked> = []
    for (let i = 0; i < (together ? 1 : live.length); i++) {
      const group = live[i]
      const list = together ? live.flatMap((g) => g.kept) : group.kept
      const suffixSort = group.variant === undefined ? undefined : VARIANT_SORT[group.variant]
      const by = together ? requestSort : (suffixSort ?? requestSort ?? input.defaultSort ?? undefined)
      if (i === 0) firstSort = by
      // Healthy endpoints first, cooled-down ones after; the session's endpoint first when eligible.
      const ordered: Array<Ranked> = []
      if (arrangeInto(ordered, list.filter((r) => !cooling(r.endpoint)), by, true, order, stats, random)) orderApplied = true
      if (arrangeInto(ordered, list.filter((r) => cooling(r.endpoint)), by, false, order, stats, random)) orderApplied = true
      if (stickyScope !== undefined && putStickyFirst(ordered, sticky.get(stickyKeyOf(stickyScope, group.model.id), at), group.model.id, cooling)) {
        stickyApplied = true
      }
      // allow_fallbacks: false without an order: only the first choice.
      ranked.push(...(!allowFallbacks && order === undefined ? ordered.slice(0, 1) : ordered))
    }

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
      candidates: healthyFirst(ranked, cooling),
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
