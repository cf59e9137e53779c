/**
 * The one runtime call a model request makes before going upstream: authenticate, decode,
 * apply a preset, route, reserve spend, decide content logging. Everything after it, per chunk, is plain code.
 */
import { Effect, Either, type Option } from "effect"
import { BadRequest } from "../../domain/errors.js"
import { estimateTokens, worstCaseCost } from "../../domain/pricing.js"
import { decodeResponsesRequest, type ResponsesRequest } from "../../domain/responses.js"
import { applyPreset } from "../../routing/presets.js"
import { Router, type RoutePlan } from "../../routing/Router.js"
import { Auth, type PrincipalShape } from "../../services/Auth.js"
import { ContentPolicy } from "../../services/ContentPolicy.js"
import { Guardrails } from "../../services/Guardrails.js"
import { type Reservation, Spend } from "../../services/Spend.js"

/** Output tokens assumed for the worst case when neither the request nor the endpoint bounds them. */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096

export interface Prepared {
  readonly principal: PrincipalShape
  readonly request: ResponsesRequest
  readonly plan: RoutePlan
  readonly reservation: Option.Option<Reservation>
  readonly sessionId: string | null
  readonly storeContent: boolean
  /** Prompt tokens estimated from the body, for the reservation and for aborted calls without usage. */
  readonly estimatedInputTokens: number
}

const parseJson = (text: string) =>
  Effect.try({
    try: () => JSON.parse(text) as unknown,
    catch: () => new BadRequest({ message: "Malformed JSON in the request body" }),
  })

const sessionIdOf = (request: ResponsesRequest, header: string | null) => {
  // The body's session_id wins over the x-session-id header (contract rule 2).
  if (request.session_id !== undefined) return Either.right(request.session_id)
  if (header === null || header === "") return Either.right(null)
  if (header.length > 256) {
    return Either.left(new BadRequest({ message: "Invalid request: x-session-id: at most 256 characters" }))
  }
  return Either.right(header)
}

/** `X-Service-Metadata: enabled` (or the legacy header) asks for routing metadata. */
export const metadataEnabled = (headers: Headers) => {
  const v = headers.get("x-service-metadata") ?? headers.get("x-service-experimental-metadata")
  return v !== null && v.toLowerCase() === "enabled"
}

export const prepare = (headers: Headers, bodyText: string) =>
  Effect.gen(function* () {
    const auth = yield* Auth
    const principal = yield* auth.authenticateHeader(headers.get("authorization"))
    const body = yield* parseJson(bodyText)
    const decoded = yield* decodeResponsesRequest(body)
    // `@preset/slug`, `vendor/model@preset/slug` or `preset`: the preset's config under the request's fields.
    const withPreset = yield* applyPreset(body as Record<string, unknown>, decoded, principal.userId)
    const request = withPreset.request
    const sessionId = yield* sessionIdOf(request, headers.get("x-session-id"))
    const policy = yield* ContentPolicy
    const defaults = yield* policy.routingDefaults(principal.workspaceId)
    const router = yield* Router
    const plan = yield* router.plan({
      request,
      defaultModel: defaults.defaultTextModel,
      defaultSort: defaults.defaultProviderSort,
      userId: principal.userId,
      sessionKey: sessionId ?? request.prompt_cache_key ?? null,
      preset: withPreset.preset,
      requested: withPreset.requested,
    })
    // A preset's system prompt is input the body did not carry.
    const presetChars = withPreset.preset === undefined ? 0 : (request.instructions?.length ?? 0)
    const estimatedInputTokens = estimateTokens(bodyText.length + presetChars)
    const worstCase = plan.candidates.reduce(
      (max, e) =>
        Math.max(
          max,
          worstCaseCost(
            e.pricing,
            estimatedInputTokens,
            request.max_output_tokens ?? e.maxOutputTokens ?? DEFAULT_MAX_OUTPUT_TOKENS,
          ),
        ),
      0,
    )
    // Guardrails run before any spend is held: a block costs nothing.
    const guardrails = yield* Guardrails
    yield* guardrails.check({
      request,
      workspaceId: principal.workspaceId,
      requested: plan.requested,
      strategy: plan.strategy,
      candidates: plan.candidates,
      withMetadata: metadataEnabled(headers),
    })
    const spend = yield* Spend
    const reservation = yield* spend.reserve(principal.key, worstCase, { isByok: plan.candidates[0]?.isByok ?? false })
    const storeContent = yield* policy.shouldStore(principal.workspaceId, Number(principal.key.id))
    return { principal, request, plan, reservation, sessionId, storeContent, estimatedInputTokens } satisfies Prepared
  })
