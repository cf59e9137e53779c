/**
 * What `POST /v1/embeddings` and `POST /v1/rerank` share past their decoding: routing like a
 * model request (catalog models of the route's kind; `model`, `models` and `provider`
 * preferences as the Router takes them), the key's limit reserved for the worst case and settled
 * with the cost, the endpoints tried in order (failover before an answer, as turns.ts does for a
 * turn), and a generation record with the usage and cost (docs/embeddings.md).
 *
 * Cost: input tokens at the endpoint's `prompt` price, plus its `request` price once per billed
 * unit (one per request for embeddings; one per search unit for rerank). A batch that answered
 * before a later one of the same attempt failed is charged too: the upstream billed it.
 */
import { Effect, Either, Exit, Option, type Types } from "effect"
import type { Settings } from "../../config/Config.js"
import { type ApiError, BadRequest, PaymentRequired, RequestTimeout } from "../../domain/errors.js"
import { CLIENT_HEADER_MAX, type GenerationEntry, newGenerationId } from "../../domain/generations.js"
import { fromNanoUsd, toNanoUsd } from "../../domain/pricing.js"
import { decodeResponsesRequest } from "../../domain/responses.js"
import { isoTime } from "../../domain/time.js"
import { sessionIdOf } from "../../pipeline/routing.js"
import { DeadlineExceeded } from "../../pipeline/turns.js"
import type { RequestLifecycle } from "../../pipeline/lifecycle.js"
import { PlainAbort } from "../../providers/abort.js"
import type { ProviderError } from "../../providers/types.js"
import type { RoutePlan, Router } from "../../routing/Router.js"
import type { PrincipalShape } from "../../services/Auth.js"
import type { Endpoint, ModelKind } from "../../services/Catalog.js"
import type { GenerationStore } from "../../services/GenerationStore.js"
import type { Reservation, Spend } from "../../services/Spend.js"
import { apiErrorOf, asProviderError, isRetryable } from "../../pipeline/upstream-errors.js"
import type { ErrorLog } from "../../lib/log.js"
import type { Deadlines } from "../../deadlines.js"

/** What an attempt on one endpoint gave: its value and the input tokens the upstream counted (undefined: none). */
export interface Answered<T> {
  readonly value: T
  readonly inputTokens: number | undefined
  /** Billed units (1 for embeddings; rerank: its search units): the `request` price is per unit. */
  readonly units: number
}

/** An attempt that failed after some of its batches had answered: what those cost upstream. */
export class PartlyAnswered extends Error {
  constructor(
    readonly failure: ProviderError,
    readonly inputTokens: number,
  ) {
    super(failure.message)
  }
}

export interface CallJob<T> {
  readonly kind: Exclude<ModelKind, "chat">
  readonly principal: PrincipalShape
  readonly headers: Headers
  readonly routing: { readonly model: string; readonly models?: ReadonlyArray<string> | undefined; readonly provider?: unknown; readonly session_id?: string | undefined }
  /** A true upper bound of the input's tokens: reserved, and the most ever charged. */
  readonly tokenBound: number
  /** Charged when the upstream counts none: characters ÷ 4. */
  readonly estimatedTokens: number
  /** Billed units the request is reserved for (its worst case). */
  readonly maxUnits: number
  readonly attempt: (endpoint: Endpoint, signal: PlainAbort) => Promise<Answered<T>>
}

export interface CallDone<T> {
  readonly value: T
  readonly endpoint: Endpoint
  readonly generationId: string
  readonly inputTokens: number
  readonly cost: number
}

export interface CallDeps {
  readonly settings: Settings
  readonly router: Router
  readonly spend: Spend
  readonly generationStore: GenerationStore
  readonly lifecycle: RequestLifecycle
  readonly deadlines: Deadlines
  readonly log: ErrorLog
}

/** USD of `tokens` input and `units` billed units at `endpoint`'s prices, in whole nano-dollars. */
export const costAt = (endpoint: Endpoint, tokens: number, units: number): number =>
  fromNanoUsd(toNanoUsd((tokens * endpoint.pricing.prompt) / 1e6 + (endpoint.pricing.request ?? 0) * units))

const clientHeader = (v: string | null): string | null => (v === null || v === "" ? null : v.length > CLIENT_HEADER_MAX ? v.slice(0, CLIENT_HEADER_MAX) : v)

