/**
 * POST /v1/responses, the data plane: a native Bun route (DESIGN §4). One runtime call decides
 * (auth, decode, route, reserve); the upstream call, failover before the first byte and the
 * per-chunk relay are plain code (an Effect Stream step costs 15-20 µs per chunk); one more
 * runtime call, off the response's critical path, settles the reservation and records the
 * generation.
 */
import { Context, Effect, Either, Exit, Option, Runtime, type Types } from "effect"
import type { Settings } from "../../config/Config.js"
import { type ApiError, errorHeaders, envelopeOf, InternalError, RequestTimeout } from "../../domain/errors.js"
import { capUsage, costOf, estimateTokens } from "../../domain/pricing.js"
import { PlainAbort } from "../../providers/abort.js"
import { consumeEvents } from "../../providers/consume.js"
import { providerFor } from "../../providers/index.js"
import { type ProviderEvent, ProviderError, type Subscription, type UpstreamCall, type Usage } from "../../providers/types.js"
import { Router } from "../../routing/Router.js"
import type { Endpoint } from "../../services/Catalog.js"
import { type GenerationEntry, newGenerationId, type PreviousError } from "../../domain/generations.js"
import { isoTime } from "../../domain/time.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { Spend } from "../../services/Spend.js"
import { ContentPolicy } from "../../services/ContentPolicy.js"
import { Guardrails } from "../../services/Guardrails.js"
import { KeyStore } from "../../services/KeyStore.js"
import { PresetStore } from "../../services/PresetStore.js"
import { BODY_TIMED_OUT, bodyTimedOut, makeBodyDeadline, readCappedText } from "../body.js"
import { debugChunk, KEEP_ALIVE } from "./sse.js"
import { type FinishExtras, ResponseAssembler, resultBaseOf } from "./assembler.js"
import { streamGcPacer } from "./gc-pacer.js"
import { storedInput } from "./content.js"
import { type Loaded, makePreparer, Missing, type Prepared } from "./prepare.js"
import { toNormalizedRequest } from "./normalize.js"
import { apiErrorOf, asProviderError, failureCodeOf, isRetryable } from "./upstream-errors.js"
import { inputBound, outputBound } from "./bounds.js"
import { type Deadline, Deadlines } from "./deadlines.js"
import type { RequestTrace } from "../metrics.js"

type Services = KeyStore | ContentPolicy | PresetStore | Router | Guardrails | GenerationStore | Spend

export interface ResponsesRouteOptions {
  readonly settings: Settings
  /** The request's key is good: the server lifts its idle timeout (the route's own deadlines hold it now). */
  readonly authenticated?: (req: Request, trace: RequestTrace | undefined) => void
}

interface Attempt {
  readonly model: string
  readonly provider: string
  readonly status: number
}

/** What happened to one request, for settlement and the generation record. */
interface Outcome {
  readonly endpoint: Endpoint | undefined
  readonly assembler: ResponseAssembler | undefined
  readonly status: "completed" | "incomplete" | "failed" | "cancelled"
  readonly error?: { readonly message: string; readonly status: number; readonly previousErrors?: ReadonlyArray<PreviousError> }
  readonly firstTokenAt: number | undefined
  /** Nothing came from upstream (no byte, no usage): recorded at $0, whatever ended it. */
  readonly nothingCame?: boolean
  /** The upstream attempts, for broadcast's child spans. */
  readonly attempts?: ReadonlyArray<Attempt>
}

const NO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

/**
 * What a request is charged for on `endpoint`: the upstream's usage (the estimate of what was
 * produced when it gave none, or counts that are not counts), never past the bounds it was
 * reserved for, so a key is never charged more than its reservation.
 */
const chargedUsage = (prepared: Prepared, endpoint: Endpoint, assembler: ResponseAssembler | undefined): Usage => {
  let usage = assembler?.usage
  if (usage === undefined) {
    // No usage from upstream (aborted or failed mid-way, or untrustworthy): the estimate of what was produced.
    const produced = (assembler?.completionText.length ?? 0) + (assembler?.reasoningText.length ?? 0)
    usage = {
      inputTokens: prepared.estimatedInputTokens,
      cachedTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: produced === 0 ? 0 : estimateTokens(produced),
      reasoningTokens: 0,
    }
  }
  return capUsage(usage, inputBound(prepared.promptBound, endpoint), outputBound(prepared.request, endpoint).total)
}

