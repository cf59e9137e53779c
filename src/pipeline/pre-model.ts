/**
 * Everything decided before the upstream call, as named stages over one normalized request:
 * ingress (ingress.ts) → the pre-model stages in order (preset.ts, guardrails.ts, one per plugin
 * of the request: plugins/index.ts) → routing (routing.ts) → money (money.ts) and the reservation.
 *
 * The decision is plain code over reads the services keep in memory; only a read that misses
 * memory, and a reservation, run on the runtime (a request on a cached, unlimited key makes no
 * runtime call: ~60 µs less CPU per request than one `Effect.gen` per step).
 * Those loads (the plugins' outbound calls among them) count in the request's deadline: route.ts
 * gives the pending preparation a stop signal, and a load still running when it aborts is
 * interrupted (its calls aborted) and the request refused (408, or its client gone), recorded.
 */
import { Effect, Either, Option, type Types } from "effect"
import type { ApiError } from "../domain/errors.js"
import { CLIENT_HEADER_MAX } from "../domain/generations.js"
import type { FileAnnotation, ResponsesRequest } from "../domain/responses.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import type { Citable } from "../tools/types.js"
import type { PrincipalShape } from "../services/Auth.js"
import { type ContentPolicy, storesContent } from "../services/ContentPolicy.js"
import type { GuardrailsShape } from "../services/Guardrails.js"
import type { KeyStore } from "../services/KeyStore.js"
import type { PresetStore } from "../services/PresetStore.js"
import type { Reservation, Spend } from "../services/Spend.js"
import { DEFAULT_MAX_TOKENS_PER_FILE, DEFAULT_MAX_TOKENS_PER_IMAGE } from "../config/Config.js"
import type { PartAllowance } from "../domain/pricing.js"
import { responsesFormat } from "../formats/responses/index.js"
import type { ClientFormat } from "../formats/format.js"
import { makeGuardrailsStage } from "./guardrails.js"
import { authenticate, decodeBody } from "./ingress.js"
import { applyChange, type Ingress, type Loaded, Missing, type PipelineEntry, type PreModelStage, type StagesStopped, withRecord, type StageState } from "./stages.js"
import { moneyOf } from "./money.js"
import { type CompressionSettings, DEFAULT_COMPRESSION, type FitFor, makeContextFit } from "./plugins/context-compression.js"
import type { PluginSet } from "./plugins/index.js"
import { makeModelRouterStage, routerOf } from "./plugins/model-router.js"
import { makeModerationStage, type ModerationClient } from "./plugins/moderation.js"
import { makePresetStage } from "./preset.js"
import { makeRouting, sessionIdOf } from "./routing.js"
import type { Settings } from "../config/Config.js"
import { declaresServerTools, type ServerToolPlan, serverToolPlanOf } from "../tools/declare.js"

/** Everything decided before the upstream call but the reservation. */
export interface Decision {
  readonly principal: PrincipalShape
  readonly request: ResponsesRequest
  readonly plan: RoutePlan
  readonly sessionId: string | null
  readonly storeContent: boolean
  /** The caller asked for routing metadata (`X-Service-Metadata: enabled` or the SDK's alias). */
  readonly withMetadata: boolean
  /** It asked with the SDK's header (`X-OpenRouter-Metadata`): answer `openrouter_metadata` too. */
  readonly metadataAlias: boolean
  /** Prompt tokens estimated from the body, (characters ÷ 4), charged for calls cut without usage. */
  readonly estimatedInputTokens: number
  /** A true upper bound of the prompt's tokens (`promptTokenBound`): reserved, and the most input ever charged. */
  readonly promptBound: number
  /** The most the request can cost: the estimate plus the output bound at the dearest candidate's price. */
  readonly worstCase: number
  /** Every candidate is BYOK (a failover may land on one that is not, so only then). */
  readonly allByok: boolean
  /** What the client said about itself, for the generation record (capped, null when absent). */
  readonly httpReferer: string | null
  readonly appTitle: string | null
  readonly userAgent: string | null
  /** `service_metadata.pipeline`: what the stages reported (undefined when none did). */
  readonly pipeline: ReadonlyArray<PipelineEntry> | undefined
  /** USD the stages spent on their own outbound calls (OCR pages, a priced moderation call): in the worst case, charged with the answer. */
  readonly spentUsd: number
  /** Model calls the stages made (fusion's inner calls): the server-tool loop counts them in `server.max_upstream_calls`. */
  readonly upstreamCalls: number
  /** The request for a failover candidate, when context-compression made it for the first (undefined: as it is). */
  readonly fitFor: FitFor | undefined
  /** The model router that chose the model (`auto`, `pareto`), or the plugin that took part in the answer (its id, e.g. `fusion`), for the generation record; null when none did. */
  readonly router: string | null
  /** The request's generation id when a stage needed it before the decision (fusion's inner calls name it as their parent); else undefined: made after. */
  readonly generationId: string | undefined
  /** Annotations for the answer's text (the file-parser's `file` annotations); undefined when none. */
  readonly annotations: ReadonlyArray<FileAnnotation> | undefined
  /** The server tools the request declares and the loop's budget (undefined: none, today's one turn). */
  readonly serverTools?: ServerToolPlan
  /** A preset's system prompt (input the body did not carry, "" when none): the loop's turns count it. */
  readonly presetInstructions?: string
  /** Links the answer may cite, from the stages (the web plugins' results): `url_citation` annotations. */
  readonly citable?: ReadonlyArray<Citable>
  /** The client format's own state of this request (`ClientFormat.stateOf`), for its encoder; undefined in the common case. */
  readonly formatState?: unknown
}