/** The route plan over catalog models of the job's kind and the session id, or the refusal naming the field. */
const planOf = (router: Router, job: CallJob<unknown>): Either.Either<{ readonly plan: RoutePlan; readonly sessionId: string | null }, ApiError> => {
  const { model, models, provider, session_id } = job.routing
  // The model requests' own decoder checks `provider` (and names its fields in the 400).
  const decoded = decodeResponsesRequest({
    input: "",
    model,
    ...(models === undefined ? {} : { models }),
    ...(provider === undefined ? {} : { provider }),
    ...(session_id === undefined ? {} : { session_id }),
  })
  if (Either.isLeft(decoded)) return Either.left(decoded.left)
  // The body's session_id, else x-session-id (at most 256 characters), as on the model requests.
  const sessionId = sessionIdOf(decoded.right, job.headers.get("x-session-id"))
  if (Either.isLeft(sessionId)) return Either.left(sessionId.left)
  const plan = router.plan({ request: decoded.right, userId: job.principal.userId, sessionKey: sessionId.right, kind: job.kind })
  return Either.map(plan, (p) => ({ plan: p, sessionId: sessionId.right }))
}

/** The hold on the key's limit for the worst case (none when the key has no limit to hold), or the 402. */
const reserveFor = async (spend: Spend, principal: PrincipalShape, worstCase: number, isByok: boolean): Promise<Option.Option<Reservation> | ApiError> => {
  const key = principal.key
  if (!spend.holds(key, { isByok })) return Option.none()
  const admitted = spend.admit(key, worstCase, { isByok })
  if (admitted !== undefined) return Option.some(admitted)
  const reserved = await Effect.runPromiseExit(spend.reserve(key, worstCase, { isByok }))
  if (Exit.isSuccess(reserved)) return reserved.value
  const failure = reserved.cause._tag === "Fail" ? reserved.cause.error : undefined
  return failure instanceof PaymentRequired ? failure : new PaymentRequired({ message: "the key's budget could not be held" })
}

/** The generation record of a call that ended on `endpoint`: the caller's and the endpoint's fields, `fields` over the defaults. */
const entryOf = (
  job: CallJob<unknown>,
  generationId: string,
  startedAt: number,
  sessionId: string | null,
  endpoint: Endpoint,
  fields: Partial<Types.Mutable<GenerationEntry>>,
): GenerationEntry => ({
  id: generationId,
  keyHash: job.principal.hash,
  userId: job.principal.userId,
  workspaceId: job.principal.workspaceId,
  model: endpoint.modelId,
  providerName: endpoint.provider.id,
  upstreamModel: endpoint.upstreamModel,
  createdAt: isoTime(startedAt),
  streamed: false,
  cancelled: false,
  finishReason: null,
  sessionId,
  inputTokens: 0,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  totalCost: 0,
  isByok: endpoint.isByok,
  generationTimeMs: Date.now() - startedAt,
  latencyMs: null,
  status: "completed",
  httpReferer: clientHeader(job.headers.get("http-referer")),
  appTitle: clientHeader(job.headers.get("x-openrouter-title") ?? job.headers.get("x-title")),
  userAgent: clientHeader(job.headers.get("user-agent")),
  ...fields,
})

