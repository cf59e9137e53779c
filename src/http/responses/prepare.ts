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
import { outputBound } from "./bounds.js"
import { type Reservation, Spend } from "../../services/Spend.js"


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

/** Deeper bodies are refused: every later JSON.stringify of them would overflow the stack. */
export const MAX_JSON_DEPTH = 128

/** Whether `value` nests objects/arrays deeper than `max` (iterative: no recursion on caller input). */
const tooDeep = (value: unknown, max: number): boolean => {
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!
    if (typeof v !== "object" || v === null) continue
    if (depth >= max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

const parseJson = (text: string) =>
  Effect.flatMap(
    Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new BadRequest({ message: "Malformed JSON in the request body" }),
    }),
    (json) =>
      tooDeep(json, MAX_JSON_DEPTH)
        ? Effect.fail(new BadRequest({ message: `Invalid request: the body nests deeper than ${MAX_JSON_DEPTH} levels` }))
        : Effect.succeed(json),
  )

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
            outputBound(request, e).total,
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
    // BYOK only when every candidate is: a failover may land on one that is not.
    const allByok = plan.candidates.length > 0 && plan.candidates.every((e) => e.isByok)
    const reservation = yield* spend.reserve(principal.key, worstCase, { isByok: allByok })
    const storeContent = yield* policy.shouldStore(principal.workspaceId, Number(principal.key.id))
    return { principal, request, plan, reservation, sessionId, storeContent, estimatedInputTokens } satisfies Prepared
  })