export interface Prepared extends Decision {
  readonly reservation: Option.Option<Reservation>
}

/** `load`, interrupted when `stop` aborts (the fetches and parses it waits on are aborted with it): false then. */
const untilStopped = (load: Effect.Effect<void>, stop: AbortSignal): Effect.Effect<boolean> =>
  Effect.raceFirst(
    Effect.as(load, true),
    Effect.async<boolean>((resume) => {
      const onStop = () => resume(Effect.succeed(false))
      stop.addEventListener("abort", onStop, { once: true })
      return Effect.sync(() => stop.removeEventListener("abort", onStop))
    }),
  )

/** A client header kept on the generation: null when absent or empty, cut at CLIENT_HEADER_MAX. */
const clientHeader = (v: string | null): string | null =>
  v === null || v === "" ? null : v.length > CLIENT_HEADER_MAX ? v.slice(0, CLIENT_HEADER_MAX) : v

const isEnabled = (v: string | null) => v !== null && v.toLowerCase() === "enabled"

/** `X-Service-Metadata: enabled` (or the legacy header) asks for routing metadata. */
const metadataEnabled = (headers: Headers) =>
  isEnabled(headers.get("x-service-metadata") ?? headers.get("x-service-experimental-metadata"))

/** The official SDK's names for the same ask; its answer also carries `openrouter_metadata`. */
const sdkMetadataEnabled = (headers: Headers) =>
  isEnabled(headers.get("x-openrouter-metadata") ?? headers.get("x-openrouter-experimental-metadata"))

/** The body through the format's decoder, then each entry of its `plugins` through its plugin's Schema (a request that lists none: one check). */
const decodeWithPlugins = (format: ClientFormat, bodyText: string, loaded: Loaded, plugins: PluginSet): Ingress | ApiError | Missing => {
  const decoded = decodeBody(format, bodyText, loaded)
  if ("_tag" in decoded) return decoded
  const checked = plugins.decode(decoded.request)
  if ("_tag" in checked || checked === decoded.request) return "_tag" in checked ? checked : decoded
  return { body: decoded.body, request: checked, formatState: decoded.formatState }
}

/** The services the decision reads, as plain objects. */
export interface PrepareServices {
  readonly keys: KeyStore
  readonly policy: ContentPolicy
  readonly presets: PresetStore
  readonly router: Router
  readonly guardrails: GuardrailsShape
  readonly spend: Spend
  /** The moderation API of `plugins.moderation` (undefined: not configured). */
  readonly moderation?: { readonly client: ModerationClient | undefined }
}

export type Preparation =
  | { readonly ready: Prepared; readonly refused?: never; readonly pending?: never }
  | { readonly refused: ApiError; readonly ready?: never; readonly pending?: never }
  | {
      /**
       * `stop`: aborted when the request's deadline passes or its client leaves (reason `StagesStopped`):
       * the load it waits on is interrupted (its outbound calls aborted) and the preparation fails with the refusal.
       */
      readonly pending: (stop?: AbortSignal) => Effect.Effect<Prepared, ApiError>
      readonly ready?: never
      readonly refused?: never
    }