export const makeCalls = (deps: CallDeps) => {
  const { router, spend, generationStore, lifecycle, deadlines, settings } = deps

  /** Records the generation and settles the hold with the same ledger row (as finish.ts does). */
  const recordAndSettle = (entry: GenerationEntry, held: Option.Option<Reservation>, actualUsd: number, isByok: boolean, principal: PrincipalShape): void => {
    if (Option.isNone(held)) {
      generationStore.recordSync(entry)
      return
    }
    const counted = !isByok || principal.key.include_byok_in_limit === 1 ? actualUsd : 0
    let settled: () => void = () => undefined
    const done = new Promise<void>((resolve) => {
      settled = resolve
    })
    if (generationStore.recordSettled(entry, { ...held.value, actualUsd: counted }, settled)) {
      lifecycle.settlingOn(done)
      return
    }
    generationStore.recordSync(entry)
    lifecycle.settlingOn(
      Effect.runPromise(spend.settle(held.value, counted)).then(
        () => undefined,
        (e: unknown) => deps.log({ generationId: entry.id }, "settling an embeddings or rerank call failed", e),
      ),
    )
  }

  /** Routes, reserves, tries the plan's endpoints in order, records and settles: the value, or the refusal. */
  const run = async <T>(job: CallJob<T>, clientSignal: AbortSignal, requestId: string | undefined): Promise<CallDone<T> | { readonly refused: ApiError; readonly generationId?: string }> => {
    const planned = planOf(router, job as CallJob<unknown>)
    if (Either.isLeft(planned)) return { refused: planned.left }
    const { plan, sessionId } = planned.right
    const candidates = plan.candidates
    let worstCase = 0
    for (const e of candidates) worstCase = Math.max(worstCase, costAt(e, job.tokenBound, job.maxUnits))
    const allByok = candidates.length > 0 && candidates.every((e) => e.isByok)
    const held = await reserveFor(spend, job.principal, worstCase, allByok)
    if (!Option.isOption(held)) return { refused: held }

    const startedAt = Date.now()
    const generationId = newGenerationId(startedAt)
    const abort = new PlainAbort()
    const onClientAbort = () => abort.abort(new Error("client disconnected"))
    clientSignal.onabort = onClientAbort
    if (clientSignal.aborted) onClientAbort()
    const deadline = deadlines.add(() => abort.abort(new DeadlineExceeded()))
    let wastedTokens = 0
    let wastedCost = 0
    let last: { readonly endpoint: Endpoint; readonly error: ProviderError } | undefined
    let answered: { readonly endpoint: Endpoint; readonly value: Answered<T> } | undefined
    try {
      for (const endpoint of candidates) {
        if (abort.aborted) break
        try {
          answered = { endpoint, value: await job.attempt(endpoint, abort) }
          router.recordSuccess(plan, endpoint, { ttftMs: undefined, outputTokens: 0, generationMs: undefined })
          break
        } catch (cause) {
          const partly = cause instanceof PartlyAnswered ? cause : undefined
          const error = partly?.failure ?? asProviderError(cause)
          if (partly !== undefined) {
            // The parts an upstream answered before failing count, within the request's bound.
            const tokens = Math.min(partly.inputTokens, job.tokenBound)
            wastedTokens += tokens
            wastedCost += costAt(endpoint, tokens, 0)
          }
          last = { endpoint, error }
          if (!abort.aborted) router.recordFailure(endpoint, error.kind)
          if (!isRetryable(error)) break
        }
      }
    } finally {
      deadlines.remove(deadline)
      clientSignal.onabort = null
    }

    if (answered === undefined) {
      const deadlineHit = abort.reason instanceof DeadlineExceeded
      const cancelled = abort.aborted && !deadlineHit
      const refused: ApiError = deadlineHit
        ? new RequestTimeout({ message: `The request did not complete within ${settings.requestTimeoutMs} ms` })
        : last === undefined
          ? new BadRequest({ message: "Invalid request: no endpoint could be tried" })
          : apiErrorOf(last.error, last.endpoint.provider.id)
      if (last === undefined) {
        if (Option.isSome(held)) lifecycle.settlingOn(Effect.runPromise(spend.settle(held.value, 0)))
        return { refused }
      }
      const cost = wastedCost
      recordAndSettle(
        entryOf(job, generationId, startedAt, sessionId, last.endpoint, {
          status: cancelled ? "cancelled" : "failed",
          cancelled,
          inputTokens: wastedTokens,
          totalCost: cost,
          error: { message: refused.message, status: cancelled ? 499 : refused.status, providerName: last.endpoint.provider.id },
        }),
        held,
        cost,
        last.endpoint.isByok,
        job.principal,
      )
      if (requestId !== undefined && !cancelled && !deadlineHit && last.error.kind === "server") {
        deps.log({ requestId, generationId }, `an ${job.kind} call failed upstream`, last.error)
      }
      return { refused, generationId }
    }
    const { endpoint, value } = answered
    // Never past the bound the request was reserved for.
    const tokens = Math.min(value.inputTokens ?? job.estimatedTokens, job.tokenBound)
    const cost = costAt(endpoint, tokens, Math.min(value.units, job.maxUnits)) + wastedCost
    recordAndSettle(
      entryOf(job, generationId, startedAt, sessionId, endpoint, { inputTokens: tokens + wastedTokens, totalCost: cost, usageEstimated: value.inputTokens === undefined, latencyMs: Date.now() - startedAt }),
      held,
      cost,
      endpoint.isByok,
      job.principal,
    )
    return { value: value.value, endpoint, generationId, inputTokens: tokens, cost }
  }

  return { run } as const
}
