/**
 * The data plane's one route, for every client format (src/formats/index.ts), as its stages:
 *   ingress (ingress.ts: the key from the headers, the body, the format's decoder)
 *   → pre-model stages, routing and money (pre-model.ts: preset, guardrails, plugins, plan, reservation)
 *   → the turn runner (turns.ts: attempts with failover before the first byte)
 *   → post-model stages (post-model.ts) → egress (egress.ts: the format's encoder, JSON or SSE)
 *   → finish (finish.ts: settle and record once), the request's life owned by lifecycle.ts.
 * One runtime call at most decides (a read that missed memory, a reservation); the upstream call
 * and the per-chunk relay are plain code; settlement runs off the response's critical path.
 */
import { DEFAULT_MAX_CONCURRENT_OUTBOUND, setOutboundConcurrency } from "../outbound/fetch.js"
import { Context, type Effect, Exit, Option, Runtime } from "effect"
import type { Settings } from "../config/Config.js"
import { type ApiError, InternalError, RateLimited, RequestTimeout, ServiceUnavailable } from "../domain/errors.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { intervalText } from "../domain/keys.js"
import type { PrincipalShape } from "../services/Auth.js"
import { newGenerationId } from "../domain/generations.js"
import { Router } from "../routing/Router.js"
import { ContentPolicy } from "../services/ContentPolicy.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { Guardrails } from "../services/Guardrails.js"
import { KeyStore } from "../services/KeyStore.js"
import { PresetStore } from "../services/PresetStore.js"
import { Spend } from "../services/Spend.js"
import { RateLimits, type RateRule, type RateVerdict, rateLimitHeaders } from "../services/RateLimits.js"
import { BODY_TIMED_OUT, bodyTimedOut, makeBodyDeadline, readCappedText, tooManyUnfinished, type UnfinishedBodies } from "./body.js"
import type { ErrorLog } from "../lib/log.js"
import type { RequestTrace } from "./trace.js"
import { Deadlines } from "../deadlines.js"
import { makeEgress } from "./egress.js"
import { makeFinish, type RequestLife } from "./finish.js"
import { generationRecord, NO_USAGE } from "./record.js"
import { type ClientFormat, errorResponseIn } from "../formats/format.js"
import { type Loaded, Missing, recordOf, StagesStopped } from "./stages.js"
import type { RequestLifecycle } from "./lifecycle.js"
import { moderationClientOf } from "./plugins/moderation.js"
import { compressionSettingsOf } from "./plugins/context-compression.js"
import { type PluginSet, pluginSetOf } from "./plugins/index.js"
import { makePreparer, type Prepared } from "./pre-model.js"
import { CLIENT_CLOSED, CLIENT_CLOSED_MESSAGE, deadlineMessageOf, turnRunnerFor } from "./turns.js"
import { makeToolLoop } from "./loop.js"
import { makeInnerCalls } from "./inner-calls.js"
import { CLIENT_WATCH_MS, makeRespond } from "./respond.js"

type Services = KeyStore | ContentPolicy | PresetStore | Router | Guardrails | GenerationStore | Spend

export interface ModelRouteOptions {
  readonly settings: Settings
  /** Requests in flight, settlements, open streams: the server's, shared by every format. */
  readonly lifecycle: RequestLifecycle
  readonly log: ErrorLog
  /** The request's key is good: the server lifts its idle timeout (the route's own deadlines hold it now). */
  readonly authenticated?: (req: Request, trace: RequestTrace | undefined) => void
  /** Bodies still arriving, capped per key and per address: the server's, shared with the control plane. */
  readonly bodies?: UnfinishedBodies
}

/** Early refusals close the connection: a body the client may still be sending is not read. */
const CLOSE = { connection: "close" }

/** Seconds a caller is asked to wait while the store is unreachable or the ledger spool is full. */
const STORE_RETRY_AFTER_S = 5
const storeUnreachable = new ServiceUnavailable({ message: "The gateway's database is unreachable; try again shortly", retry_after: STORE_RETRY_AFTER_S })
const spoolFull = new ServiceUnavailable({
  message: "The gateway cannot record more answers until its database is back (its ledger spool is full); try again shortly",
  retry_after: STORE_RETRY_AFTER_S,
})