const DEFAULT_ALLOWANCE: PartAllowance = {
  maxTokensPerImage: DEFAULT_MAX_TOKENS_PER_IMAGE,
  maxTokensPerFile: DEFAULT_MAX_TOKENS_PER_FILE,
}

/** The decision from what the stages left: the request, its plan and the money it may cost, and what its record and answer read. */
const decisionOf = (
  state: StageState,
  ingress: Ingress,
  sessionId: string | null,
  plan: RoutePlan,
  fitFor: FitFor | undefined,
  serverTools: ServerToolPlan | undefined,
  bodyText: string,
  parts: PartAllowance,
): Decision => {
  const { principal, settings, headers, loaded } = state
  const request = state.request
  // A preset's system prompt is input the body did not carry.
  const presetInstructions = state.hints?.preset === undefined ? "" : (request.instructions ?? "")
  const money = moneyOf(state.rewritten ? JSON.stringify(request) : bodyText, request, presetInstructions, plan, parts)
  const decision: Types.Mutable<Decision> = {
    principal,
    request,
    plan,
    sessionId,
    storeContent: storesContent(settings, Number(principal.key.id)),
    withMetadata: state.withMetadata,
    metadataAlias: state.metadataAlias,
    estimatedInputTokens: money.estimatedInputTokens,
    promptBound: money.promptBound,
    worstCase: money.worstCase + state.spentUsd,
    allByok: money.allByok,
    // Read once, when the decision is made (3-4 header lookups per request).
    httpReferer: clientHeader(headers.get("http-referer")),
    appTitle: clientHeader(headers.get("x-openrouter-title") ?? headers.get("x-title")),
    userAgent: clientHeader(headers.get("user-agent")),
    pipeline: state.pipeline,
    spentUsd: state.spentUsd,
    upstreamCalls: state.upstreamCalls,
    fitFor,
    router: state.router ?? routerOf(state.hints?.requested),
    generationId: loaded.generationId,
    annotations: state.annotations,
    citable: state.citable,
  }
  if (ingress.formatState !== undefined) decision.formatState = ingress.formatState
  if (serverTools !== undefined) {
    decision.serverTools = serverTools
    decision.presetInstructions = presetInstructions
  }
  return decision
}

/**
 * Before a priced outbound call (moderation, a web search): only for a key with budget left, held and
 * given back (the request's own hold then covers it). Uninterruptible: a request stopped in between
 * (deadline, client gone) must not leave the hold behind.
 */
const holdBudgetOf =
  (spend: Spend) =>
  (state: StageState, usd: number): Effect.Effect<void, ApiError> =>
    spend.holds(state.principal.key, { isByok: false })
      ? Effect.uninterruptible(
          Effect.flatMap(spend.reserve(state.principal.key, usd, { isByok: false }), (held) =>
            Option.isSome(held) ? spend.settle(held.value, 0) : Effect.void,
          ),
        )
      : Effect.void

/** The request's state as the stages start on it. */
const stageStateOf = (
  format: ClientFormat,
  headers: Headers,
  principal: PrincipalShape,
  settings: StageState["settings"],
  loaded: Loaded,
  ingress: Ingress,
  holdBudget: StageState["holdBudget"],
): StageState => {
  const metadataAlias = sdkMetadataEnabled(headers)
  return {
    format,
    headers,
    principal,
    settings,
    loaded,
    body: ingress.body,
    withMetadata: metadataAlias || metadataEnabled(headers),
    metadataAlias,
    request: ingress.request,
    hints: undefined,
    plan: undefined,
    rewritten: false,
    pipeline: undefined,
    spentUsd: 0,
    upstreamCalls: 0,
    annotations: undefined,
    holdBudget,
    router: undefined,
  }
}

/**
 * The refusal of a request whose stages were stopped while they waited on a load, or whose hold was
 * refused after they had spent or made calls on its behalf, with its record (the first candidate of
 * its route, charged what the stages spent, under the id its inner calls name as their parent) when
 * the stages got that far.
 */