/** Upstream events translated per write to a stream: ~11 KB of text deltas (~235 bytes each), under the sink's 16 KB. */
const EVENTS_PER_WRITE = 48
/** The most bytes given to the sink in one write (one `text_literals` event holds a whole read's deltas). */
const BYTES_PER_WRITE = 12 * 1024
/** Bun's ReadableStream takes a direct source; the DOM typings in scope do not know that overload. */
const DirectStream = ReadableStream as unknown as new (source: Bun.DirectUnderlyingSource<string>) => ReadableStream<Uint8Array>
const JSON_HEADERS = { "content-type": "application/json" }

const errorResponseWith = (e: ApiError, extraHeaders: Record<string, string>) =>
  new Response(JSON.stringify(envelopeOf(e)), {
    status: e.status,
    headers: { ...JSON_HEADERS, ...errorHeaders(e), ...extraHeaders },
  })

/** The HTTP-ish status an attempt ended with, for `service_metadata.attempts`. */
const statusOfFailure = (e: ProviderError) =>
  e.upstreamStatus ?? (e.kind === "timeout" ? 524 : e.kind === "overloaded" ? 529 : e.kind === "rate_limited" ? 429 : 502)

class DeadlineExceeded extends Error {}

/** nginx's "client closed request": the record of a request its client left before any answer. */
const CLIENT_CLOSED = 499
const CLIENT_CLOSED_MESSAGE = "The client closed the request before the answer began"

type TextLiterals = Extract<ProviderEvent, { readonly type: "text_literals" }>

/** More deltas than one write takes: translated in pieces (`translateLiteral`). */
const isLongLiteral = (event: ProviderEvent): boolean => event.type === "text_literals" && event.spans.length > 2 * EVENTS_PER_WRITE

/** The deltas of `event` from span `at` on, copied out of their read (which is then not kept). */
const restOfLiteral = (event: TextLiterals, at: number): TextLiterals => {
  const spans = event.spans
  const base = spans[at] as number
  const rest = new Array<number>(spans.length - at)
  for (let i = at; i < spans.length; i++) rest[i - at] = (spans[i] as number) - base
  return { type: "text_literals", source: event.source.slice(base, spans[spans.length - 1] as number), spans: rest }
}

/** Early refusals close the connection: a body the client may still be sending is not read. */
const CLOSE = { connection: "close" }

