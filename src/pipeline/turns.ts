/**
 * The turn runner: one model turn is the route plan's attempts in order, failing over while a
 * failure is retryable and nothing has reached the client (before the first byte). A request
 * may run several turns (the server-tool loop and fusion will); the data plane runs one today.
 * Plain code: the attempt loop runs on every request's hot path.
 */
import { Either } from "effect"
import type { Settings } from "../config/Config.js"
import { type ApiError, RequestTimeout } from "../domain/errors.js"
import type { PreviousError } from "../domain/generations.js"
import type { PlainAbort } from "../providers/abort.js"
import { providerFor } from "../providers/index.js"
import { ProviderError, type UpstreamCall, type UpstreamLimits } from "../providers/types.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import type { Endpoint } from "../services/Catalog.js"
import { toNormalizedRequest } from "./normalize.js"
import { apiErrorOf, asProviderError, isRetryable } from "./upstream-errors.js"
import { outputBound } from "./bounds.js"
import type { RequestTrace } from "./trace.js"
import { type ErrorLog, makeErrorLog } from "../lib/log.js"
import type { Attempt, Outcome } from "./finish.js"

/** The request's own deadline passed (the abort's reason). */
export class DeadlineExceeded extends Error {}

/** nginx's "client closed request": the record of a request its client left before any answer. */
export const CLIENT_CLOSED = 499
export const CLIENT_CLOSED_MESSAGE = "The client closed the request before the answer began"
/**
 * The answer to a request whose client has gone: nobody reads it, but the request's log line and
 * metrics take its status, which is 499 (the client's doing), not the upstream failure its
 * aborted call ended in (a 502 counted against the providers).
 */
export const clientClosedResponse = (): Response => new Response(null, { status: CLIENT_CLOSED })

/** The HTTP-ish status an attempt ended with, for `service_metadata.attempts`. */
export const statusOfFailure = (e: ProviderError) =>
  e.upstreamStatus ?? (e.kind === "timeout" ? 524 : e.kind === "overloaded" ? 529 : e.kind === "rate_limited" ? 429 : 502)

/** A turn's upstream call that answered, or the refusal for the caller and what finish records. */
export type TurnResult =
  | { readonly call: UpstreamCall; readonly endpoint: Endpoint; readonly attemptStartedAt: number; readonly refused?: never }
  | { readonly refused: ApiError; readonly outcome: Outcome }

export interface TurnOptions {
  readonly streaming: boolean
  /** Aborted when the client goes away or the request's deadline passes (reason `DeadlineExceeded`). */
  readonly upstreamAbort: PlainAbort
  readonly trace: RequestTrace | undefined
  /** Unix ms the request started: the first attempt's start. */
  readonly startedAt: number
  /** The turn's attempts are pushed here (service_metadata reads them). */
  readonly attempts: Array<Attempt>
  /** The request as a failover candidate takes it (context-compression for a smaller context); undefined: as it is. */
  readonly fitFor?: ((endpoint: Endpoint) => ResponsesRequest | undefined) | undefined
}