/**
 * A refusal of the pre-model stages. A moderation block keeps its generation id and record (a
 * failed generation at the moderation provider, charged the moderation call's cost), and so does a
 * request whose stages ran out its deadline or lost its client (the refusal carries its record); the
 * others are answered as they are.
 */
const refusal = (generationStore: GenerationStore, format: ClientFormat, error: ApiError, principal: PrincipalShape, startedAt: number): Response => {
  const blocked = recordOf(error)
  if (blocked === undefined) return errorResponseIn(format, error, {})
  const cancelled = blocked.cancelled === true
  const generationId = blocked.generationId ?? newGenerationId()
  generationStore.recordSync(
    generationRecord({
      id: generationId,
      owner: principal,
      sessionId: blocked.sessionId,
      startedAt,
      endedAt: Date.now(),
      streamed: false,
      target: { model: blocked.model, providerName: blocked.providerName, upstreamModel: blocked.modelSlug, isByok: false },
      status: cancelled ? "cancelled" : "failed",
      usage: NO_USAGE,
      cost: blocked.cost,
      finishReason: null,
      firstTokenAt: undefined,
      error: cancelled ? { message: CLIENT_CLOSED_MESSAGE, status: CLIENT_CLOSED } : { message: error.message, status: error.status },
    }),
  )
  return errorResponseIn(format, error, { "x-generation-id": generationId })
}

/**
 * The stages wait on a load (a read, a plugin's outbound call): the request's deadline runs from
 * here, and the load is stopped (its calls aborted) when the deadline passes or the client leaves.
 * `stagesMs`: how much of the request's deadline the wait used.
 */
const untilDecided = async (
  pending: (stop?: AbortSignal) => Effect.Effect<Prepared, ApiError>,
  clientSignal: AbortSignal,
  deadlines: Deadlines,
  deadlineMessage: string,
  runExit: <A, E>(effect: Effect.Effect<A, E, Services>) => Promise<Exit.Exit<A, E>>,
): Promise<{ readonly decided: Exit.Exit<Prepared, ApiError>; readonly stagesMs: number }> => {
  const stagesAt = performance.now()
  const stop = new AbortController()
  const deadline = deadlines.add(() => stop.abort(new StagesStopped(new RequestTimeout({ message: deadlineMessage }), false)))
  const onClientAbort = () => stop.abort(new StagesStopped(new RequestTimeout({ message: CLIENT_CLOSED_MESSAGE }), true))
  clientSignal.onabort = onClientAbort
  if (clientSignal.aborted) onClientAbort()
  const decided = await runExit(pending(stop.signal))
  deadlines.remove(deadline)
  clientSignal.onabort = null
  return { decided, stagesMs: performance.now() - stagesAt }
}

/** The pre-model stages over the runtime's services, with the gateway's plugins. */
const preparerFor = (runtime: Runtime.Runtime<Services>, settings: Settings, router: Router, spend: Spend, plugins: PluginSet) =>
  makePreparer(
    {
      keys: Context.get(runtime.context, KeyStore),
      policy: Context.get(runtime.context, ContentPolicy),
      presets: Context.get(runtime.context, PresetStore),
      router,
      guardrails: Context.get(runtime.context, Guardrails),
      spend,
      moderation: { client: moderationClientOf(settings.catalog) },
    },
    settings,
    plugins,
    compressionSettingsOf(settings.catalog.plugins?.context_compression),
    settings,
  )

/** A key over its request rate: 429 with when to retry, before the body is read. */
const rateLimited = (format: ClientFormat, rule: RateRule, verdict: RateVerdict): Response => {
  const refused = new RateLimited({
    message: `Rate limit exceeded: this key may send ${rule.requests} requests per ${intervalText(rule.intervalMs)}`,
    retry_after: verdict.retryAfterMs / 1000,
  })
  return errorResponseIn(format, refused, { ...CLOSE, ...rateLimitHeaders(verdict) })
}