export const makeResponsesRoute = (runtime: Runtime.Runtime<Services>, options: ResponsesRouteOptions) => {
  const { settings } = options
  const maxBody = settings.maxBodyBytes
  const deadlineMessage = `The request exceeded the gateway's deadline of ${settings.requestTimeoutMs} ms`
  const deadlines = new Deadlines(settings.requestTimeoutMs)
  // A stream whose client has read nothing for this long is cut: armed only while a write waits on the client.
  const stalls = new Deadlines(settings.stallTimeoutMs)
  const stallMessage = `The client read nothing for ${settings.stallTimeoutMs} ms; the stream was cut`
  const shutdownMessage = "The gateway is shutting down; the answer was cut before its end"
  // Each open stream's cut for a shutdown's deadline (response.failed, then [DONE]).
  const openStreams = new Set<() => void>()
  // While waiting long for the first token, a comment line keeps proxies from closing the stream.
  const keepAliveMs = settings.streamKeepAliveMs
  const runExit = Runtime.runPromiseExit(runtime)
  const runPromise = Runtime.runPromise(runtime)
  const generationStore = Runtime.runSync(runtime)(GenerationStore)
  // ledger.durable_answers: an answer's last byte waits for the commit of its record (finalize's promise).
  const durable = generationStore.durable
  // Attempt outcomes go back to the router as plain calls (health, rolling stats, sticky sessions).
  const router = Context.get(runtime.context, Router)
  const preparer = makePreparer({
    keys: Context.get(runtime.context, KeyStore),
    policy: Context.get(runtime.context, ContentPolicy),
    presets: Context.get(runtime.context, PresetStore),
    router,
    guardrails: Context.get(runtime.context, Guardrails),
    spend: Context.get(runtime.context, Spend),
  }, settings)
  const bodyDeadline = makeBodyDeadline(settings.bodyTimeoutMs, maxBody)
  const upstreamLimits = { bodyBytes: settings.maxUpstreamBodyBytes, eventBytes: settings.maxUpstreamEventBytes }
  const bodyTimeout = bodyTimedOut(settings.bodyTimeoutMs)
  // Settlements and records in flight, so shutdown and tests can wait for them (drain).
  const pending = new Set<Promise<void>>()

  /**
   * Settles the reservation with the actual cost and enqueues the generation record. Never throws.
   * With `durable`, returns a promise that resolves once both are committed (undefined otherwise).
   */
  // Requests already settled: a second finalize (e.g. from the catch-all) does nothing.
  const finalized = new WeakSet<Prepared>()

  const finalize = (
    prepared: Prepared,
    generationId: string,
    startedAt: number,
    streamed: boolean,
    outcome: Outcome,
  ): Promise<void> | undefined => {
    if (finalized.has(prepared)) return undefined
    finalized.add(prepared)
    const { assembler, endpoint } = outcome
    const counted = endpoint !== undefined && outcome.nothingCame !== true
    const usage = counted ? chargedUsage(prepared, endpoint, assembler) : NO_USAGE
    const cost = counted ? Math.max(0, costOf(endpoint.pricing, usage)) : 0
    const isByok = endpoint?.isByok ?? false
    const now = Date.now()
    if (endpoint === undefined && Option.isNone(prepared.reservation)) return undefined
    let entry: GenerationEntry | undefined
    if (endpoint !== undefined) {
      const row: Types.Mutable<GenerationEntry> = {
        id: generationId,
        keyHash: prepared.principal.hash,
        userId: prepared.principal.userId,
        workspaceId: prepared.principal.workspaceId,
        model: endpoint.modelId,
        providerName: endpoint.provider.id,
        upstreamModel: endpoint.upstreamModel,
        createdAt: isoTime(startedAt),
        streamed,
        cancelled: outcome.status === "cancelled",
        finishReason: assembler?.finishReason ?? null,
        sessionId: prepared.sessionId,
        inputTokens: usage.inputTokens,
        cachedTokens: usage.cachedTokens,
        cacheWriteTokens: usage.cacheWriteTokens,
        outputTokens: usage.outputTokens,
        reasoningTokens: usage.reasoningTokens,
        totalCost: cost,
        isByok,
        generationTimeMs: Math.round(now - startedAt),
        latencyMs: outcome.firstTokenAt === undefined ? null : Math.round(outcome.firstTokenAt - startedAt),
        status: outcome.status,
        usageEstimated: counted && assembler?.usage === undefined,
        httpReferer: prepared.httpReferer,
        appTitle: prepared.appTitle,
        userAgent: prepared.userAgent,
      }
      // Assigned, not spread: a spread is a builtin call, and this runs once per request.
      if (outcome.error) {
        const error: Types.Mutable<NonNullable<GenerationEntry["error"]>> = {
          message: outcome.error.message,
          status: outcome.error.status,
          providerName: endpoint.provider.id,
        }
        if (outcome.error.previousErrors !== undefined) error.previousErrors = outcome.error.previousErrors
        row.error = error
      }
      // References only: the outbox reads them when a destination wants this generation.
      row.broadcast = {
        request: prepared.request,
        input: () => storedInput(prepared.request),
        completion: assembler?.completionText ?? null,
        reasoning: assembler && assembler.reasoningText !== "" ? assembler.reasoningText : null,
        attempts: outcome.attempts ?? [],
        pricing: endpoint.pricing,
        strategy: prepared.plan.strategy,
      }
      if (prepared.storeContent) {
        row.content = {
          input: storedInput(prepared.request),
          output: {
            completion: assembler?.completionText ?? null,
            reasoning: assembler && assembler.reasoningText !== "" ? assembler.reasoningText : null,
          },
        }
      }
      entry = row
    }
    if (entry !== undefined && Option.isNone(prepared.reservation)) {
      // Nothing held: one push onto the ledger queue, no fiber (the common, unlimited-key case).
      if (durable) return recordAndWait(entry)
      if (!generationStore.recordSync(entry)) console.error(`gateway: generation ${entry.id} recorded after shutdown`)
      return undefined
    }
    const countsForKey = !isByok || prepared.principal.key.include_byok_in_limit === 1
    const actualUsd = countsForKey ? cost : 0
    if (entry !== undefined && Option.isSome(prepared.reservation)) {
      // On a SQLite file the ledger settles the hold in the transaction that writes the row: no fiber.
      let settled: () => void = () => undefined
      const done = new Promise<void>((resolve) => {
        settled = resolve
      })
      if (generationStore.recordSettled(entry, { ...prepared.reservation.value, actualUsd }, settled)) {
        pending.add(done)
        void done.then(() => pending.delete(done))
        return durable ? done : undefined
      }
    }
    const program = Effect.gen(function* () {
      const spend = yield* Spend
      const settle = Option.isSome(prepared.reservation) ? spend.settle(prepared.reservation.value, actualUsd) : Effect.void
      if (entry === undefined) return yield* settle
      // Release the hold only once the ledger row that replaces it is durable: credits are
      // computed from the ledger, and in between the spend would be counted nowhere.
      yield* generationStore.recordDurable(entry).pipe(Effect.ensuring(settle))
    })
    const done: Promise<void> = runPromise(program).then(
      () => {
        pending.delete(done)
      },
      (e: unknown) => {
        pending.delete(done)
        console.error("gateway: settling a request failed", e)
      },
    )
    pending.add(done)
    return durable ? done : undefined
  }

  /** `recordSync` that resolves once the row's batch has committed (or been given up on, which is logged). */
  const recordAndWait = (entry: GenerationEntry): Promise<void> =>
    new Promise<void>((resolve) => {
      if (generationStore.recordSync(entry, resolve)) return
      console.error(`gateway: generation ${entry.id} recorded after shutdown`)
      resolve()
    })

  /** The answer, once `committed` (finalize's promise with durable answers) has resolved. */
  const after = (committed: Promise<void> | undefined, response: Response): Response | Promise<Response> =>
    committed === undefined ? response : committed.then(() => response)

  /** Resolves once every settlement and record started so far has been handed to the store. */
  const drain = async () => {
    while (pending.size > 0) await Promise.all([...pending])
  }

  /** `trace` (from the server) receives the upstream timings and learns when a stream ends. */
  const handle = async (req: Request, trace?: RequestTrace): Promise<Response> => {
    const startedAt = Date.now()
    // The key is checked before a byte of the body is read: a caller without one holds nothing.
    const loaded: Loaded = {}
    let principal = preparer.authenticate(req.headers, loaded)
    while (principal instanceof Missing) {
      await runPromise(principal.load)
      principal = preparer.authenticate(req.headers, loaded)
    }
    if ("_tag" in principal) return errorResponseWith(principal, CLOSE)
    options.authenticated?.(req, trace)
    const read = readCappedText(req, maxBody)
    if (!(read instanceof Promise)) return errorResponseWith(read, CLOSE)
    const bodyText = await bodyDeadline(read, req.headers.get("content-length"))
    if (bodyText === BODY_TIMED_OUT) return errorResponseWith(bodyTimeout, CLOSE)
    if (typeof bodyText !== "string") return errorResponseWith(bodyText, CLOSE)
    if (trace?.keepBody) trace.body = bodyText
    const preparation = preparer.prepare(req.headers, bodyText, principal)
    if (preparation.refused !== undefined) return errorResponseWith(preparation.refused, {})
    let prepared: Prepared
    if (preparation.ready !== undefined) prepared = preparation.ready
    else {
      const decided = await runExit(preparation.pending)
      if (Exit.isFailure(decided)) {
        const failure = decided.cause._tag === "Fail" ? decided.cause.error : undefined
        if (failure !== undefined) return errorResponseWith(failure, {})
        throw new Error("prepare failed unexpectedly", { cause: decided.cause })
      }
      prepared = decided.value
    }
    try {
      return await respond(req, prepared, startedAt, trace)
    } catch (e) {
      // Whatever failed, the reservation is settled: finalize runs once per request.
      finalize(prepared, "", startedAt, false, {
        endpoint: undefined,
        assembler: undefined,
        status: "failed",
        firstTokenAt: undefined,
      })
      console.error("gateway: a model request failed unexpectedly", e)
      return errorResponseWith(new InternalError({ message: "Internal server error" }), {})
    }
  }

  /** Everything after the decision: the upstream call, failover, and the answer. */
  const respond = async (req: Request, prepared: Prepared, startedAt: number, trace?: RequestTrace): Promise<Response> => {
    const { request, plan } = prepared
    const streaming = request.stream === true
    const generationId = newGenerationId()
    if (trace !== undefined) trace.generationId = generationId
    const idHeader = { "x-generation-id": generationId }
    const withMetadata = prepared.withMetadata

    // The upstream call is aborted when the client goes away or our deadline passes.
    // Plain (no native controller or listener): only the client's own signal is native.
    const upstreamAbort = new PlainAbort()
    const onClientAbort = () => upstreamAbort.abort(new Error("client disconnected"))
    // The request's signal is ours alone: its handler attribute, set and cleared, costs ~140 ns
    // against ~630 ns for addEventListener with `once` and removeEventListener (Bun 1.4.5).
    const clientSignal = req.signal
    clientSignal.onabort = onClientAbort
    // The client may have gone while we read the body or decided: its abort event already fired.
    if (clientSignal.aborted) onClientAbort()
    // Set by a stream's relay: a deadline must end a stream that waits on its client (no upstream read comes to end it).
    let cutOnDeadline: (() => void) | undefined
    const deadline = deadlines.add(() => {
      upstreamAbort.abort(new DeadlineExceeded())
      cutOnDeadline?.()
    })
    const cleanup = () => {
      deadlines.remove(deadline)
      clientSignal.onabort = null
    }

    const attempts: Array<Attempt> = []
    const serviceMetadata = (selected: Endpoint | undefined) => ({
      requested: plan.requested,
      strategy: plan.strategy,
      region: null,
      summary: selected
        ? `Routed ${plan.requested} to ${selected.provider.id} (${selected.upstreamModel}) after ${attempts.length} attempt(s)`
        : `No endpoint of ${plan.requested} answered`,
      attempt: Math.max(0, attempts.length - 1),
      is_byok: selected?.isByok ?? false,
      endpoints: {
        total: plan.candidates.length,
        available: plan.candidates.map((e) => ({ model: e.modelId, provider: e.provider.id, selected: e === selected })),
      },
      attempts,
      generation_time: Date.now() - startedAt,
    })

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
    for (const candidate of plan.candidates) {
      // Always bound the answer by what was reserved for it (outputBound), never by the upstream's default.
      const normalized = toNormalizedRequest(request, candidate.upstreamModel, outputBound(request, candidate).answer)
      if (Either.isLeft(normalized)) {
        cleanup()
        finalize(prepared, generationId, startedAt, streaming, {
          endpoint: candidate,
          assembler: undefined,
          status: "failed",
          error: { message: normalized.left.message, status: normalized.left.status },
          firstTokenAt: undefined,
          nothingCame: true,
        })
        return errorResponseWith(normalized.left, idHeader)
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
        // allow_fallbacks: false is already in the plan (only the first choice set is a candidate).
        if (!isRetryable(lastError)) break
      } finally {
        trace?.answered()
      }
    }

    if (call === undefined || endpoint === undefined) {
      cleanup()
      const deadlineHit = upstreamAbort.signal.reason instanceof DeadlineExceeded
      const cancelled = !deadlineHit && upstreamAbort.signal.aborted
      const last = attempts[attempts.length - 1]
      // What the caller gets, and what the record says (the attempts before it as previous errors).
      const answer: ApiError = deadlineHit
        ? new RequestTimeout({ message: deadlineMessage })
        : apiErrorOf(lastError ?? new ProviderError("connection", "no endpoint answered"), last?.provider ?? "upstream")
      const previousErrors = cancelled || deadlineHit ? failures : failures?.slice(0, -1)
      finalize(prepared, generationId, startedAt, streaming, {
        endpoint: inFlight ?? tried,
        attempts,
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
      })
      return errorResponseWith(answer, idHeader)
    }

    const chosen = endpoint
    const assembler = new ResponseAssembler(resultBaseOf(request, { model: chosen.modelId }), { stream: streaming })
    const finishExtras = (): FinishExtras => {
      // The answer shows what the key is charged: the same usage and cost as the record.
      const usage = chargedUsage(prepared, chosen, assembler)
      const extras: Types.Mutable<FinishExtras> = { cost: Math.max(0, costOf(chosen.pricing, usage)), isByok: chosen.isByok }
      if (usage !== assembler.usage) extras.usage = usage
      // Assigned, not spread (a builtin call per answer).
      if (withMetadata) {
        extras.serviceMetadata = serviceMetadata(chosen)
        if (prepared.metadataAlias) extras.metadataAlias = true
      }
      return extras
    }

    if (!streaming) {
      let firstTokenAt: number | undefined
      try {
        if (call.whole !== undefined) {
          // Read whole already: no iteration, no promise.
          firstTokenAt = Date.now()
          trace?.markFirstToken()
          assembler.push(call.whole)
        } else {
          for await (const batch of call.events) {
            if (firstTokenAt === undefined) {
              firstTokenAt = Date.now()
              trace?.markFirstToken()
            }
            assembler.push(batch)
          }
        }
      } catch (e) {
        cleanup()
        const error = asProviderError(e)
        const cancelled = upstreamAbort.signal.aborted
        if (!cancelled) router.recordFailure(chosen, error.kind)
        finalize(prepared, generationId, startedAt, false, {
          endpoint: chosen,
          assembler,
          status: cancelled ? "cancelled" : "failed",
          error: { message: error.message, status: statusOfFailure(error) },
          firstTokenAt,
        })
        if (upstreamAbort.signal.reason instanceof DeadlineExceeded) {
          return errorResponseWith(
            new RequestTimeout({ message: deadlineMessage }),
            idHeader,
          )
        }
        return errorResponseWith(apiErrorOf(error, chosen.provider.id), idHeader)
      }
      cleanup()
      assembler.finish(finishExtras())
      if (assembler.status === "failed") {
        // The upstream ended with an error of its own (finish reason "error"): no answer to give.
        router.recordFailure(chosen, "server")
        finalize(prepared, generationId, startedAt, false, {
          endpoint: chosen,
          assembler,
          status: "failed",
          error: { message: `Provider ${chosen.provider.id} ended the answer with an error`, status: 502 },
          firstTokenAt,
        })
        return errorResponseWith(
          apiErrorOf(new ProviderError("server", "the answer ended with an error"), chosen.provider.id),
          idHeader,
        )
      }
      router.recordSuccess(plan, chosen, {
        ttftMs: firstTokenAt === undefined ? undefined : firstTokenAt - attemptStartedAt,
        outputTokens: assembler.usage?.outputTokens ?? 0,
        generationMs: Date.now() - attemptStartedAt,
      })
      const committed = finalize(prepared, generationId, startedAt, false, {
        endpoint: chosen,
        attempts,
        assembler,
        status: assembler.status === "incomplete" ? "incomplete" : "completed",
        firstTokenAt,
      })
      const json = JSON.stringify(assembler.result())
      // A literal, not spreads of the shared header objects (a builtin call each, per answer).
      const headers = { "content-type": "application/json", "x-generation-id": generationId }
      return after(committed, new Response(json, { status: 200, headers: trace === undefined ? headers : trace.head(headers) }))
    }

    // Streaming: the first byte goes out now; from here a failure is `response.failed`, never a fallback.
    const upstreamBody = call.upstreamBody
    let firstTokenAt: number | undefined
    let done = false
    let lastWrite = Date.now()
    let keepAlive: ReturnType<typeof setInterval> | undefined
    let subscription: Subscription | undefined
    let stall: Deadline | undefined
    const end = (status: Outcome["status"], error?: Outcome["error"]): Promise<void> | undefined => {
      if (done) return undefined
      done = true
      streamGcPacer.closed()
      if (keepAlive !== undefined) clearInterval(keepAlive)
      if (stall !== undefined) stalls.remove(stall)
      openStreams.delete(cutForShutdown)
      cleanup()
      const committed = finalize(prepared, generationId, startedAt, true, { endpoint: chosen, attempts, assembler, status, error, firstTokenAt })
      trace?.endStream(status)
      return committed
    }
    let cutForShutdown: () => void = () => undefined
    // Bun's direct stream: each event string goes straight to the socket's sink, with no queue and
    // no TextEncoder per chunk (a 200-event relay: ~120 µs of CPU instead of ~240 µs, Bun 1.4).
    // Events are pushed to it as each upstream read is translated: no promise per event, so nothing
    // of a waiting stream outlives a young-generation collection (2,000 held streams each kept a
    // promise, its functions and scope per token until the next full collection).
    streamGcPacer.opened()
    const relay: Bun.DirectUnderlyingSource<string> = {
      type: "direct",
      pull(controller: ReadableStreamDirectController) {
        let settled: () => void = () => undefined
        const streamed = new Promise<void>((resolve) => {
          settled = resolve
        })
        // Backpressure: a write the client's socket cannot take yet returns a promise (Bun 1.4.5;
        // the sink keeps that chunk). Until it settles, nothing more is translated and the upstream
        // is paused, so a client that reads nothing holds a write or two here, not the whole answer.
        let blocked = false
        let pendingWrite: Promise<number> | undefined
        // Batches read while blocked (what one upstream read held), the first from `heldFrom`.
        const held: Array<ReadonlyArray<ProviderEvent>> = []
        let heldFrom = 0
        // The deltas of a long literal event not translated yet, before `held`.
        let heldLiteral: TextLiterals | undefined
        // The end or failure, once what came before it is written.
        let ending: (() => void) | undefined
        const write = (text: string | Uint8Array) => {
          lastWrite = Date.now()
          const written = controller.write(text)
          if (typeof written !== "number") blockedOn(written)
        }
        const blockedOn = (written: Promise<number>) => {
          pendingWrite = written
          written.then(
            () => {
              if (pendingWrite === written) drained()
            },
            () => undefined,
          )
          if (blocked) return
          blocked = true
          subscription?.pause()
          if (!done) stall = stalls.add(cutStalled)
        }
        const drained = () => {
          pendingWrite = undefined
          blocked = false
          if (stall !== undefined) stalls.remove(stall)
          stall = undefined
          if (done) return
          if (heldLiteral !== undefined) {
            const literal = heldLiteral
            heldLiteral = undefined
            translateLiteral(literal, 0)
            if (blocked) return
          }
          while (held.length > 0) {
            const events = held[0] as ReadonlyArray<ProviderEvent>
            const stopped = translate(events, heldFrom)
            if (stopped < events.length) {
              heldFrom = stopped
              return
            }
            held.shift()
            heldFrom = 0
          }
          if (blocked) return
          const next = ending
          ending = undefined
          if (next !== undefined) next()
          else subscription?.resume()
        }
        /** Translates and writes `events` from `start`; where it stopped on backpressure, or their length. */
        const translate = (events: ReadonlyArray<ProviderEvent>, start: number): number => {
          // In pieces of a few KB: Bun's sink sends a write of over 16 KB at once, apart from
          // what it buffers (a system call more per stream: 200 deltas make ~47 KB); smaller
          // writes go out together when the turn of the event loop ends.
          for (let from = start; from < events.length; ) {
            if (blocked) return from
            let to = from
            while (to < events.length && to - from < EVENTS_PER_WRITE && !isLongLiteral(events[to] as ProviderEvent)) to++
            if (to === from) {
              translateLiteral(events[from] as TextLiterals, 0)
              from++
              continue
            }
            writeOut(assembler.push(events, from, to))
            from = to
          }
          return events.length
        }
        const writeOut = (text: string | Uint8Array) => {
          if (typeof text === "string") {
            if (text !== "") write(text)
            return
          }
          // The sink copies what it is given: the view can be cut and the writer reused.
          for (let at = 0; at < text.length; at += BYTES_PER_WRITE) write(text.subarray(at, at + BYTES_PER_WRITE))
        }
        /**
         * A whole read's deltas in one event (a fast upstream), in pieces: a socket that fills stops it
         * part way, and the deltas not yet translated are kept, copied out of the read, not their SSE.
         */
        const translateLiteral = (event: TextLiterals, start: number) => {
          const spans = event.spans
          for (let at = start; at < spans.length; at += 2 * EVENTS_PER_WRITE) {
            if (blocked) {
              heldLiteral = restOfLiteral(event, at)
              return
            }
            writeOut(assembler.push([{ type: "text_literals", source: event.source, spans: spans.slice(at, at + 2 * EVENTS_PER_WRITE) }]))
          }
        }
        /** The client read nothing for the stall timeout: cut, recorded cancelled, charged for what was produced. */
        const cutStalled = () => {
          stall = undefined
          if (done) return
          end("cancelled", { message: stallMessage, status: 408 })
          subscription?.stop()
          upstreamAbort.abort(new Error("client stalled"))
          // With an error the connection is closed at once (a reset), not left to flush to a client that does not read.
          controller.close(new Error(stallMessage))
          settled()
        }
        cutForShutdown = () => {
          if (done) return
          const text = assembler.fail({ code: "server_shutting_down", message: shutdownMessage }, finishExtras())
          end("cancelled", { message: shutdownMessage, status: 503 })
          subscription?.stop()
          upstreamAbort.abort(new Error("server shutting down"))
          write(text)
          controller.close()
          settled()
        }
        openStreams.add(cutForShutdown)
        /** Durable answers: the terminal event and [DONE] go out once the record is committed. */
        const closeAfter = (committed: Promise<void> | undefined, last: string) =>
          void (committed ?? Promise.resolve()).then(() => {
            try {
              write(last)
              controller.close()
            } catch {
              // The client went away while the record was committed: nothing to send to.
            }
            settled()
          })
        write((request.debug?.echo_upstream_body === true ? debugChunk(upstreamBody) : "") + assembler.start())
        const fail = (e: unknown) => {
          if (done) return settled()
          if (upstreamAbort.signal.aborted && !(upstreamAbort.signal.reason instanceof DeadlineExceeded)) {
            end("cancelled")
            controller.close()
            return settled()
          }
          const error = asProviderError(e)
          const deadlineHit = upstreamAbort.signal.reason instanceof DeadlineExceeded
          if (!deadlineHit) router.recordFailure(chosen, error.kind)
          const message = deadlineHit ? deadlineMessage : `Provider ${chosen.provider.id} failed mid-stream: ${error.message}`
          const last = assembler.fail({ code: deadlineHit ? "timeout" : failureCodeOf(error), message }, finishExtras())
          if (!durable) write(last)
          const committed = end("failed", { message, status: deadlineHit ? 408 : statusOfFailure(error) })
          if (durable) return closeAfter(committed, last)
          controller.close()
          settled()
        }
        cutOnDeadline = () => {
          if (blocked || held.length > 0 || heldLiteral !== undefined) fail(new DeadlineExceeded())
        }
        const finishStream = () => {
          const last = assembler.finish(finishExtras())
          if (!durable) write(last)
          let committed: Promise<void> | undefined
          if (assembler.status === "failed") {
            // The upstream ended with an error of its own: the client got response.failed.
            router.recordFailure(chosen, "server")
            committed = end("failed", { message: `Provider ${chosen.provider.id} ended the answer with an error`, status: 502 })
          } else {
            router.recordSuccess(plan, chosen, {
              ttftMs: firstTokenAt === undefined ? undefined : firstTokenAt - attemptStartedAt,
              outputTokens: assembler.usage?.outputTokens ?? 0,
              generationMs: firstTokenAt === undefined ? undefined : Date.now() - firstTokenAt,
            })
            committed = end(assembler.status === "incomplete" ? "incomplete" : "completed")
          }
          if (durable) return closeAfter(committed, last)
          controller.close()
          settled()
        }
        subscription = consumeEvents(call, {
          batch(events) {
            if (done) return
            if (firstTokenAt === undefined) {
              firstTokenAt = Date.now()
              trace?.markFirstToken()
            }
            if (held.length > 0 || heldLiteral !== undefined) return void held.push(events)
            const stopped = translate(events, 0)
            if (stopped < events.length) {
              held.push(events)
              heldFrom = stopped
            }
          },
          end() {
            if (done) return settled()
            if (blocked || held.length > 0 || heldLiteral !== undefined) ending = finishStream
            else finishStream()
          },
          error(e) {
            // Our own abort ends the stream now; an upstream failure comes after what was read before it.
            if (done || upstreamAbort.signal.aborted || !(blocked || held.length > 0 || heldLiteral !== undefined)) fail(e)
            else ending = () => fail(e)
          },
        })
        // The start was written before the subscription: it may have found the socket full.
        if (blocked) subscription.pause()
        // Comments keep an idle connection open until the first token. Set once the events already
        // read are translated: an answer that came whole with its head ends above, with no timer.
        if (!done && firstTokenAt === undefined) {
          keepAlive = setInterval(() => {
            if (done || firstTokenAt !== undefined) return clearInterval(keepAlive)
            if (!blocked && Date.now() - lastWrite >= keepAliveMs) write(KEEP_ALIVE)
          }, Math.max(10, Math.floor(keepAliveMs / 2)))
        }
        return streamed
      },
      cancel() {
        // The client went away: stop the upstream at once and record what was used.
        upstreamAbort.abort(new Error("client disconnected"))
        subscription?.stop()
        end("cancelled")
      },
    }
    const body = new DirectStream(relay)
    if (trace !== undefined) trace.streaming = true
    const headers = {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      "x-generation-id": generationId,
    }
    return new Response(body, { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
  }

  /** Ends every open stream with `response.failed` (server_shutting_down) and [DONE]; returns how many. */
  const cutStreams = (): number => {
    const cuts = [...openStreams]
    for (const cut of cuts) cut()
    return cuts.length
  }

  return { handle, drain, cutStreams }
}