export const makeTurnRunner = (deps: {
  readonly router: Router
  readonly upstreamLimits: UpstreamLimits
  readonly deadlineMessage: string
  /** Where a refusal caused by an unset `api_key_env` is logged (the caller's answer stays generic). */
  readonly log?: ErrorLog
}) => {
  const { router, upstreamLimits, deadlineMessage, log } = deps

  /** Runs one model turn of `request` over `plan`. Never throws for an upstream's failure. */
  const runTurn = async (request: ResponsesRequest, plan: RoutePlan, options: TurnOptions): Promise<TurnResult> => {
    const { streaming, trace, startedAt, attempts } = options
    const upstreamAbort = options.upstreamAbort
    // Before the first byte: try each candidate in order while failures are retryable.
    let call: UpstreamCall | undefined
    let endpoint: Endpoint | undefined
    let lastError: ProviderError | undefined
    let attemptStartedAt = startedAt
    // The endpoint a call was in flight to when the client left or our deadline passed, after its
    // answer had begun to arrive: it is charged. Before that nothing came, and nothing is charged.
    let inFlight: Endpoint | undefined
    // The last endpoint tried: the record of a request no endpoint answered names it.
    let tried: Endpoint | undefined
    // Failed attempts, for the record's `previous_errors` (only on failure: no allocation otherwise).
    let failures: Array<PreviousError> | undefined
    const fitFor = options.fitFor
    for (const candidate of plan.candidates) {
      const sent = fitFor === undefined ? request : (fitFor(candidate) ?? request)
      // Always bound the answer by what was reserved for it (outputBound), never by the upstream's default.
      const normalized = toNormalizedRequest(sent, candidate.upstreamModel, outputBound(sent, candidate).answer)
      if (Either.isLeft(normalized)) {
        return {
          refused: normalized.left,
          outcome: {
            endpoint: candidate,
            assembler: undefined,
            status: "failed",
            error: { message: normalized.left.message, status: normalized.left.status },
            firstTokenAt: undefined,
            nothingCame: true,
          },
        }
      }
      tried = candidate
      attemptStartedAt = Date.now()
      trace?.attempt(candidate.provider.id, candidate.modelId)
      try {
        call = await providerFor(candidate.provider.kind).open(normalized.right, candidate.provider, {
          stream: streaming,
          signal: upstreamAbort.signal,
          apiKey: candidate.apiKey,
          limits: upstreamLimits,
        })
        endpoint = candidate
        attempts.push({ model: candidate.modelId, provider: candidate.provider.id, status: 200 })
        break
      } catch (e) {
        if (upstreamAbort.signal.aborted) {
          if (e instanceof ProviderError && e.answerBegun) inFlight = candidate
          break
        }
        lastError = asProviderError(e)
        attempts.push({ model: candidate.modelId, provider: candidate.provider.id, status: statusOfFailure(lastError) })
        failures ??= []
        failures.push({ code: statusOfFailure(lastError), message: lastError.message, providerName: candidate.provider.id })
        router.recordFailure(candidate, lastError.kind)
        // The operator's mistake named in the log (warned at start too, services/Catalog.ts), not to the caller.
        // Any other auth failure with its reason (a Vertex credentials file missing, the upstream's 401): messages hold no secret.
        if (lastError.kind === "auth") {
          const unset = candidate.apiKey === undefined && candidate.provider.api_key_env !== undefined
          log?.(
            { requestId: trace?.id },
            unset
              ? `provider ${candidate.provider.id} refused the gateway's credentials: its api_key_env variable ${candidate.provider.api_key_env} is not set`
              : `provider ${candidate.provider.id} refused the gateway's credentials: ${lastError.message}`,
          )
        }
        // allow_fallbacks: false is already in the plan (only the first choice set is a candidate).
        if (!isRetryable(lastError)) break
      } finally {
        trace?.answered()
      }
    }

    if (call === undefined || endpoint === undefined) {
      const deadlineHit = upstreamAbort.signal.reason instanceof DeadlineExceeded
      const cancelled = !deadlineHit && upstreamAbort.signal.aborted
      const last = attempts[attempts.length - 1]
      // What the caller gets, and what the record says (the attempts before it as previous errors).
      const answer: ApiError = deadlineHit
        ? new RequestTimeout({ message: deadlineMessage })
        : apiErrorOf(lastError ?? new ProviderError("connection", "no endpoint answered"), last?.provider ?? "upstream")
      const previousErrors = cancelled || deadlineHit ? failures : failures?.slice(0, -1)
      const outcome: Outcome = {
        endpoint: inFlight ?? tried,
        assembler: undefined,
        status: cancelled ? "cancelled" : "failed",
        error: {
          message: cancelled ? CLIENT_CLOSED_MESSAGE : answer.message,
          status: cancelled ? CLIENT_CLOSED : answer.status,
          ...(previousErrors === undefined || previousErrors.length === 0 ? {} : { previousErrors }),
        },
        firstTokenAt: undefined,
        // A call cut after its answer began is charged its input; before, nothing came from upstream.
        nothingCame: inFlight === undefined,
      }
      return { refused: answer, outcome }
    }
    return { call, endpoint, attemptStartedAt }

  }

  return { runTurn } as const
}

/** The message of a request that ran past the gateway's deadline. */
export const deadlineMessageOf = (settings: Settings): string =>
  `The request exceeded the gateway's deadline of ${settings.requestTimeoutMs} ms`

/** The turn runner with the gateway's upstream limits (the route's, and the inner calls' of fusion). */
export const turnRunnerFor = (settings: Settings, router: Router, log: ErrorLog = makeErrorLog(settings.logLevel)) =>
  makeTurnRunner({
    router,
    upstreamLimits: {
      bodyBytes: settings.maxUpstreamBodyBytes,
      eventBytes: settings.maxUpstreamEventBytes,
      receiveBufferBytes: settings.upstreamReceiveBufferBytes,
    },
    deadlineMessage: deadlineMessageOf(settings),
    log,
  })