const recordedIn = (routing: ReturnType<typeof makeRouting>, loaded: Loaded, refusal: ApiError, cancelled: boolean): ApiError => {
  const state = loaded.waitedIn
  if (state === undefined) return refusal
  const session = sessionIdOf(state.request, state.headers.get("x-session-id"))
  const sessionId = Either.isRight(session) ? session.right : null
  const plan = state.plan ?? routing.route(state, sessionId)
  const endpoint = "_tag" in plan ? undefined : plan.candidates[0]
  if (endpoint === undefined) return refusal
  return withRecord(refusal, {
    model: endpoint.modelId,
    providerName: endpoint.provider.id,
    modelSlug: endpoint.upstreamModel,
    cost: state.spentUsd,
    sessionId,
    cancelled,
    ...(loaded.generationId === undefined ? {} : { generationId: loaded.generationId }),
  })
}

const stoppedIn = (routing: ReturnType<typeof makeRouting>, loaded: Loaded, stopped: StagesStopped): ApiError =>
  recordedIn(routing, loaded, stopped.refusal, stopped.clientLeft)

/** A hold refused after the stages spent or made calls for the request (fusion's panel): recorded, so what they spent is charged and their records' parent exists. */
const refusedAfterStages = (routing: ReturnType<typeof makeRouting>, loaded: Loaded, refusal: ApiError): ApiError =>
  loaded.generationId !== undefined || (loaded.waitedIn?.spentUsd ?? 0) > 0 ? recordedIn(routing, loaded, refusal, false) : refusal