export const makeModelRoute = (runtime: Runtime.Runtime<Services>, options: ModelRouteOptions) => {
  const { settings, lifecycle, log, bodies } = options
  const maxBody = settings.maxBodyBytes
  const deadlineMessage = deadlineMessageOf(settings)
  const deadlineFailed = (e: unknown) => log({}, "a request deadline's handler failed", e)
  const deadlines = new Deadlines(settings.requestTimeoutMs, undefined, deadlineFailed)
  const clientWatch = new Deadlines(CLIENT_WATCH_MS, undefined, deadlineFailed)
  const runExit = Runtime.runPromiseExit(runtime)
  const runPromise = Runtime.runPromise(runtime)
  const generationStore = Runtime.runSync(runtime)(GenerationStore)
  // Set while the ledger spool is at its bound (the database away for long): new requests get 503.
  const admission = generationStore.admission
  /** A failure of the store as the contract's 503 (logged once per outage), or undefined: another failure. */
  const unreachable = (format: ClientFormat, e: unknown): Response | undefined => {
    if (!isStoreUnavailable(e)) return undefined
    generationStore.unavailable("admitting requests", e)
    return errorResponseIn(format, storeUnreachable, {})
  }
  // Attempt outcomes go back to the router as plain calls (health, rolling stats, sticky sessions).
  const router = Context.get(runtime.context, Router)
  const spend = Context.get(runtime.context, Spend)
  // Absent where a test composes the route from fewer services: then no key is rate-limited.
  const rateLimits = Option.getOrUndefined(Context.getOption(runtime.context, RateLimits))
  // Model calls made on a request's behalf (fusion's panel and judge), each recorded with the request as parent.
  const innerCalls = makeInnerCalls({ settings, router, generationStore, spend })
  // The plugins, built once from the settings (and the inner calls fusion's panel makes).
  const plugins = pluginSetOf({ settings, innerCalls })
  const preparer = preparerFor(runtime, settings, router, spend, plugins)
  setOutboundConcurrency(settings.catalog.outbound?.max_concurrent ?? DEFAULT_MAX_CONCURRENT_OUTBOUND)
  const bodyDeadline = makeBodyDeadline(settings.bodyTimeoutMs, maxBody)
  const bodyTimeout = bodyTimedOut(settings.bodyTimeoutMs)
  const finish = makeFinish({ generationStore, runPromise, lifecycle, log })
  const turns = turnRunnerFor(settings, router, log)
  const egress = makeEgress({
    router,
    lifecycle,
    finish,
    // A stream whose client has read nothing for this long is cut: armed only while a write waits on the client.
    stalls: new Deadlines(settings.stallTimeoutMs, undefined, deadlineFailed),
    // ledger.durable_answers: an answer's last byte waits for the commit of its record (finish's promise).
    durable: generationStore.durable,
    // While waiting long for the first token, a comment line keeps proxies from closing the stream.
    keepAliveMs: settings.streamKeepAliveMs,
    deadlineMessage,
    stallMessage: `The client read nothing for ${settings.stallTimeoutMs} ms; the stream was cut`,
    shutdownMessage: "The gateway is shutting down; the answer was cut before its end",
  })

  const loop = makeToolLoop({
    settings,
    parts: settings,
    router,
    finish,
    lifecycle,
    spend,
    runPromise,
    runTurn: turns.runTurn,
    innerCalls,
    deadlineMessage,
    shutdownMessage: "The gateway is shutting down; the answer was cut before its end",
  })

  const respond = makeRespond({ settings, deadlines, clientWatch, finish, turns, loop, egress, log, deadlineMessage, postStages: plugins.post })

  /** `trace` (from the server) receives the upstream timings and learns when a stream ends. */
  const handle = async (format: ClientFormat, req: Request, trace?: RequestTrace): Promise<Response> => {
    const startedAt = Date.now()
    // Ingress. The key is checked before a byte of the body is read: a caller without one holds nothing.
    const loaded: Loaded = {}
    let principal = preparer.authenticate(req.headers, loaded)
    while (principal instanceof Missing) {
      try {
        await runPromise(principal.load)
      } catch (e) {
        const refused = unreachable(format, e)
        if (refused !== undefined) return refused
        throw e
      }
      principal = preparer.authenticate(req.headers, loaded)
    }
    if ("_tag" in principal) return errorResponseIn(format, principal, CLOSE)
    // One property read: set only while the ledger spool is at its bound.
    if (admission.full) return errorResponseIn(format, spoolFull, CLOSE)
    // The key's request rate (one field read for a key without a limit): over it, 429 before the body is read.
    const rateRule = rateLimits?.ruleOf(principal.key)
    if (rateRule !== undefined) {
      const checked = rateLimits!.check(principal.hash, rateRule)
      const verdict = checked instanceof Promise ? await checked : checked
      if (!verdict.admitted) return rateLimited(format, rateRule, verdict)
    }
    options.authenticated?.(req, trace)
    // Counted before the read starts: a body over a cap is never read (the connection is closed).
    const slot = bodies?.enter(principal.hash, req)
    if (typeof slot === "string") return errorResponseIn(format, tooManyUnfinished(slot, bodies as UnfinishedBodies), CLOSE)
    const read = readCappedText(req, maxBody)
    if (!(read instanceof Promise)) {
      if (slot !== undefined) bodies?.leave(slot)
      return errorResponseIn(format, read, CLOSE)
    }
    const arriving = bodyDeadline(read, req.headers.get("content-length"))
    const bodyText = await (slot === undefined ? arriving : arriving.finally(() => bodies?.leave(slot)))
    if (bodyText === BODY_TIMED_OUT) return errorResponseIn(format, bodyTimeout, CLOSE)
    if (typeof bodyText !== "string") return errorResponseIn(format, bodyText, CLOSE)
    if (trace?.keepBody) trace.body = bodyText
    // Decode, the pre-model stages, routing and money.
    const preparation = preparer.prepare(req.headers, bodyText, principal, format)
    if (preparation.refused !== undefined) return refusal(generationStore, format, preparation.refused, principal, startedAt)
    let prepared: Prepared
    // Milliseconds of the request's deadline the stages used (0 when they waited on nothing: no clock read).
    let stagesMs = 0
    if (preparation.ready !== undefined) prepared = preparation.ready
    else {
      const waited = await untilDecided(preparation.pending, req.signal, deadlines, deadlineMessage, runExit)
      const decided = waited.decided
      stagesMs = waited.stagesMs
      if (Exit.isFailure(decided)) {
        const failure = decided.cause._tag === "Fail" ? decided.cause.error : undefined
        if (failure !== undefined) return refusal(generationStore, format, failure, principal, startedAt)
        const refused = unreachable(format, decided.cause)
        if (refused !== undefined) return refused
        throw new Error("prepare failed unexpectedly", { cause: decided.cause })
      }
      prepared = decided.value
    }
    // Made early when a stage's own calls named it (fusion's inner records have it as their parent).
    const generationId = prepared.generationId ?? newGenerationId()
    if (trace !== undefined) trace.generationId = generationId
    const life: RequestLife = { prepared, generationId, startedAt, requestId: trace?.id, finished: false }
    try {
      return await respond(format, req, life, trace, stagesMs)
    } catch (e) {
      // Whatever failed, the reservation is settled: finish runs once per request.
      finish(life, false, { endpoint: undefined, assembler: undefined, status: "failed", firstTokenAt: undefined })
      const refused = unreachable(format, e)
      if (refused !== undefined) return refused
      log({ requestId: trace?.id, generationId }, "a model request failed unexpectedly", e)
      return errorResponseIn(format, new InternalError({ message: "Internal server error" }), {})
    }
  }

  /** The POST handler of one client format (every format shares the deadlines, the lifecycle and the drain). */
  const handlerFor =
    (format: ClientFormat) =>
    (req: Request, trace?: RequestTrace): Promise<Response> =>
      handle(format, req, trace)

  return { handlerFor } as const
}