export const makePreparer = (
  services: PrepareServices,
  parts: PartAllowance = DEFAULT_ALLOWANCE,
  /** The gateway's plugins, built once from its settings (plugins/index.ts, `pluginSetOf`). */
  plugins: PluginSet,
  compression: CompressionSettings = DEFAULT_COMPRESSION,
  /** The gateway's settings, for whether a server tool can run here (`ServerTool.unavailable`). */
  gateway?: Settings,
) => {
  const { keys, policy, router, spend } = services
  const routing = makeRouting(router)
  const fit = makeContextFit(compression, parts)
  const holdBudget = holdBudgetOf(spend)
  // The fixed stages, in order; the plugins of each request follow them.
  // The model routers (router/auto, router/pareto-code) choose the model before the guardrails route it.
  const stages: ReadonlyArray<PreModelStage> = [
    makePresetStage(services.presets, plugins.decode),
    makeModelRouterStage(router),
    makeGuardrailsStage(services.guardrails),
    // Moderation (the plugin, or enforced by the operator): after the guardrails, before any spend is held.
    makeModerationStage({
      client: services.moderation?.client,
      holdBudget,
    }),
  ]

  /** Runs `stage` on `state`: routes first when it reads the plan. Undefined: go on. */
  const runStage = (stage: PreModelStage, state: StageState, sessionId: string | null): ApiError | Missing | undefined => {
    if (stage.needsPlan && state.plan === undefined) {
      const routed = routing.route(state, sessionId)
      if ("_tag" in routed) return routed
    }
    const outcome = stage.run(state)
    if (outcome === undefined) return undefined
    if (outcome instanceof Missing) state.loaded.waitedIn = state
    if ("_tag" in outcome) return outcome
    applyChange(state, outcome, stage === stages[0])
    return undefined
  }

  /** The decision: an ApiError for the caller, or `Missing` when a read is not in memory (load it and decide again). */
  const decide = (format: ClientFormat, headers: Headers, bodyText: string, loaded: Loaded): Decision | ApiError | Missing => {
    let principal = loaded.principal
    if (principal === undefined) {
      const step = authenticate(keys, headers, loaded)
      if (step instanceof Missing || "_tag" in step) return step
      principal = loaded.principal = step
    }
    const ingress = decodeWithPlugins(format, bodyText, loaded, plugins)
    if ("_tag" in ingress) return ingress

    const workspaceId = principal.workspaceId
    const settings = loaded.settings?.workspaceId === workspaceId ? loaded.settings.value : policy.peek(workspaceId)
    if (settings === undefined) {
      return new Missing(
        Effect.map(policy.settingsOf(workspaceId), (value) => {
          loaded.settings = { workspaceId, value }
        }),
      )
    }
    const state = stageStateOf(format, headers, principal, settings, loaded, ingress, holdBudget)
    const preset = runStage(stages[0] as PreModelStage, state, null)
    if (preset !== undefined) return preset
    const sessionId = sessionIdOf(state.request, headers.get("x-session-id"))
    if (Either.isLeft(sessionId)) return sessionId.left
    for (let i = 1; i < stages.length; i++) {
      const stopped = runStage(stages[i] as PreModelStage, state, sessionId.right)
      if (stopped !== undefined) return stopped
    }
    const requested = state.request.plugins
    if (requested !== undefined) {
      for (let at = 0; at < requested.length; at++) {
        const plugin = requested[at] as NonNullable<typeof requested>[number]
        if (plugin.enabled === false) continue
        const stage = plugins.stageOf(plugin, at)
        if (stage === undefined) continue
        const stopped = runStage(stage, state, sessionId.right)
        if (stopped !== undefined) return stopped
      }
    }
    // Server tools, on the request as the stages left it (one cheap check when it lists none).
    let serverTools: ServerToolPlan | undefined
    if (declaresServerTools(state.request)) {
      const declared = serverToolPlanOf(state.request, gateway, settings.disabledServerTools ?? [])
      if (Either.isLeft(declared)) return declared.left
      serverTools = declared.right
    }
    // Routing and money on the request as the stages left it.
    const routed = state.plan ?? routing.route(state, sessionId.right)
    if ("_tag" in routed) return routed
    state.plan = routed
    // The prompt made to fit the plan's context (context-compression): last, on what the plugins left.
    const presetText = state.hints?.preset === undefined ? "" : (state.request.instructions ?? "")
    const fitted = fit(state.request, routed, state.rewritten ? JSON.stringify(state.request) : bodyText, presetText)
    let fitFor: FitFor | undefined
    if (fitted !== undefined) {
      if (fitted instanceof Missing) loaded.waitedIn = state
      if ("_tag" in fitted) return fitted
      applyChange(state, fitted, false)
      fitFor = fitted.fitFor
    }
    return decisionOf(state, ingress, sessionId.right, state.plan ?? routed, fitFor, serverTools, bodyText, parts)
  }

  /** Loads what `decide` missed until it decides, then holds the worst case against the key and credits. */
  const settleDecision = (
    format: ClientFormat,
    headers: Headers,
    bodyText: string,
    loaded: Loaded,
    first: Decision | Missing,
    stop: AbortSignal | undefined,
  ) =>
    Effect.gen(function* () {
      let step: Decision | ApiError | Missing = first
      while (step instanceof Missing) {
        if (stop === undefined) yield* step.load
        else if (stop.aborted || !(yield* untilStopped(step.load, stop))) return yield* Effect.fail(stoppedIn(routing, loaded, stop.reason as StagesStopped))
        step = decide(format, headers, bodyText, loaded)
      }
      if ("_tag" in step) return yield* Effect.fail(step)
      const reservation = yield* Effect.catchAll(spend.reserve(step.principal.key, step.worstCase, { isByok: step.allByok }), (refusal) =>
        Effect.fail(refusedAfterStages(routing, loaded, refusal)),
      )
      return { ...step, reservation } satisfies Prepared
    })

  /**
   * The request's preparation: ready at once when memory had every read and nothing is held
   * (the common case: no runtime call), refused, or pending on the program that completes it.
   * `principal`: authenticated already (from the headers, before the body was read).
   */
  const prepare = (headers: Headers, bodyText: string, principal?: PrincipalShape, format: ClientFormat = responsesFormat): Preparation => {
    const loaded: Loaded = principal === undefined ? {} : { principal }
    const step = decide(format, headers, bodyText, loaded)
    if (step instanceof Missing) return { pending: (stop) => settleDecision(format, headers, bodyText, loaded, step, stop) }
    if ("_tag" in step) return { refused: step }
    if (!spend.holds(step.principal.key, { isByok: step.allByok })) return { ready: { ...step, reservation: Option.none() } }
    // A limited key with a budget slice in memory: admitted there, no runtime call (src/services/Spend.ts).
    const admitted = spend.admit(step.principal.key, step.worstCase, { isByok: step.allByok })
    if (admitted !== undefined) return { ready: { ...step, reservation: Option.some(admitted) } }
    return { pending: (stop) => settleDecision(format, headers, bodyText, loaded, step, stop) }
  }

  return { authenticate: (headers: Headers, loaded: Loaded) => authenticate(keys, headers, loaded), prepare } as const
}
